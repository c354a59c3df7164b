// Tiled online-softmax attention and its recomputing backward (see flash_attention.h for the contract).
#include "model/flash_attention.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

namespace causal {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr double kInf = std::numeric_limits<double>::infinity();

// Queries in "row layout" (B,Hkv,Tq*G,dk): row t*G + g holds query t of head kv*G + g. One matmul per KV
// head then serves all G query heads that read it (no repeated K/V), and a range of queries is a contiguous
// range of rows. (B,Hq,Tq,X) -> (B,Hkv,Tq*G,X); a copy unless the layout already matches (G = 1).
torch::Tensor to_rows(const torch::Tensor& x, int64_t kv_heads) {
  const int64_t batch = x.size(0), group = x.size(1) / kv_heads, time = x.size(2), width = x.size(3);
  return x
      .reshape({batch, kv_heads, group, time, width})    // (B,Hkv,G,Tq,X)
      .transpose(2, 3)                                   // (B,Hkv,Tq,G,X)
      .reshape({batch, kv_heads, time * group, width});  // (B,Hkv,Tq*G,X)
}

// (B,Hkv,Tq*G,X) -> (B,Hq,Tq,X), the inverse of to_rows. Always a fresh tensor, never a view of `rows`,
// so that what the autograd function returns and saves is not a view of one of its temporaries.
torch::Tensor from_rows(const torch::Tensor& rows, int64_t query_heads) {
  const int64_t batch = rows.size(0), kv_heads = rows.size(1), group = query_heads / kv_heads;
  const int64_t time = rows.size(2) / group, width = rows.size(3);
  torch::Tensor out = torch::empty({batch, query_heads, time, width}, rows.options());  // (B,Hq,Tq,X)
  out.view({batch, kv_heads, group, time, width})
      .copy_(rows.reshape({batch, kv_heads, time, group, width}).transpose(2, 3));  // (B,Hkv,G,Tq,X)
  return out;
}

// Not a tensor argument of apply(): the mask gets no gradient and may be undefined. Each block's mask is
// built from the parts when the block is computed.
struct MaskArgument {
  MaskParts parts;

  bool defined() const { return parts.defined(); }
  // (B|1,1,queries,keys) bool
  torch::Tensor block(int64_t query_start, int64_t queries, int64_t key_start, int64_t keys) const {
    return parts.block(query_start, queries, key_start, keys);
  }

  // For backward, in the context's saved data under the fields' names (undefined tensors left out).
  void save(AutogradContext* ctx) {
    parts.for_each_field([&](const char* name, const auto& value) {
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, torch::Tensor>) {
        if (value.defined()) ctx->saved_data[name] = value;
      } else {
        ctx->saved_data[name] = value;
      }
    });
  }
  static MaskArgument load(AutogradContext* ctx) {
    MaskArgument mask;
    mask.parts.for_each_field([&](const char* name, auto& value) {
      if (ctx->saved_data.count(name) == 0) return;
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, torch::Tensor>) {
        value = ctx->saved_data[name].toTensor();
      } else {
        value = ctx->saved_data[name].toInt();
      }
    });
    return mask;
  }
};

// One key block and the queries that may read at least one of its keys (in some batch row). Queries
// outside the range would only add exact zeros, so they are skipped: under a causal mask this halves the
// work, and a block no query may read is not visited at all.
struct KeyBlock {
  int64_t key_start = 0;
  int64_t keys = 0;
  int64_t query_start = 0;
  int64_t queries = 0;
};

// Flattened as 4 integers per block, so that backward can reuse forward's plan from the saved data.
std::vector<int64_t> plan_blocks(const MaskArgument& mask, int64_t tq, int64_t tk, int64_t block) {
  std::vector<int64_t> plan;
  if (!mask.defined()) {
    for (int64_t start = 0; start < tk; start += block) {
      plan.insert(plan.end(), {start, std::min(block, tk - start), 0, tq});
    }
    return plan;
  }
  // Per block, which query rows have an allowed key in it (any batch row): (blocks, Tq) bool, 1 byte each.
  std::vector<torch::Tensor> reads;
  for (int64_t start = 0; start < tk; start += block) {
    const torch::Tensor slice = mask.block(0, tq, start, std::min(block, tk - start));  // (B|1,1,Tq,bk)
    reads.push_back(slice.any(/*dim=*/3).flatten(0, 1).any(/*dim=*/0));                 // (Tq)
  }
  const torch::Tensor table = torch::stack(reads).to(torch::kCPU).contiguous();  // (blocks, Tq)
  const auto rows = table.accessor<bool, 2>();
  for (int64_t b = 0; b < table.size(0); ++b) {
    int64_t first = -1, last = -1;
    for (int64_t i = 0; i < tq; ++i) {
      if (!rows[b][i]) continue;
      if (first < 0) first = i;
      last = i;
    }
    if (first < 0) continue;
    const int64_t start = b * block;
    plan.insert(plan.end(), {start, std::min(block, tk - start), first, last - first + 1});
  }
  return plan;
}

KeyBlock block_at(const std::vector<int64_t>& plan, std::size_t index) {
  return {plan[4 * index], plan[4 * index + 1], plan[4 * index + 2], plan[4 * index + 3]};
}

