// The feed-forward activations and their slopes as ffn_activation_rows.cu computes them, in float32, one
// element at a time. Host and device code alike, so that the CPU tests check the kernel's formulas against
// ATen's gelu, gelu_backward, silu and silu_backward where no GPU is at hand.
#pragma once

#include <cmath>

#ifdef __CUDACC__
#define CAUSAL_HOST_DEVICE __host__ __device__
#else
#define CAUSAL_HOST_DEVICE
#endif

namespace causal::activation_math {

struct ValueAndSlope {
  float value;  // the activation at x
  float slope;  // its derivative at x
};

// 0.5 x (1 + erf(x / sqrt 2)); slope Phi(x) + x phi(x).
CAUSAL_HOST_DEVICE inline ValueAndSlope gelu_exact(float x) {
  constexpr float kSqrtHalf = 0.70710678118654752440f;    // 1 / sqrt(2)
  constexpr float kInvSqrt2Pi = 0.39894228040143267794f;  // 1 / sqrt(2 pi)
  const float cdf = 0.5f * (1.0f + erff(x * kSqrtHalf));
  return {x * cdf, cdf + x * kInvSqrt2Pi * expf(-0.5f * x * x)};
}

// GPT-2's 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) and its derivative.
CAUSAL_HOST_DEVICE inline ValueAndSlope gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535588f;
  constexpr float kCubic = 0.044715f;
  const float t = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));
  const float inner_slope = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
  return {0.5f * x * (1.0f + t), 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * inner_slope};
}

// x sigmoid(x); slope sigmoid(x) (1 + x (1 - sigmoid(x))).
CAUSAL_HOST_DEVICE inline ValueAndSlope silu(float x) {
  const float sigmoid = 1.0f / (1.0f + expf(-x));
  return {x * sigmoid, sigmoid * (1.0f + x * (1.0f - sigmoid))};
}

}  // namespace causal::activation_math
