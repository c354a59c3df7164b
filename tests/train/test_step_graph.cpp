// train.cuda_graphs (train/step_graph.h): where no graph can be captured the step is the eager one, bit for
// bit; on the test device, steps replayed from a graph equal eager steps bit for bit, with dropout,
// accumulation and AdamW between them, and what the graph cannot replay runs eagerly.
#include <torch/torch.h>
// Torch first: its glog macros must not replace Catch's.
#include <catch2/catch.hpp>

#include "core/runtime.h"
#include "model/forward_hooks.h"
#include "model/transformer.h"
#include "support/small_model.h"
#include "support/test_device.h"
#include "support/training_steps.h"
#include "train/step_graph.h"

using namespace causal;

namespace {

// `steps` steps of the small text model with dropout, through `graph` when given.
testing::TrainedSteps train_steps(const c10::Device& device, int64_t steps, StepGraph* graph) {
  ModelConfig c = testing::small_text_model(AttentionKind::kSdpa, 8);
  c.dropout = 0.1;
  return testing::train_random_steps(c, TrainConfig{}, device, steps, graph);
}

struct Watcher : ForwardObserver {
  bool watches(HookPoint point) const override { return point == HookPoint::kBlock; }
  at::Tensor observe(const HookSite&, const at::Tensor& value) override { return value; }
};

}  // namespace

CATCH_TEST_CASE(
    "cuda graphs: where none can be captured, a step beside a StepGraph is the eager step, bit for bit",
    "[unit][train]") {
  const c10::Device cpu(c10::kCPU);
  CATCH_CHECK(!StepGraph::available(cpu));
  StepGraph graph;
  const testing::TrainedSteps eager = train_steps(cpu, 3, nullptr);
  const testing::TrainedSteps beside = train_steps(cpu, 3, &graph);
  CATCH_CHECK(eager.losses == beside.losses);
  for (size_t i = 0; i < eager.weights.size(); ++i)
    CATCH_CHECK(torch::equal(eager.weights[i], beside.weights[i]));
  CATCH_CHECK(graph.captures() == 0);
  CATCH_CHECK(graph.replays() == 0);
}

CATCH_TEST_CASE("cuda graphs: on the test device, steps replayed from a graph equal eager steps bit for bit",
                "[unit][device]") {
  CAUSAL_SKIP_UNLESS_TEST_DEVICE();
  const c10::Device device = resolve_device(testing::test_device());
  if (!StepGraph::available(device)) CAUSAL_SKIP_TEST("built without CAUSAL_CUDA: no CUDA graphs");
  StepGraph graph;
  // Two eager warm-ups, the capture in the second step, then replays; the optimizer's first step may lay
  // the parameters out anew, which makes a second capture.
  const testing::TrainedSteps graphed = train_steps(device, 6, &graph);
  CATCH_INFO("capture failure: " << graph.disabled_reason());
  CATCH_REQUIRE(graph.disabled_reason().empty());
  CATCH_CHECK(graph.captures() >= 1);
  CATCH_CHECK(graph.replays() >= 6);
  const testing::TrainedSteps eager = train_steps(device, 6, nullptr);
  CATCH_CHECK(graphed.losses == eager.losses);
  for (size_t i = 0; i < eager.weights.size(); ++i)
    CATCH_CHECK(torch::equal(graphed.weights[i], eager.weights[i]));
}

CATCH_TEST_CASE("cuda graphs: on the test device, what a graph cannot replay runs eagerly",
                "[unit][device]") {
  CAUSAL_SKIP_UNLESS_TEST_DEVICE();
  const c10::Device device = resolve_device(testing::test_device());
  if (!StepGraph::available(device)) CAUSAL_SKIP_TEST("built without CAUSAL_CUDA: no CUDA graphs");
  torch::manual_seed(23);
  Transformer model(testing::small_text_model(AttentionKind::kSdpa, 8));
  model->to(device);
  model->train();
  TrainConfig train;
  StepGraph graph;
  CATCH_CHECK(graph.usable(model, /*collect_diagnostics=*/false, /*data_parallel=*/false));
  CATCH_CHECK(!graph.usable(model, true, false));
  CATCH_CHECK(!graph.usable(model, false, true));
  {
    Watcher watcher;
    const ForwardHooks::Registration watching(model->hooks(), watcher);
    CATCH_CHECK(!graph.usable(model, false, false));
  }
  model->eval();
  CATCH_CHECK(!graph.usable(model, false, false));
  model->train();
  for (int i = 0; i < 3; ++i) {  // warm-ups and the capture
    graph.zero_gradients(model);
    CATCH_CHECK(graph.run(model, testing::random_micro_batches(1, 3, device)[0], train, 0.5f).defined());
  }
  CATCH_CHECK(graph.captures() == 1);
  // Another number of rows: not the captured shapes.
  CATCH_CHECK(!graph.run(model, testing::random_micro_batches(1, 4, device)[0], train, 0.5f).defined());
  CATCH_CHECK(graph.run(model, testing::random_micro_batches(1, 3, device)[0], train, 0.5f).defined());
  CATCH_CHECK(graph.replays() == 2);
}
