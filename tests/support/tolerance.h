// Test helper: comparing two computations of one quantity that differ only in rounding (another kernel,
// BLAS, thread split or summation order), with bounds derived from float32 rounding in one place
// (docs/numerics.md), and the numerics matrix's set-up (CAUSAL_TEST_THREADS, BLAS kernel checks).
#pragma once

#include <ATen/Version.h>
#include <dlfcn.h>
#include <torch/torch.h>
// Torch first: its glog macros must not replace Catch's.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "core/environment.h"
#include "core/runtime.h"

namespace causal::testing {

// ---------------------------------------------------------------------------------------------------------
// Elementwise comparison.

// The outcome of comparing `a` with the reference `b` element by element against an allowed difference;
// converts to true when every element is within it (a NaN anywhere fails), prints its worst element.
struct Closeness {
  std::string what;            // what was compared, for the message
  int64_t elements = 0;        // elements compared
  double worst_ratio = 0.0;    // max |a - b| / allowed over the elements; <= 1 passes
  std::vector<int64_t> index;  // of the worst element
  double a = 0.0, b = 0.0;     // its values
  double allowed = 0.0;        // its allowed difference
  double largest_diff = 0.0;   // max |a - b| over all elements (not necessarily the worst element's)
  std::string shape_error;     // non-empty when the shapes differ

  explicit operator bool() const { return shape_error.empty() && worst_ratio <= 1.0; }

