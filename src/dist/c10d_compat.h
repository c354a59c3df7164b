// The only place that knows how each LibTorch version spells c10d's backends; included by
// process_group.cpp alone (the Gloo headers are heavy and pull in libgloo-dev's).
#pragma once

#include <torch/version.h>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

// NCCL exists only in CUDA builds of LibTorch, whose CMake targets define USE_C10D_NCCL for their users
// (as this CPU build defines USE_C10D_GLOO).
#ifdef USE_C10D_NCCL
#define CAUSAL_WITH_NCCL 1
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace causal::c10d_compat {

// 1.13: each backend is a c10d::ProcessGroup; 2.x split the collectives out into c10d::Backend, which
// ProcessGroupGloo and ProcessGroupNCCL derive from. Both spell allreduce/broadcast alike.
#if TORCH_VERSION_MAJOR >= 2
using Backend = ::c10d::Backend;
#else
using Backend = ::c10d::ProcessGroup;
#endif

}  // namespace causal::c10d_compat
