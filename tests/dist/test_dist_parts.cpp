// The pieces of data-parallel training that need no second process: gradient buckets, row shards, the
// launch environment and the global-batch check.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/errors.h"
#include "dist/gradient_buckets.h"
#include "dist/launch_env.h"
#include "dist/launcher.h"
#include "dist/sharded_batches.h"
#include "run/rank_context.h"

using namespace causal;

namespace {

// Sets environment variables for one test and clears them after.
struct EnvVars {
  std::vector<std::string> names;
  EnvVars(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const auto& [name, value] : vars) {
      ::setenv(name, value, 1);
      names.push_back(name);
    }
  }
  ~EnvVars() {
    for (const std::string& n : names) ::unsetenv(n.c_str());
  }
};

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

// Invariant: unpacking what was packed gives back every gradient exactly, across bucket boundaries and
// dtypes, and what an all-reduce writes into a bucket lands in the right gradient.
CATCH_TEST_CASE("gradient buckets round-trip and place each value in its own gradient", "[unit][dist]") {
  std::vector<at::Tensor> grads = {torch::randn({3, 4}), torch::randn({5}),
                                   torch::randn({2, 2}, torch::kDouble), torch::randn({7})};
  std::vector<at::Tensor> original;
  for (const at::Tensor& g : grads) original.push_back(g.clone());
  GradientBuckets buckets(grads, /*bucket_bytes=*/64);  // 16 floats: the (3,4) and (5) split apart
  CATCH_CHECK(buckets.buckets().size() == 4);
  for (at::Tensor& b : buckets.buckets()) b.mul_(2);
  buckets.unpack();
  for (size_t i = 0; i < grads.size(); ++i) CATCH_CHECK(torch::equal(grads[i], original[i] * 2));
  GradientBuckets one_bucket({grads[0], grads[1]}, 1 << 20);
  CATCH_CHECK(one_bucket.buckets().size() == 1);
  CATCH_CHECK(one_bucket.buckets()[0].numel() == 17);
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
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  CATCH_CHECK(!LaunchEnvironment::from_environment());
  {
    EnvVars vars{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.5"}, {"MASTER_PORT", "29511"}};
    const auto env = LaunchEnvironment::from_environment();
    CATCH_REQUIRE(env);
    CATCH_CHECK(env->rank == 1);
    CATCH_CHECK(env->local_rank == 1);
    CATCH_CHECK(env->local_world_size == 2);
    CATCH_CHECK(env->master_addr == "10.0.0.5");
    CATCH_CHECK(env->master_port == 29511);
  }
  {
    EnvVars vars{{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "x"}, {"MASTER_PORT", "1"}};
    CATCH_CHECK_THROWS_WITH(LaunchEnvironment::from_environment(), Catch::Contains("RANK=2"));
  }
  {
    EnvVars vars{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}};
    CATCH_CHECK_THROWS_WITH(LaunchEnvironment::from_environment(), Catch::Contains("MASTER_ADDR"));
  }
}

CATCH_TEST_CASE("a global batch that does not divide by the world size is a config error", "[unit][dist]") {
  EnvVars vars{{"RANK", "0"}, {"WORLD_SIZE", "3"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1"}};
  RunConfig config;
  config.train.batch_size = 16;
  CATCH_CHECK_THROWS_WITH(RankContext(config, c10::Device(c10::kCPU)),
                          Catch::Contains("train.batch_size") && Catch::Contains("world size 3"));
}

CATCH_TEST_CASE("the local launcher finds a free loopback port", "[unit][dist]") {
  const int port = free_loopback_port();
  CATCH_CHECK(port > 0);
  CATCH_CHECK(port < 65536);
}
