// The reference over query halves (see query_block_attention.h).
#include "model/query_block_attention.h"

#include <torch/torch.h>

#include <cmath>
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

AttentionResult attention_query_blocks(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const AttentionMask& mask, const KernelOptions& options) {
  check_attention_inputs(q, k, v, mask);
  const int64_t batch = q.size(0), heads = q.size(1), time = q.size(2), dk = q.size(3);
  if (!mask.no_future_keys() || options.dropout_p > 0.0 || options.want_weights || time < 2)
    return attention_reference(q, k, v, mask, options);
  const double scale = 1.0 / std::sqrt(static_cast<double>(dk));
  const torch::Tensor q3 = (q * scale).reshape({batch * heads, time, dk});
  const torch::Tensor k3 = repeat_kv(k, heads).reshape({batch * heads, time, dk});
  const torch::Tensor v3 = repeat_kv(v, heads).reshape({batch * heads, time, dk});
  const torch::Tensor out = QueryBlockAttentionFunction::apply(q3, k3, v3, mask.bias(q.scalar_type()), batch,
                                                               /*blocks=*/2)
                                .view({batch, heads, time, dk});  // (B,Hq,T,dk)
  // A row without keys attended everywhere: its output is zeroed, which also stops its gradient.
  const torch::Tensor has_key = mask.has_key(q.scalar_type());
  return {has_key.defined() ? out * has_key : out, torch::Tensor()};
}

}  // namespace causal
