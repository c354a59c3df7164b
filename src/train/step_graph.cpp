// The captured forward and backward (see step_graph.h).
#include "train/step_graph.h"

#include <torch/torch.h>

#include <vector>

#include "task/objective.h"

#ifdef CAUSAL_CUDA_KERNELS
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace causal {

#ifdef CAUSAL_CUDA_KERNELS
namespace {

// Eager runs on the graph's stream before the capture: the first makes what LibTorch creates lazily
// (cuBLAS handles and workspaces, the fused attention's choice, the model's cached mask), the second runs
// with all of it in place, as the capture will.
constexpr int kWarmupRuns = 2;

std::vector<at::Tensor> batch_tensors(const Batch& b) {
  return {b.tokens, b.positions, b.segment_ids, b.key_valid, b.labels};
}

bool same_layout(const Batch& a, const Batch& b) {
  if (a.unpadded != b.unpadded) return false;
  const std::vector<at::Tensor> x = batch_tensors(a), y = batch_tensors(b);
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i].defined() != y[i].defined()) return false;
    if (x[i].defined() && (x[i].sizes() != y[i].sizes() || x[i].scalar_type() != y[i].scalar_type() ||
                           x[i].device() != y[i].device()))
      return false;
  }
  return true;
}

// Where each parameter and its gradient live: what a graph reads and writes.
std::vector<const void*> parameter_storage(Transformer& model) {
  std::vector<const void*> out;
  for (const at::Tensor& p : model->parameters()) {
    out.push_back(p.data_ptr());
    out.push_back(p.grad().defined() ? p.grad().data_ptr() : nullptr);
  }
  return out;
}

// The eager pass the graph captures: loss_sum and its gradients times `scale` (a device scalar, so that a
// replay reads the step's own).
at::Tensor forward_backward(Transformer& model, const Batch& inputs, const TrainConfig& train,
                            const at::Tensor& scale) {
  const TrainingLoss loss = training_loss_sum(model, inputs, train, /*max_abs_logit=*/false);
  loss.sum.backward(scale);
  return loss.sum.detach();
}

}  // namespace
#endif

struct StepGraph::State {
#ifdef CAUSAL_CUDA_KERNELS
  c10::optional<at::cuda::CUDAStream> stream;  // capture needs a stream other than the default one
  std::unique_ptr<at::cuda::CUDAGraph> graph;
#endif
  Batch inputs;  // the graph's own copies of a micro-batch, which every replay reads
  bool has_inputs = false;
  at::Tensor scale;                  // () float32: the loss sum's gradient
  at::Tensor sum;                    // () float32: the loss sum the graph writes
  std::vector<const void*> storage;  // the parameters' and gradients' storage at the capture
  int warmups = 0;
  std::string disabled;
  int64_t captures = 0, replays = 0;
};

StepGraph::StepGraph() : state_(std::make_unique<State>()) {}
StepGraph::~StepGraph() = default;

bool StepGraph::available(const c10::Device& device) {
#ifdef CAUSAL_CUDA_KERNELS
  return device.is_cuda();
#else
  (void)device;
  return false;
#endif
}

std::unique_ptr<StepGraph> StepGraph::for_run(const TrainConfig& train, const c10::Device& device) {
  if (train.cuda_graphs != CudaGraphs::kAuto || !available(device)) return nullptr;
  return std::make_unique<StepGraph>();
}

bool StepGraph::usable(Transformer& model, bool collect_diagnostics, bool data_parallel) const {
  return state_->disabled.empty() && !collect_diagnostics && !data_parallel &&
         !model->hooks().any_watched() && model->is_training();
}

void StepGraph::zero_gradients(Transformer& model) const {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> existing;
  for (const at::Tensor& p : model->parameters()) {
    if (!p.requires_grad()) continue;
    if (p.grad().defined()) {
      existing.push_back(p.grad());
    } else {
      p.mutable_grad() = at::zeros_like(p);
    }
  }
  for (at::Tensor& g : existing) g.zero_();
}