// Scores of one block for queries already multiplied by 1/sqrt(dk), forbidden keys at -inf so that exp()
// gives exactly 0. q_rows (B,Hkv,n*G,dk), keys (B,Hkv,bk,dk) -> (B,Hkv,n*G,bk) in the accumulation dtype.
torch::Tensor block_scores(const torch::Tensor& q_rows, const torch::Tensor& keys, const MaskArgument& mask,
                           const KeyBlock& kb, int64_t group, torch::ScalarType acc) {
  torch::Tensor scores = torch::matmul(q_rows, keys.transpose(-2, -1)).to(acc);  // (B,Hkv,n*G,bk)
  if (mask.defined()) {
    const int64_t batch = scores.size(0), kv_heads = scores.size(1);
    // The mask slice is shared by every head: (B|1,1,n,1,bk) broadcasts over Hkv and G.
    const torch::Tensor forbidden =
        mask.block(kb.query_start, kb.queries, kb.key_start, kb.keys).logical_not();
    scores.view({batch, kv_heads, kb.queries, group, kb.keys}).masked_fill_(forbidden.unsqueeze(3), -kInf);
  }
  return scores;
}

// Sums and the running accumulator stay in float for half/bfloat16 inputs.
torch::ScalarType accumulation_type(const torch::Tensor& x) {
  return x.scalar_type() == torch::kHalf || x.scalar_type() == torch::kBFloat16 ? torch::kFloat
                                                                                : x.scalar_type();
}

