// Reference attention over query blocks (see query_block_attention.h).
#include "model/query_block_attention.h"

#include <torch/torch.h>

#include <vector>

#include "model/softmax_compat.h"

namespace causal {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class QueryBlockAttentionFunction : public torch::autograd::Function<QueryBlockAttentionFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q3, const torch::Tensor& k3,
                               const torch::Tensor& v3, const torch::Tensor& bias, int64_t batch,
                               int64_t blocks) {
    const int64_t time = q3.size(1);
    std::vector<int64_t> ends;
    variable_list saved{q3, k3, v3};
    std::vector<torch::Tensor> outs;
    for (int64_t i = 0; i < blocks; ++i) {
      const int64_t start = i * time / blocks, end = (i + 1) * time / blocks, rows = end - start;
      const torch::Tensor weights =
          softmax_float_accumulated(biased_scores(q3, k3, bias, batch, start, rows, end));  // (B*H,rows,end)
      outs.push_back(torch::bmm(weights, v3.narrow(1, 0, end)));                            // (B*H,rows,dk)
      saved.push_back(weights);
      ends.push_back(end);
    }
    ctx->save_for_backward(saved);
    ctx->saved_data["ends"] = ends;
    return torch::cat(outs, 1);  // (B*H,T,dk)
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &q3 = saved[0], &k3 = saved[1], &v3 = saved[2];
    const std::vector<int64_t> ends = ctx->saved_data["ends"].toIntVector();
    const torch::Tensor d_out = grads[0].contiguous();  // (B*H,T,dk)
    torch::Tensor dq = torch::empty_like(q3), dk, dv;
    // The last block reads every key, so its products create dK and dV; the earlier ones add into prefixes.
    for (size_t i = ends.size(); i-- > 0;) {
      const int64_t start = i == 0 ? 0 : ends[i - 1], end = ends[i], rows = end - start;
      const torch::Tensor& weights = saved[3 + i];  // (B*H,rows,end)
      const torch::Tensor d_block = d_out.narrow(1, start, rows);
      const torch::Tensor keys = k3.narrow(1, 0, end), values = v3.narrow(1, 0, end);
      const torch::Tensor d_scores =
          softmax_float_accumulated_backward(torch::bmm(d_block, values.transpose(1, 2)), weights);
      const torch::Tensor weights_t = weights.transpose(1, 2), d_scores_t = d_scores.transpose(1, 2);
      const torch::Tensor queries = q3.narrow(1, start, rows);
      if (!dk.defined()) {
        dv = torch::bmm(weights_t, d_block);
        dk = torch::bmm(d_scores_t, queries);
      } else {
        dv.narrow(1, 0, end).baddbmm_(weights_t, d_block);
        dk.narrow(1, 0, end).baddbmm_(d_scores_t, queries);
      }
      dq.narrow(1, start, rows).copy_(torch::bmm(d_scores, keys));
    }
    return {dq, dk, dv, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

at::Tensor biased_scores(const at::Tensor& q3, const at::Tensor& k3, const at::Tensor& bias, int64_t batch,
                         int64_t start, int64_t rows, int64_t keys) {
  const int64_t rows_all = q3.size(0);
  torch::Tensor scores = torch::empty({rows_all, rows, keys}, bias.options());
  scores.view({batch, rows_all / batch, rows, keys}).copy_(bias.narrow(2, start, rows).narrow(3, 0, keys));
  return scores.baddbmm_(q3.narrow(1, start, rows), k3.narrow(1, 0, keys).transpose(1, 2), /*beta=*/1.0,
                         /*alpha=*/1.0);
}

at::Tensor attention_query_blocks(const at::Tensor& q3, const at::Tensor& k3, const at::Tensor& v3,
                                  const at::Tensor& bias, int64_t batch, int64_t blocks) {
  TORCH_CHECK(q3.dim() == 3 && k3.sizes() == q3.sizes() && v3.sizes() == q3.sizes(),
              "[attention] expected q, k and v (B*H,T,dk) of one shape, got ", q3.sizes(), ", ", k3.sizes(),
              " and ", v3.sizes());
  TORCH_CHECK(k3.scalar_type() == q3.scalar_type() && v3.scalar_type() == q3.scalar_type() &&
                  bias.scalar_type() == q3.scalar_type(),
              "[attention] expected q, k, v and the bias in one dtype, got ", q3.scalar_type(), ", ",
              k3.scalar_type(), ", ", v3.scalar_type(), " and ", bias.scalar_type());
  TORCH_CHECK(batch >= 1 && q3.size(0) % batch == 0, "[attention] expected B*H rows divisible by B=", batch,
              ", got ", q3.size(0));
  TORCH_CHECK(bias.dim() == 4 && bias.size(2) == q3.size(1) && bias.size(3) == q3.size(1),
              "[attention] expected a bias (B|1,1,T,T) with T=", q3.size(1), ", got ", bias.sizes());
  TORCH_CHECK(blocks >= 1 && blocks <= q3.size(1), "[attention] expected 1..T query blocks, got ", blocks);
  return QueryBlockAttentionFunction::apply(q3, k3, v3, bias, batch, blocks);
}

}  // namespace causal
