// The pieces of data-parallel training that need no second process: gradient buckets (on a 1-rank
// group), row shards, the launch environment and the global-batch check.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <torch/torch.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/errors.h"
#include "dist/gradient_reducer.h"
#include "dist/launch_env.h"
#include "dist/launcher.h"
#include "dist/process_group.h"
#include "dist/sharded_batches.h"
#include "run/rank_context.h"
#include "support/scoped_env.h"

using namespace causal;
using causal::testing::ScopedEnv;

namespace {

class CountingSource : public BatchSource {
 public:
  Batch next() override {
    const at::Tensor rows = torch::arange(calls_ * 4, calls_ * 4 + 4).view({4, 1});
    ++calls_;
    return {rows.unsqueeze(-1), rows, {}, rows.ne(-1), rows};
  }
  nlohmann::json state() const override { return {{"calls", calls_}}; }
  void restore(const nlohmann::json& s) override { calls_ = s["calls"].get<int64_t>(); }

 private:
  int64_t calls_ = 0;
};

}  // namespace

// Invariant: each bucket's all-reduce starts inside backward as soon as its gradients exist, strictly in
// bucket order, and what lands in .grad is exactly autograd's gradient (summed over the one rank here),
// accumulation over micro-batches included; a parameter without a gradient stays without one.
CATCH_TEST_CASE("gradient buckets start their all-reduce during backward and give autograd's gradients",
                "[unit][dist]") {
  LaunchEnvironment env;
  env.master_port = free_loopback_port();
  ProcessGroup group(env, torch::kCPU, ProcessGroupOptions{20.0});
  torch::manual_seed(3);
  torch::nn::Linear unused(4, 4), a(8, 16), b(16, 16), c(16, 2);
  // Reverse order puts `unused` (never in the graph) in the last bucket, which backward cannot complete.
  std::vector<at::Tensor> parameters = unused->parameters();
  const size_t n_unused = parameters.size();
  for (auto* layer : {&a, &b, &c})
    for (const at::Tensor& p : (*layer)->parameters()) parameters.push_back(p);
  const std::vector<at::Tensor> inputs = {torch::randn({5, 8}), torch::randn({3, 8})};
  auto backward = [&](const at::Tensor& x) { c(torch::tanh(b(torch::tanh(a(x))))).pow(2).sum().backward(); };
  auto zero = [&] {
    for (at::Tensor& p : parameters) p.mutable_grad() = at::Tensor();
  };

  for (const at::Tensor& x : inputs) backward(x);
  std::vector<at::Tensor> expected;
  for (const at::Tensor& p : parameters)
    expected.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());
  zero();

  // 128 floats a bucket: [c's bias, c's weight, b's bias], [b's weight], [a's bias], [a's weight], [unused]
  GradientReducer reducer(group, parameters, /*bucket_bytes=*/128 * 4);
  CATCH_REQUIRE(reducer.bucket_count() == 5);
  for (int step = 0; step < 2; ++step) {
    backward(inputs[0]);  // an earlier micro-batch: not armed, nothing starts
    if (step == 0) CATCH_CHECK(reducer.started_during_backward() == 0);
    reducer.arm();
    backward(inputs[1]);
    CATCH_CHECK(reducer.started_during_backward() == static_cast<int64_t>(reducer.bucket_count()) - 1);
    reducer.finish(/*repack=*/false, "test all-reduce");
    for (size_t k = 0; k < n_unused; ++k) CATCH_CHECK_FALSE(parameters[k].grad().defined());
    for (size_t k = n_unused; k < parameters.size(); ++k)
      CATCH_CHECK(torch::equal(parameters[k].grad(), expected[k]));
    zero();
  }

  // Gradients edited after backward (an injected fault) are packed again: the edit is what is summed.
  backward(inputs[0]);
  reducer.arm();
  backward(inputs[1]);
  parameters.back().mutable_grad().mul_(2);
  reducer.finish(/*repack=*/true, "test all-reduce");
  CATCH_CHECK(torch::equal(parameters.back().grad(), expected.back() * 2));
}

// Invariant: the ranks' shards of one global batch are disjoint and together are that batch, in order.
CATCH_TEST_CASE("row shards of a global batch are disjoint and cover it in rank order", "[unit][dist]") {
  CountingSource a, b;
  ShardedBatches rank0(a, 0, 2), rank1(b, 1, 2);
  for (int step = 0; step < 3; ++step) {
    const Batch x = rank0.next(), y = rank1.next();
    CATCH_CHECK(
        torch::equal(torch::cat({x.labels, y.labels}), torch::arange(step * 4, step * 4 + 4).view({4, 1})));
    CATCH_CHECK(!x.segment_ids.defined());
  }
  CATCH_CHECK(rank0.state() == a.state());
  CountingSource c;
  ShardedBatches three(c, 0, 3);
  CATCH_CHECK_THROWS_AS(three.next(), DistributedError);
}

CATCH_TEST_CASE("the launch environment is read like torchrun's and refused when incomplete",
                "[unit][dist]") {
  const ScopedEnv unset{{"RANK", nullptr}, {"WORLD_SIZE", nullptr}};
  CATCH_CHECK(!LaunchEnvironment::from_environment());
  {
    const ScopedEnv vars{
        {"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.5"}, {"MASTER_PORT", "29511"}};
    const auto env = LaunchEnvironment::from_environment();
    CATCH_REQUIRE(env);
    CATCH_CHECK(env->rank == 1);
    CATCH_CHECK(env->local_rank == 1);
    CATCH_CHECK(env->local_world_size == 2);
    CATCH_CHECK(env->master_addr == "10.0.0.5");
    CATCH_CHECK(env->master_port == 29511);
  }
  {
    const ScopedEnv vars{{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "x"}, {"MASTER_PORT", "1"}};
    CATCH_CHECK_THROWS_WITH(LaunchEnvironment::from_environment(), Catch::Contains("RANK=2"));
  }
  {
    const ScopedEnv vars{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}};
    CATCH_CHECK_THROWS_WITH(LaunchEnvironment::from_environment(), Catch::Contains("MASTER_ADDR"));
  }
}

CATCH_TEST_CASE("a global batch that does not divide by the world size is a config error", "[unit][dist]") {
  const ScopedEnv vars{
      {"RANK", "0"}, {"WORLD_SIZE", "3"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1"}};
  RunConfig config;
  config.train.batch_size = 16;
  CATCH_CHECK_THROWS_WITH(RankContext(config, c10::Device(c10::kCPU)),
                          Catch::Contains("train.batch_size") && Catch::Contains("world size 3"));
}

namespace {

// A socket listening on 127.0.0.1:`port`, as rank 0's rendezvous store would; -1 when the port is taken.
int listen_on_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 1) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

// What the launcher needs from the port: that the rendezvous can listen on it. A fixed or guessed port
// would pass a range check; here each port must be bindable, and never one that is held at the time.
CATCH_TEST_CASE("the local launcher finds a loopback port free to listen on, never one in use",
                "[unit][dist]") {
  const int first = free_loopback_port();
  const int held = listen_on_loopback(first);
  CATCH_REQUIRE(held >= 0);
  for (int i = 0; i < 5; ++i) {
    const int port = free_loopback_port();
    CATCH_CHECK(port != first);
    const int fd = listen_on_loopback(port);
    CATCH_CHECK(fd >= 0);
    if (fd >= 0) ::close(fd);
  }
  ::close(held);
}
