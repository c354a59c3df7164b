// `causal bench --kernels`: kernels are sorted into kinds of work by name (names as CUPTI reported them on
// an H200 with LibTorch 2.11), and the figures print and serialise per step. Profiling itself needs a GPU:
// tools/gpu-check runs it.
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
