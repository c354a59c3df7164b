// Enumerated config values and their JSON spellings (one table per enum, used for parsing and printing).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace causal {

enum class FfnKind { kGelu, kGeluTanh, kSwiglu, kRelu };
enum class NormKind { kLayerNorm, kRmsNorm };
enum class PositionKind { kNone, kLearned, kRope };
enum class RopePairing { kInterleaved, kHalves };
enum class RopeScaling { kNone, kLinear, kNtk, kYarn };
enum class AttentionKind { kReference, kSdpa, kFlash, kQueryBlocks };
enum class AutocastKind { kOff, kBf16 };
enum class ModelKernels { kAuto, kAten };
enum class WeightShadows { kAuto, kOn, kOff };
enum class LoraInit { kKaiming, kGaussian };
enum class BaseDtype { kF32, kBf16, kQ8_0, kQ4_0, kQ4_1, kQ4_K };
enum class DataKind { kRetrieval, kText };
enum class EvidencePosition { kUniform, kFixed };
enum class QueryMode { kUnique, kLatest };
enum class TextLayout { kPacked, kPadded };
enum class ScheduleKind { kConstant, kLinear, kCosine, kWsd };
enum class NonfiniteAction { kAbort, kSkip };
enum class OptimizerKernel { kAuto, kFused, kSeparate };
enum class LossKernel { kAuto, kLogits, kChunked };
enum class CudaGraphs { kAuto, kOff };

template <class E>
using EnumTable = std::vector<std::pair<E, const char*>>;

// Specialised below for every config enum; the order is the order shown in "expected one of" hints.
template <class E>
const EnumTable<E>& enum_table();

#define CAUSAL_ENUM_TABLE(E, ...)                 \
  template <>                                     \
  inline const EnumTable<E>& enum_table<E>() {    \
    static const EnumTable<E> table{__VA_ARGS__}; \
    return table;                                 \
  }

CAUSAL_ENUM_TABLE(FfnKind, {FfnKind::kGelu, "gelu"}, {FfnKind::kGeluTanh, "gelu_tanh"},
                  {FfnKind::kSwiglu, "swiglu"}, {FfnKind::kRelu, "relu"})
CAUSAL_ENUM_TABLE(NormKind, {NormKind::kLayerNorm, "layernorm"}, {NormKind::kRmsNorm, "rmsnorm"})
CAUSAL_ENUM_TABLE(PositionKind, {PositionKind::kNone, "none"}, {PositionKind::kLearned, "learned"},
                  {PositionKind::kRope, "rope"})
CAUSAL_ENUM_TABLE(RopePairing, {RopePairing::kInterleaved, "interleaved"}, {RopePairing::kHalves, "halves"})
CAUSAL_ENUM_TABLE(RopeScaling, {RopeScaling::kNone, "none"}, {RopeScaling::kLinear, "linear"},
                  {RopeScaling::kNtk, "ntk"}, {RopeScaling::kYarn, "yarn"})
CAUSAL_ENUM_TABLE(AttentionKind, {AttentionKind::kReference, "reference"}, {AttentionKind::kSdpa, "sdpa"},
                  {AttentionKind::kFlash, "flash"}, {AttentionKind::kQueryBlocks, "query_blocks"})
CAUSAL_ENUM_TABLE(OptimizerKernel, {OptimizerKernel::kAuto, "auto"}, {OptimizerKernel::kFused, "fused"},
                  {OptimizerKernel::kSeparate, "separate"})
CAUSAL_ENUM_TABLE(LossKernel, {LossKernel::kAuto, "auto"}, {LossKernel::kLogits, "logits"},
                  {LossKernel::kChunked, "chunked"})
CAUSAL_ENUM_TABLE(CudaGraphs, {CudaGraphs::kAuto, "auto"}, {CudaGraphs::kOff, "off"})
CAUSAL_ENUM_TABLE(AutocastKind, {AutocastKind::kOff, "off"}, {AutocastKind::kBf16, "bf16"})
CAUSAL_ENUM_TABLE(ModelKernels, {ModelKernels::kAuto, "auto"}, {ModelKernels::kAten, "aten"})
CAUSAL_ENUM_TABLE(WeightShadows, {WeightShadows::kAuto, "auto"}, {WeightShadows::kOn, "on"},
                  {WeightShadows::kOff, "off"})
CAUSAL_ENUM_TABLE(LoraInit, {LoraInit::kKaiming, "kaiming"}, {LoraInit::kGaussian, "gaussian"})
CAUSAL_ENUM_TABLE(BaseDtype, {BaseDtype::kF32, "f32"}, {BaseDtype::kBf16, "bf16"}, {BaseDtype::kQ8_0, "q8_0"},
                  {BaseDtype::kQ4_0, "q4_0"}, {BaseDtype::kQ4_1, "q4_1"}, {BaseDtype::kQ4_K, "q4_k"})
CAUSAL_ENUM_TABLE(DataKind, {DataKind::kRetrieval, "retrieval"}, {DataKind::kText, "text"})
CAUSAL_ENUM_TABLE(EvidencePosition, {EvidencePosition::kUniform, "uniform"},
                  {EvidencePosition::kFixed, "fixed"})
CAUSAL_ENUM_TABLE(QueryMode, {QueryMode::kUnique, "unique"}, {QueryMode::kLatest, "latest"})
CAUSAL_ENUM_TABLE(TextLayout, {TextLayout::kPacked, "packed"}, {TextLayout::kPadded, "padded"})
CAUSAL_ENUM_TABLE(ScheduleKind, {ScheduleKind::kConstant, "constant"}, {ScheduleKind::kLinear, "linear"},
                  {ScheduleKind::kCosine, "cosine"}, {ScheduleKind::kWsd, "wsd"})
CAUSAL_ENUM_TABLE(NonfiniteAction, {NonfiniteAction::kAbort, "abort"}, {NonfiniteAction::kSkip, "skip"})

#undef CAUSAL_ENUM_TABLE

template <class E>
std::string to_string(E value) {
  for (const auto& [v, name] : enum_table<E>()) {
    if (v == value) return name;
  }
  return "?";
}

}  // namespace causal
