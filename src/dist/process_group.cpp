// c10d rendezvous and collectives, with every failure turned into a DistributedError.
#include "dist/process_group.h"

#include <chrono>
#include <exception>

#include "core/environment.h"
#include "core/errors.h"
#include "dist/c10d_compat.h"

namespace causal {
namespace {

std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

// Gloo reports a dead peer as gloo::IoException, which is no c10::Error: anything thrown is caught here.
[[noreturn]] void fail(const LaunchEnvironment& env, const std::string& what, const std::exception& e,
                       double timeout_s) {
  std::string message = e.what();
  message = message.substr(0, message.find('\n'));
  throw DistributedError("rank " + std::to_string(env.rank) + " of " + std::to_string(env.world_size) + ": " +
                         what + " failed (a rank died, never joined or stalled past dist.timeout_s = " +
                         std::to_string(static_cast<int64_t>(timeout_s)) + " s): " + message);
}

}  // namespace

struct ProcessGroup::Impl {
  c10::intrusive_ptr<::c10d::Store> store;
  c10::intrusive_ptr<c10d_compat::Backend> backend;
  const char* name = "gloo";
  std::vector<c10::intrusive_ptr<::c10d::Work>> started;  // by start_all_reduce_sum, not yet waited on

  // One tensor's all-reduce, in flight on the backend's threads.
  c10::intrusive_ptr<::c10d::Work> all_reduce(at::Tensor& tensor, ::c10d::ReduceOp op) {
    std::vector<at::Tensor> one = {tensor};
    ::c10d::AllreduceOptions options;
    options.reduceOp = op;
    return backend->allreduce(one, options);
  }
};

ProcessGroup::ProcessGroup(const LaunchEnvironment& env, const c10::Device& device,
                           const ProcessGroupOptions& options)
    : env_(env), timeout_s_(options.timeout_s), impl_(std::make_unique<Impl>()) {
  const std::chrono::milliseconds timeout = to_ms(options.timeout_s);
  try {
    ::c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<std::uint16_t>(env.master_port);
    store_options.isServer = env.rank == 0;
    store_options.numWorkers = static_cast<std::size_t>(env.world_size);
    store_options.waitWorkers = true;  // rank 0 returns only once every rank has connected
    store_options.timeout = timeout;
    auto tcp = c10::make_intrusive<::c10d::TCPStore>(env.master_addr, store_options);
    // A prefix of its own, as torch.distributed does, so other users of the store never collide.
    impl_->store = c10::make_intrusive<::c10d::PrefixStore>("causal", tcp);
    if (device.is_cuda()) {
#ifdef CAUSAL_WITH_NCCL
      auto nccl_options = ::c10d::ProcessGroupNCCL::Options::create();
      nccl_options->timeout = timeout;
      impl_->backend = c10::make_intrusive<::c10d::ProcessGroupNCCL>(
          impl_->store, static_cast<int>(env.rank), static_cast<int>(env.world_size), nccl_options);
      impl_->name = "nccl";
#else
      throw ConfigError("device", device.str(),
                        "data-parallel training on CUDA needs a LibTorch built with NCCL (USE_C10D_NCCL); "
                        "this one has Gloo only");
#endif
    } else {
      auto gloo_options = ::c10d::ProcessGroupGloo::Options::create(timeout);
      // Like torch.distributed: GLOO_SOCKET_IFNAME picks the interface; loopback jobs stay on 127.0.0.1.
      if (const std::optional<std::string> interface = environment_variable("GLOO_SOCKET_IFNAME")) {
        gloo_options->devices.push_back(::c10d::ProcessGroupGloo::createDeviceForInterface(*interface));
      } else if (is_loopback(env.master_addr)) {
        gloo_options->devices.push_back(::c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      } else {
        gloo_options->devices.push_back(::c10d::ProcessGroupGloo::createDefaultDevice());
      }
      impl_->backend = c10::make_intrusive<::c10d::ProcessGroupGloo>(
          impl_->store, static_cast<int>(env.rank), static_cast<int>(env.world_size), gloo_options);
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(env_, "joining the process group at " + env.master_addr + ":" + std::to_string(env.master_port), e,
         timeout_s_);
  }
}

ProcessGroup::~ProcessGroup() = default;

const char* ProcessGroup::backend() const { return impl_->name; }

void ProcessGroup::all_reduce_sum(std::vector<at::Tensor>& tensors, const std::string& what) {
  if (tensors.empty()) return;
  try {
    std::vector<c10::intrusive_ptr<::c10d::Work>> work;
    work.reserve(tensors.size());
    // One collective per tensor, all in flight at once: Gloo's threads work on them in parallel.
    for (at::Tensor& t : tensors) work.push_back(impl_->all_reduce(t, ::c10d::ReduceOp::SUM));
    for (auto& w : work) w->wait(to_ms(timeout_s_));
  } catch (const std::exception& e) {
    fail(env_, what, e, timeout_s_);
  }
}

void ProcessGroup::start_all_reduce_sum(at::Tensor& tensor, const std::string& what) {
  try {
    impl_->started.push_back(impl_->all_reduce(tensor, ::c10d::ReduceOp::SUM));
  } catch (const std::exception& e) {
    fail(env_, what, e, timeout_s_);
  }
}

void ProcessGroup::wait_started(const std::string& what) {
  std::vector<c10::intrusive_ptr<::c10d::Work>> started;
  started.swap(impl_->started);
  try {
    for (auto& w : started) w->wait(to_ms(timeout_s_));
  } catch (const std::exception& e) {
    fail(env_, what, e, timeout_s_);
  }
}

void ProcessGroup::all_reduce_max(at::Tensor& tensor, const std::string& what) {
  try {
    impl_->all_reduce(tensor, ::c10d::ReduceOp::MAX)->wait(to_ms(timeout_s_));
  } catch (const std::exception& e) {
    fail(env_, what, e, timeout_s_);
  }
}

void ProcessGroup::broadcast(std::vector<at::Tensor>& tensors, int64_t root, const std::string& what) {
  try {
    std::vector<c10::intrusive_ptr<::c10d::Work>> work;
    for (at::Tensor& t : tensors) {
      std::vector<at::Tensor> one = {t};
      ::c10d::BroadcastOptions options;
      options.rootRank = root;
      work.push_back(impl_->backend->broadcast(one, options));
    }
    for (auto& w : work) w->wait(to_ms(timeout_s_));
  } catch (const std::exception& e) {
    fail(env_, what, e, timeout_s_);
  }
}

void ProcessGroup::publish(const std::string& key, const std::string& value) {
  try {
    impl_->store->set(key, std::vector<uint8_t>(value.begin(), value.end()));
  } catch (const std::exception& e) {
    fail(env_, "store write of " + key, e, timeout_s_);
  }
}

std::string ProcessGroup::fetch(const std::string& key) {
  try {
    const std::vector<uint8_t> value = impl_->store->get(key);  // waits up to the store's timeout
    return std::string(value.begin(), value.end());
  } catch (const std::exception& e) {
    fail(env_, "store read of " + key, e, timeout_s_);
  }
}

}  // namespace causal