class FlashAttentionFunction : public torch::autograd::Function<FlashAttentionFunction> {
 public:
  // q (B,Hq,Tq,dk), k/v (B,Hkv,Tk,dk) -> (B,Hq,Tq,dk). Runs without autograd recording (apply's rule).
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const MaskArgument& mask, int64_t block) {
    const int64_t hq = q.size(1), tq = q.size(2), dk = q.size(3), hkv = k.size(1), tk = k.size(2);
    const int64_t group = hq / hkv;
    const torch::ScalarType acc = accumulation_type(q);
    const std::vector<int64_t> plan = plan_blocks(mask, tq, tk, block);
    const torch::Tensor q_rows =
        to_rows(q, hkv) * (1.0 / std::sqrt(static_cast<double>(dk)));  // (B,Hkv,Tq*G,dk)

    const auto acc_options = q.options().dtype(acc);
    const std::vector<int64_t> row_shape = {q.size(0), hkv, tq * group, 1};
    torch::Tensor running_max = torch::full(row_shape, -kInf, acc_options);  // m (B,Hkv,Tq*G,1)
    torch::Tensor running_sum = torch::zeros(row_shape, acc_options);        // l (B,Hkv,Tq*G,1)
    torch::Tensor weighted =
        torch::zeros({q.size(0), hkv, tq * group, dk}, acc_options);  // u (B,Hkv,Tq*G,dk)

    for (std::size_t i = 0; i < plan.size() / 4; ++i) {
      const KeyBlock kb = block_at(plan, i);
      const int64_t row = kb.query_start * group, rows = kb.queries * group;
      const torch::Tensor scores =
          block_scores(q_rows.narrow(2, row, rows), k.narrow(2, kb.key_start, kb.keys), mask, kb, group,
                       acc);                               // (B,Hkv,n*G,bk)
      torch::Tensor m = running_max.narrow(2, row, rows);  // views: updated in place
      torch::Tensor l = running_sum.narrow(2, row, rows);
      torch::Tensor u = weighted.narrow(2, row, rows);
      const torch::Tensor m_new = torch::maximum(m, scores.amax(-1, /*keepdim=*/true));  // (B,Hkv,n*G,1)
      // A row with no allowed key so far has m_new = -inf; shifting by 0 instead keeps exp() at exactly 0
      // (exp(-inf - -inf) would be NaN).
      const torch::Tensor shift = m_new.masked_fill(m_new == -kInf, 0.0);
      const torch::Tensor p = torch::exp(scores - shift);   // (B,Hkv,n*G,bk), block weights before 1/l
      const torch::Tensor rescale = torch::exp(m - shift);  // e^(m_old - m_new); 0 when nothing was seen
      l.mul_(rescale).add_(p.sum(-1, /*keepdim=*/true));
      u.mul_(rescale).add_(torch::matmul(p.to(v.scalar_type()), v.narrow(2, kb.key_start, kb.keys)).to(acc));
      m.copy_(m_new);
    }

    // l > 0 exactly when the row has an allowed key (its largest score contributes e^0 = 1).
    const torch::Tensor has_key = running_sum > 0;  // (B,Hkv,Tq*G,1)
    const torch::Tensor out_rows = weighted / running_sum.masked_fill(has_key.logical_not(), 1.0);  // 0 rows
    // Log-sum-exp per row, so that backward's exp(s - lse) is the normalised weight. 0 for an empty row:
    // its scores are all -inf there, so its weights are exactly 0 again.
    const torch::Tensor lse =
        torch::where(has_key, running_max + running_sum.log(), torch::zeros_like(running_sum));
    const torch::Tensor out = from_rows(out_rows.to(q.scalar_type()), hq);  // (B,Hq,Tq,dk)

    ctx->save_for_backward({q, k, v, out, lse});
    MaskArgument(mask).save(ctx);
    ctx->saved_data["plan"] = plan;
    return out;
  }

  // FlashAttention backward, one key block at a time from the saved tensors: P = exp(S - lse),
  // dV = P^T dO, dP = dO V^T, dS = P * (dP - D) with D = rowsum(dO * O), dQ += dS K, dK = dS^T Q (both
  // times 1/sqrt(dk)). In row layout dV and dK sum over the G query heads of a KV head by themselves.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    const MaskArgument mask = MaskArgument::load(ctx);
    const std::vector<int64_t> plan = ctx->saved_data["plan"].toIntVector();
    const int64_t hq = q.size(1), dk = q.size(3), hkv = k.size(1), group = hq / hkv;
    const torch::ScalarType acc = accumulation_type(q);
    const double scale = 1.0 / std::sqrt(static_cast<double>(dk));

    const torch::Tensor& d_out = grads[0];                 // (B,Hq,Tq,dk)
    const torch::Tensor q_rows = to_rows(q, hkv) * scale;  // (B,Hkv,Tq*G,dk)
    const torch::Tensor d_out_rows = to_rows(d_out, hkv);  // (B,Hkv,Tq*G,dk)
    const torch::Tensor delta = to_rows((d_out.to(acc) * out.to(acc)).sum(-1, /*keepdim=*/true), hkv);  // D
    torch::Tensor dq_rows = torch::zeros(q_rows.sizes(), q.options().dtype(acc));  // (B,Hkv,Tq*G,dk)
    torch::Tensor dk_all = torch::zeros(k.sizes(), k.options().dtype(acc));        // (B,Hkv,Tk,dk)
    torch::Tensor dv_all = torch::zeros(v.sizes(), v.options().dtype(acc));        // (B,Hkv,Tk,dk)

    for (std::size_t i = 0; i < plan.size() / 4; ++i) {
      const KeyBlock kb = block_at(plan, i);
      const int64_t row = kb.query_start * group, rows = kb.queries * group;
      const torch::Tensor qb = q_rows.narrow(2, row, rows);                       // (B,Hkv,n*G,dk)
      const torch::Tensor dob = d_out_rows.narrow(2, row, rows);                  // (B,Hkv,n*G,dk)
      const torch::Tensor keys = k.narrow(2, kb.key_start, kb.keys);              // (B,Hkv,bk,dk)
      const torch::Tensor values = v.narrow(2, kb.key_start, kb.keys);            // (B,Hkv,bk,dk)
      const torch::Tensor scores = block_scores(qb, keys, mask, kb, group, acc);  // (B,Hkv,n*G,bk)
      const torch::Tensor p = torch::exp(scores - lse.narrow(2, row, rows));      // (B,Hkv,n*G,bk)
      const torch::Tensor p_in = p.to(v.scalar_type());
      // Each key block occurs once in the plan, so its dK/dV rows are written, not accumulated.
      dv_all.narrow(2, kb.key_start, kb.keys)
          .copy_(torch::matmul(p_in.transpose(-2, -1), dob));                         // (B,Hkv,bk,dk)
      const torch::Tensor dp = torch::matmul(dob, values.transpose(-2, -1)).to(acc);  // (B,Hkv,n*G,bk)
      const torch::Tensor ds = (p * (dp - delta.narrow(2, row, rows))).to(q.scalar_type());
      dq_rows.narrow(2, row, rows).add_(torch::matmul(ds, keys).to(acc));                      // unscaled dQ
      dk_all.narrow(2, kb.key_start, kb.keys).copy_(torch::matmul(ds.transpose(-2, -1), qb));  // scaled by qb
    }
    const torch::Tensor dq = from_rows((dq_rows * scale).to(q.scalar_type()), hq);  // (B,Hq,Tq,dk)
    return {dq, dk_all.to(k.scalar_type()), dv_all.to(v.scalar_type()), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

AttentionResult attention_flash(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const AttentionMask& mask, const KernelOptions& options) {
  check_attention_inputs(q, k, v, mask);
  // The tiled kernel never holds a block's weights long enough to drop them consistently in backward.
  TORCH_CHECK(options.dropout_p == 0.0,
              "[attention] \"flash\" applies no attention-weight dropout, got dropout ", options.dropout_p,
              " (hint: dropout 0, or attention \"reference\" / \"sdpa\")");
  TORCH_CHECK(!options.want_weights,
              "[attention] \"flash\" cannot return attention weights (the reference can)");
  TORCH_CHECK(options.block >= 1, "[attention] expected flash block >= 1, got ", options.block);
  // Its backward runs outside autocast: every product there needs one dtype.
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(),
              "[attention] expected q, k and v of one dtype, got ", q.scalar_type(), ", ", k.scalar_type(),
              " and ", v.scalar_type());
  return {FlashAttentionFunction::apply(q, k, v, MaskArgument{mask.parts()}, options.block), torch::Tensor()};
}

}  // namespace causal