at::Tensor StepGraph::run(Transformer& model, const Batch& batch, const TrainConfig& train, float scale) {
#ifdef CAUSAL_CUDA_KERNELS
  State& s = *state_;
  if (!s.disabled.empty() || !batch.tokens.is_cuda() || (s.has_inputs && !same_layout(s.inputs, batch)))
    return {};
  const c10::DeviceIndex index = batch.tokens.device().index();
  if (!s.stream) s.stream = at::cuda::getStreamFromPool(/*isHighPriority=*/false, index);
  if (s.graph && parameter_storage(model) != s.storage) {
    s.graph.reset();
    s.warmups = 0;
  }
  // A replay reads the weight shadows without checking them: the ones the optimizer's step made stale are
  // copied again now, on the caller's stream.
  model->refresh_weight_shadows();
  // The graph's stream starts after what the caller queued (the batch's copy, the zeroed gradients, the
  // shadows), and the caller's continues after the graph's work: every tensor either reads stays valid
  // meanwhile.
  const at::cuda::CUDAStream caller = at::cuda::getCurrentCUDAStream(index);
  at::cuda::CUDAEvent queued;
  queued.record(caller);
  queued.block(*s.stream);
  at::Tensor result;
  {
    const c10::cuda::CUDAStreamGuard on_graph_stream(*s.stream);
    if (!s.has_inputs) {
      s.inputs = batch;
      for (at::Tensor* t : {&s.inputs.tokens, &s.inputs.positions, &s.inputs.segment_ids, &s.inputs.key_valid,
                            &s.inputs.labels})
        if (t->defined()) *t = at::empty_like(*t);
      s.scale = at::empty({}, batch.tokens.options().dtype(at::kFloat));
      s.has_inputs = true;
    }
    const std::vector<at::Tensor> from = batch_tensors(batch), to = batch_tensors(s.inputs);
    for (size_t i = 0; i < from.size(); ++i)
      if (from[i].defined()) to[i].copy_(from[i], /*non_blocking=*/true);
    s.scale.fill_(scale);
    if (s.graph) {
      s.graph->replay();
      ++s.replays;
      result = s.sum;
    } else if (s.warmups < kWarmupRuns) {
      ++s.warmups;
      result = forward_backward(model, s.inputs, train, s.scale);
      result.record_stream(caller);  // freed on the caller's stream after it reads it
    } else {
      auto graph = std::make_unique<at::cuda::CUDAGraph>();
      try {
        graph->capture_begin();
        try {
          s.sum = forward_backward(model, s.inputs, train, s.scale);
        } catch (...) {
          try {
            graph->capture_end();  // leaves capture mode; the graph it ends is invalid
          } catch (...) {
          }
          throw;
        }
        graph->capture_end();
      } catch (const std::exception& e) {
        (void)cudaGetLastError();  // the failed capture's error is not the next kernel's
        const std::string what = e.what();
        s.disabled = what.substr(0, what.find('\n'));
        s.sum = at::Tensor();
      }
      if (s.disabled.empty()) {
        s.graph = std::move(graph);
        s.storage = parameter_storage(model);
        ++s.captures;
        s.graph->replay();  // the capture only recorded the kernels: this runs them
        ++s.replays;
        result = s.sum;
      } else {
        result = forward_backward(model, s.inputs, train, s.scale);  // eagerly, from now on
        result.record_stream(caller);
      }
    }
  }
  at::cuda::CUDAEvent done;
  done.record(*s.stream);
  done.block(caller);
  return result;
#else
  (void)model, (void)batch, (void)train, (void)scale;
  return {};
#endif
}

const std::string& StepGraph::disabled_reason() const { return state_->disabled; }
int64_t StepGraph::captures() const { return state_->captures; }
int64_t StepGraph::replays() const { return state_->replays; }

}  // namespace causal