  std::string describe() const {
    std::ostringstream out;
    out << (what.empty() ? "tensors" : what) << ": ";
    if (!shape_error.empty()) return out.str() + shape_error;
    out << "worst |a-b|/allowed " << worst_ratio << " at [";
    for (size_t i = 0; i < index.size(); ++i) out << (i ? "," : "") << index[i];
    out << "]: a " << a << ", b " << b << ", |a-b| " << std::abs(a - b) << ", allowed " << allowed
        << "; largest |a-b| " << largest_diff << " over " << elements << " elements";
    return out.str();
  }
};

inline std::ostream& operator<<(std::ostream& out, const Closeness& c) { return out << c.describe(); }

namespace detail {

// With CAUSAL_NUMERICS_LOG set to a file, every comparison appends "test, what, worst ratio, largest
// |a-b|, allowed at the worst element" to it (tab-separated): the measured ratios of docs/numerics.md.
inline void log_closeness(const Closeness& c) {
  const auto path = environment_variable("CAUSAL_NUMERICS_LOG");
  if (!path) return;
  std::ofstream(*path, std::ios::app)
      << Catch::getResultCapture().getCurrentTestName() << '\t' << c.what << '\t' << c.worst_ratio << '\t'
      << c.largest_diff << '\t' << c.allowed << '\n';
}

}  // namespace detail

// |a - b| <= allowed elementwise; `allowed` broadcasts to the shape of `b` (a scalar tensor is one bound
// for all). Equal values pass with any bound, equal infinities included; NaN never passes.
inline Closeness within(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& allowed,
                        const std::string& what = "") {
  Closeness c;
  c.what = what;
  if (a.sizes() != b.sizes()) {
    std::ostringstream msg;
    msg << "shapes differ: " << a.sizes() << " vs " << b.sizes();
    c.shape_error = msg.str();
    return c;
  }
  torch::NoGradGuard no_grad;
  const torch::Tensor x = a.detach().to(torch::kDouble), y = b.detach().to(torch::kDouble);
  // A negative bound allows nothing (never a pass by a negative ratio).
  const torch::Tensor limit = allowed.detach().to(torch::kDouble).clamp_min(0).expand_as(y);
  const torch::Tensor diff = torch::where(x == y, torch::zeros_like(x), (x - y).abs());  // inf == inf
  // 0/0 (exactly equal where nothing is allowed) is 0; d/0 is inf; NaN stays NaN and fails.
  const torch::Tensor ratio = torch::where(diff == 0, torch::zeros_like(diff), diff / limit);
  c.elements = ratio.numel();
  if (c.elements == 0) return c;
  const torch::Tensor flat = ratio.flatten();
  const bool has_nan = flat.isnan().any().item<bool>();
  const int64_t at = has_nan ? flat.isnan().nonzero()[0][0].item<int64_t>() : flat.argmax().item<int64_t>();
  c.worst_ratio = has_nan ? std::nan("") : flat[at].item<double>();
  c.largest_diff = diff.max().item<double>();
  int64_t rest = at;
  c.index.assign(static_cast<size_t>(b.dim()), 0);
  for (int64_t d = b.dim() - 1; d >= 0; --d) {
    c.index[static_cast<size_t>(d)] = rest % b.size(d);
    rest /= b.size(d);
  }
  c.a = x.flatten()[at].item<double>();
  c.b = y.flatten()[at].item<double>();
  c.allowed = limit.flatten()[at].item<double>();
  detail::log_closeness(c);
  return c;
}

// torch.allclose's rule, b the reference: |a - b| <= atol + rtol * |b|.
inline Closeness allclose(const torch::Tensor& a, const torch::Tensor& b, double atol, double rtol,
                          const std::string& what = "") {
  return within(a, b, atol + rtol * b.detach().to(torch::kDouble).abs(), what);
}

// A scalar pair (losses, norms) under the same rule.
inline Closeness scalars_close(double a, double b, double allowed, const std::string& what = "") {
  return within(torch::tensor(a, torch::kDouble), torch::tensor(b, torch::kDouble),
                torch::tensor(allowed, torch::kDouble), what);
}

// ---------------------------------------------------------------------------------------------------------
// Bounds. Every bound is for the difference of two float32 computations of one exact value (or of one
// float32 computation and an exact float64 one, where it is twice what is needed). The one fact used
// (Higham, Accuracy and Stability of Numerical Algorithms, eq. 3.5 and Lemma 3.1): a sum or dot product of
// n terms, in ANY order (blocked, pairwise, with or without FMA, split over threads or ranks), is within
// gamma_n * M of the exact value, M = sum of the terms' magnitudes, gamma_n = n*u/(1 - n*u) ~ n*u, u = 2^-24
// the unit roundoff of float32. Two such sums differ by at most 2*n*u*M = n * kEps32 * M.

constexpr double kEps32 = 0x1p-23;   // float32 machine epsilon, 2u
constexpr double kEpsBf16 = 0x1p-7;  // bfloat16 machine epsilon (8 significant bits), 2u

// (1) Two orders of a reduction of n terms whose magnitudes sum to `magnitude`.
inline double reduction_bound(int64_t n, double magnitude) {
  return static_cast<double>(n) * kEps32 * magnitude;
}

// (2) Two orders of matmul(a, b) + bias, (..., m, n) = (..., m, k) @ (..., k, n) + (n), elementwise: a sum
// of k + 1 terms, (1) with the magnitudes |a| @ |b| + |bias|.
inline torch::Tensor product_bound(const torch::Tensor& a, const torch::Tensor& b,
                                   const torch::Tensor& bias = {}) {
  torch::NoGradGuard no_grad;
  torch::Tensor magnitude =
      torch::matmul(a.detach().to(torch::kDouble).abs(), b.detach().to(torch::kDouble).abs());
  if (bias.defined()) magnitude = magnitude + bias.detach().to(torch::kDouble).abs();
  return magnitude * (static_cast<double>(a.size(-1) + (bias.defined() ? 1 : 0)) * kEps32);
}

// (3) Attention softmax(q k^T / sqrt(dk)) v and its gradients for one upstream gradient, elementwise
// (B,Hq,Tq,dk) and (B,Hkv,Tk,dk). Computed in float64 from the inputs, never from a kernel under test.
struct AttentionBounds {
  torch::Tensor out, dq, dk, dv;
  torch::Tensor row_sum;  // of the weights, (B,Hq,Tq); a row with no allowed key sums to exactly 0
};

// `allowed` (B|1,1,Tq,Tk) bool or undefined (every key); `upstream` like q, or undefined (no gradients).
inline AttentionBounds attention_bounds(const torch::Tensor& q, const torch::Tensor& k,
                                        const torch::Tensor& v, const torch::Tensor& allowed,
                                        const torch::Tensor& upstream) {
  torch::NoGradGuard no_grad;
  const int64_t group = q.size(1) / k.size(1), dk = q.size(3), tq = q.size(2), tk = k.size(2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(dk)), eps = kEps32;
  const auto dbl = [](const torch::Tensor& t) { return t.detach().to(torch::kDouble); };
  const torch::Tensor qd = dbl(q), kd = dbl(k).repeat_interleave(group, 1),
                      vd = dbl(v).repeat_interleave(group, 1);
  const torch::Tensor ok = allowed.defined() ? allowed.expand({q.size(0), q.size(1), tq, tk})
                                             : torch::ones({q.size(0), q.size(1), tq, tk}, torch::kBool);
  // Scores: a dot product of dk terms (1), the largest over the allowed scores.
  const torch::Tensor score_mag = torch::matmul(qd.abs(), kd.abs().transpose(-2, -1)) * scale;  // (B,H,Tq,Tk)
  const double d_score =
      static_cast<double>(dk) * eps * score_mag.masked_fill(ok.logical_not(), 0).max().item<double>();
  const torch::Tensor scores = (torch::matmul(qd, kd.transpose(-2, -1)) * scale)
                                   .masked_fill(ok.logical_not(), -std::numeric_limits<double>::infinity());
  const torch::Tensor p = torch::nan_to_num(scores.softmax(-1), 0.0);  // rows with no key: 0
  // Weights, relative: softmax turns score differences d into p*(d_j - sum_i p_i d_i), at most 2*d_score;
  // its normaliser is a sum of Tk terms and flash rescales the running sum once per key block (<= Tk), each
  // one rounding; exp, subtraction and division round once each.
  const double rel_p = 2.0 * d_score + (2.0 * static_cast<double>(tk) + 3.0) * eps;
  AttentionBounds bounds;
  // Row sums of the weights: their relative difference, summed over Tk terms (1).
  bounds.row_sum = (rel_p + static_cast<double>(tk) * eps) * p.sum(-1);
  // Output: the weighted sum of Tk values (1) on top of the weights' relative difference.
  bounds.out = (rel_p + static_cast<double>(tk) * eps) * torch::matmul(p, vd.abs());
  if (!upstream.defined()) return bounds;
  const torch::Tensor gd = dbl(upstream).abs();
  // Backward, magnitudes of each product: dP = g v^T (dk terms), D = rowsum(P * dP) (Tk terms),
  // dS = P * (dP - D); dQ = dS k / sqrt(dk) (Tk terms), dK = dS^T q / sqrt(dk) and dV = P^T g (Tq terms),
  // then summed over the G query heads of a KV head (G terms).
  const torch::Tensor dp_mag = torch::matmul(gd, vd.abs().transpose(-2, -1));          // (B,H,Tq,Tk)
  const torch::Tensor ds_mag = p * (dp_mag + (p * dp_mag).sum(-1, /*keepdim=*/true));  // (B,H,Tq,Tk)
  const double rel_ds = rel_p + static_cast<double>(dk + tk + 2) * eps;
  const auto per_kv_head = [&](const torch::Tensor& t) {  // (B,Hq,Tk,dk) -> (B,Hkv,Tk,dk)
    return t.view({t.size(0), t.size(1) / group, group, t.size(2), t.size(3)}).sum(2);
  };
  const double rows = static_cast<double>(tq * group);
  bounds.dq = (rel_ds + static_cast<double>(tk) * eps) * torch::matmul(ds_mag, kd.abs()) * scale;
  bounds.dk = (rel_ds + rows * eps) * per_kv_head(torch::matmul(ds_mag.transpose(-2, -1), qd.abs())) * scale;
  bounds.dv = (rel_p + rows * eps) * per_kv_head(torch::matmul(p.transpose(-2, -1), gd));
  return bounds;
}

// (4) A whole model. Errors made inside reach its outputs through pre-norm blocks whose sub-layers see
// normalised inputs; taking each sub-layer's gain relative to the residual stream as at most 1, the output
// differs by at most the sum of the reduction lengths along the computation (path length, below) times eps
// times the output's scale (the row's largest |logit|; the tensor's largest |gradient|). docs/numerics.md
// has the accounting; the measured ratios there show the gain assumption's margin.

// One attention sub-layer (projections of width d, heads of width dk, `keys` keys), without its norm.
inline int64_t attention_path(int64_t d, int64_t dk, int64_t keys) {
  return d /* q,k,v */ + dk /* scores */ + 2 * keys /* softmax sum, weighted sum */ + d /* o_proj */;
}

// Reductions along the forward pass to the logits, for `keys` keys and positions below `max_position`.
inline int64_t forward_path(const ModelConfig& c, int64_t keys, int64_t max_position) {
  const int64_t d = c.d_model, dk = c.head_dim();
  const int64_t attention = d /* norm */ + attention_path(d, dk, keys) + (c.qk_norm ? dk : 0) +
                            (c.position == PositionKind::kRope ? max_position : 0) /* angle p*theta */;
  const int64_t ffn = d /* norm */ + d /* in (and gate) */ + c.ffn_hidden /* out */;
  return static_cast<int64_t>(c.inputs.size()) /* summed embeddings */ + c.n_layers * (attention + ffn + 2) +
         d /* final norm */ + d /* head */;
}

// The same for parameter gradients: forward, then backward's transposed products, then the sum over the
// `rows` (batch x time) positions that every weight gradient is.
inline int64_t gradient_path(const ModelConfig& c, int64_t queries, int64_t keys, int64_t max_position,
                             int64_t rows) {
  const int64_t d = c.d_model, dk = c.head_dim();
  const int64_t attention = d /* norm */ + 3 * d /* q,k,v */ + dk /* dP */ + keys /* D, dQ */ +
                            queries /* dK, dV */ + d /* o_proj */;
  const int64_t ffn = d /* norm */ + c.ffn_hidden /* in */ + d /* out */;
  return forward_path(c, keys, max_position) + c.output_vocab /* head */ + d /* final norm */ +
         c.n_layers * (attention + ffn) + rows;
}

// Any chain of `path` reductions whose output has scale `scale`: path * eps * scale.
inline torch::Tensor chain_bound(int64_t path, const torch::Tensor& scale) {
  return scale.detach().to(torch::kDouble) * (static_cast<double>(path) * kEps32);
}

// Logits (B,T,V) of two computations of one model: path * eps * the row's largest |logit|, (B,T,1).
inline torch::Tensor logits_bound(const ModelConfig& c, const torch::Tensor& reference, int64_t keys,
                                  int64_t max_position) {
  torch::NoGradGuard no_grad;
  return chain_bound(forward_path(c, keys, max_position),
                     reference.detach().abs().amax(-1, /*keepdim=*/true));
}

// A parameter's gradient: path * eps * the tensor's largest |gradient| (a scalar tensor).
inline torch::Tensor gradient_bound(const ModelConfig& c, const torch::Tensor& reference, int64_t queries,
                                    int64_t keys, int64_t max_position, int64_t rows) {
  torch::NoGradGuard no_grad;
  return chain_bound(gradient_path(c, queries, keys, max_position, rows), reference.detach().abs().max());
}

// A mean cross-entropy over valid tokens from those logits: each token's -log softmax moves by at most
// twice its logits' largest difference (its gain), and the mean adds a reduction over the tokens (1).
inline double loss_bound(double logit_bound, double loss, int64_t tokens) {
  return 2.0 * logit_bound + reduction_bound(tokens, loss);
}

// (5) Weights after K AdamW steps of two runs whose gradients differ by at most a relative `gradient_rel`
// (normwise, from (4)): each update m/sqrt(v) moves by at most 2 * gradient_rel of itself (m linear in the
// gradients, sqrt(v) half of twice that), and an AdamW step moves a weight by at most lr * (1 - beta1) /
// sqrt(1 - beta2) at its largest; K steps add up, growth through the changed trajectory left out (the
// tests compare after few steps).
inline double adamw_weights_bound(double gradient_rel, double lr, int64_t steps, double beta1, double beta2) {
  return 2.0 * gradient_rel * lr * (1.0 - beta1) / std::sqrt(1.0 - beta2) * static_cast<double>(steps);
}

// Gradient clipping scales every component by clip / |g|: the norm is a sum of squares over the largest
// tensor, then one over the tensors' norms (1), halved by the square root; its relative difference adds to
// the components' (part of `gradient_rel` above when clipping is on).
inline double clip_rel(int64_t largest_tensor, int64_t tensors) {
  return 0.5 * static_cast<double>(largest_tensor + tensors) * kEps32;
}

// (6) bf16 autocast against float32: every bfloat16 product rounds its two inputs and its result to
// bfloat16 (3 roundings of u = kEpsBf16 / 2, relative to its magnitude; float32 rounding is 2^16 times
// smaller). Per block q/k/v, scores, weights @ v, o_proj, FFN in and out, then the head: 6L + 1 products
// on the way to a logit, each adding its relative difference as in (4).
inline int64_t bf16_products(const ModelConfig& c) { return 6 * c.n_layers + 1; }
inline double autocast_logits_rel(const ModelConfig& c) {
  return 1.5 * kEpsBf16 * static_cast<double>(bf16_products(c));
}
// Gradients: backward runs two bfloat16 products per forward product (gradient of each input), so
// 3 (6L + 1) products, as a normwise relative difference.
inline double autocast_gradient_rel(const ModelConfig& c) { return 3.0 * autocast_logits_rel(c); }
// Two vectors with |a - b| <= rel * |b| (norms) make an angle whose sine is at most rel.
inline double cosine_bound(double rel) { return rel < 1.0 ? std::sqrt(1.0 - rel * rel) : -1.0; }

// ---------------------------------------------------------------------------------------------------------
// The numerics matrix (cmake/NumericsTests.cmake): threads and BLAS kernels chosen by the environment.

// CAUSAL_TEST_THREADS: the thread count the tests use (configure_threads in-process, `--set threads=N`
// for the `causal` processes they start); nullopt when unset (each test's own choice).
inline std::optional<int64_t> test_threads() {
  const auto value = environment_variable("CAUSAL_TEST_THREADS");
  if (!value) return std::nullopt;
  const int64_t n = std::stoll(*value);
  if (n < 1) throw std::invalid_argument("CAUSAL_TEST_THREADS must be >= 1, got " + *value);
  return n;
}

// " --set threads=N" for a `causal train` command line under CAUSAL_TEST_THREADS, else "".
inline std::string threads_override() {
  const auto n = test_threads();
  return n ? " --set threads=" + std::to_string(*n) : "";
}

namespace detail {

inline std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return s;
}

inline std::string openblas_core() {
  using CoreName = char* (*)();
  const auto name = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  return name ? std::string(name()) : std::string();
}

// ATen's vectorised kernels in use: "default", "avx2", "avx512", ... (from its build summary; the
// function behind it is not exported).
inline std::string aten_capability() {
  const std::string config = at::show_config();
  const std::string key = "CPU capability usage: ";
  const size_t at = config.find(key);
  if (at == std::string::npos) return "unknown";
  const std::string value = config.substr(at + key.size(), config.find('\n', at) - at - key.size());
  return value == "NO AVX" ? "default" : lower(value);
}

// Why the requested kernels are not the ones running (empty when they are).
inline std::string kernel_mismatch() {
  if (const auto want = environment_variable("OPENBLAS_CORETYPE")) {
    const std::string core = openblas_core();
    if (core.empty()) return "OPENBLAS_CORETYPE=" + *want + " but LibTorch's BLAS is not OpenBLAS";
    if (lower(core) != lower(*want)) return "OPENBLAS_CORETYPE=" + *want + " but OpenBLAS runs " + core;
  }
  if (const auto want = environment_variable("ATEN_CPU_CAPABILITY")) {
    const std::string have = aten_capability();
    if (lower(*want) != have) return "ATEN_CPU_CAPABILITY=" + *want + " but ATen runs " + have;
  }
  return "";
}

// Under the numerics matrix (CAUSAL_TEST_THREADS set): applies the thread count before any test runs (at
// start-up, LibTorch's libraries already loaded) and says which kernels run. An entry whose kernel this
// machine or library does not provide prints "SKIPPED: why" (CTest reports it skipped) and ends the binary
// before any test, so that it never passes on other kernels than it names.
inline bool apply_numerics_environment() {
  const auto n = test_threads();
  if (!n) return false;
  const ThreadSplit split = configure_threads(*n);
  const std::string core = openblas_core();
  std::printf("numerics: %s, OpenBLAS core %s, ATen capability %s\n", split.describe().c_str(),
              core.empty() ? "none" : core.c_str(), aten_capability().c_str());
  const std::string mismatch = kernel_mismatch();
  if (!mismatch.empty()) {
    std::printf("SKIPPED: %s\n", mismatch.c_str());
    std::fflush(stdout);
    std::_Exit(0);
  }
  return true;
}

// Once per binary however many test files include this header (an inline variable).
inline const bool kNumericsEnvironment = apply_numerics_environment();

}  // namespace detail

}  // namespace causal::testing
