// `causal bench --kernels`: kernels are sorted into kinds of work by name (names as CUPTI reported them on
// an H200 with LibTorch 2.11), CPU operators likewise, nested operators' time is counted once, and the
// figures print and serialise per step. A GPU's profile is taken by tools/gpu-check, the CPU's by test_cli.
#include <catch2/catch.hpp>

#include "bench/kernel_profile.h"

using namespace causal;

CATCH_TEST_CASE("kernel profile: kernels are sorted into kinds of work by their names", "[unit][bench]") {
  const std::vector<std::pair<const char*, const char*>> cases{
      {"nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", "matmul"},
      {"void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_tn_align1>(...)", "matmul"},
      {"void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16>(...)", "matmul"},
      {"cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x64_1x4x1_cga1x1x1_kernel0_"
       "0",
       "attention"},
      {"void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float>(...)",
       "softmax/loss"},
      {"void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
       "namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous "
       "namespace)::FusedAdamMathFunctor>",
       "optimizer"},
      {"void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float, false>(...)",
       "norm"},
      {"void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernelTemplate<float, float>(...)",
       "norm"},
      {"void at::native::vectorized_elementwise_kernel<8, at::native::bfloat16_copy_kernel_cuda(...)>",
       "copy/cast"},
      {"Memcpy HtoD (Pinned -> Device)", "copy/cast"},
      {"void at::native::vectorized_elementwise_kernel<8, at::native::GeluCUDAKernelImpl(...)>", "pointwise"},
      {"void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>(...)", "reduction"},
      {"some_kernel_nobody_named", "other"}};
  for (const auto& [name, kind] : cases) {
    CATCH_INFO(name);
    CATCH_CHECK(kernel_kind(name) == kind);
  }
}

CATCH_TEST_CASE("kernel profile: per-step figures print and serialise with the longest kernels first",
                "[unit][bench]") {
  KernelProfile profile;
  profile.steps = 2;
  profile.wall_ms = 10.0;
  profile.busy_ms = 8.0;
  profile.kind_ms = {{"matmul", 6.0}, {"pointwise", 2.0}};
  profile.kernels = {{"gemm_a", "matmul", 6.0, 1.0}, {"add", "pointwise", 2.0, 3.0}};
  const nlohmann::json json = profile.to_json(1);
  CATCH_CHECK(json.at("busy_ms") == 8.0);
  CATCH_CHECK(json.at("kind_ms").at("matmul") == 6.0);
  CATCH_REQUIRE(json.at("kernels").size() == 1);  // only the top one asked for
  CATCH_CHECK(json.at("kernels")[0].at("name") == "gemm_a");
  const std::string text = profile.format(2);
  CATCH_CHECK(text.find("the device idle 20.0%") != std::string::npos);
  CATCH_CHECK(text.find("matmul") < text.find("pointwise"));  // kinds by time, longest first
  CATCH_CHECK(text.find("gemm_a") < text.find("add"));
}

CATCH_TEST_CASE("kernel profile: CPU operators are sorted into kinds of work by their names",
                "[unit][bench]") {
  const std::vector<std::pair<const char*, const char*>> cases{
      {"aten::mm", "matmul"},
      {"aten::baddbmm_", "matmul"},
      {"aten::_scaled_dot_product_flash_attention_for_cpu_backward", "attention"},
      {"aten::native_layer_norm_backward", "norm"},
      {"aten::_softmax_backward_data", "softmax/loss"},
      {"aten::nll_loss_forward", "softmax/loss"},
      {"aten::_fused_adamw_", "optimizer"},
      {"aten::sum", "reduction"},
      {"aten::_to_copy", "copy/cast"},
      {"aten::embedding_dense_backward", "copy/cast"},
      {"aten::gelu_backward", "pointwise"},
      {"aten::add_", "pointwise"},
      {"aten::transpose", "other"},
      {"aten::empty", "other"},
      {"MmBackward0", "other"},  // autograd's node: its self time is bookkeeping, the product is aten::mm
      {"autograd::engine::evaluate_function: NativeLayerNormBackward0", "other"}};
  for (const auto& [name, kind] : cases) {
    CATCH_INFO(name);
    CATCH_CHECK(operator_kind(name) == kind);
  }
}

CATCH_TEST_CASE("kernel profile: an operator's self time leaves out the operators nested in it",
                "[unit][bench]") {
  // Thread 1: a [0, 100) holds b [10, 40), which holds c [20, 30), and d [50, 90); e [95, 120) overlaps a's
  // end. Thread 2: f [0, 50) at the same times, alone.
  const std::vector<TimedEvent> events{{1, 0, 100}, {1, 10, 40},  {1, 20, 30},
                                       {1, 50, 90}, {1, 95, 120}, {2, 0, 50}};
  const std::vector<double> self = self_times_ns(events);
  CATCH_REQUIRE(self.size() == events.size());
  CATCH_CHECK(self[0] == 100 - 30 - 40 - 5);  // a less b, d and the part of e inside it
  CATCH_CHECK(self[1] == 30 - 10);
  CATCH_CHECK(self[2] == 10);
  CATCH_CHECK(self[3] == 40);
  CATCH_CHECK(self[4] == 25);
  CATCH_CHECK(self[5] == 50);
}

CATCH_TEST_CASE("kernel profile: a CPU profile says operators and time outside them", "[unit][bench]") {
  KernelProfile profile;
  profile.cpu = true;
  profile.steps = 1;
  profile.wall_ms = 10.0;
  profile.busy_ms = 9.0;
  profile.kind_ms = {{"matmul", 9.0}};
  profile.kernels = {{"aten::mm", "matmul", 9.0, 12.0}};
  CATCH_CHECK(profile.to_json(5).at("device") == "cpu");
  const std::string text = profile.format(5);
  CATCH_CHECK(text.find("ATen operators' self time") != std::string::npos);
  CATCH_CHECK(text.find("outside any operator 10.0%") != std::string::npos);
}
