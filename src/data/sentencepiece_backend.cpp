// Loading libcausal_sentencepiece.so in a private symbol scope (see sentencepiece_backend.h).
#include "data/sentencepiece_backend.h"

#include <dlfcn.h>

#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "core/errors.h"

namespace causal {
namespace {

constexpr const char* kShimName = "libcausal_sentencepiece.so";

using Factory = SentencePieceBackend* (*)();

// The sanitizer runtimes refuse RTLD_DEEPBIND, and without it the shim's protobuf would bind to LibTorch's.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kPrivateScopeWorks = false;
#else
constexpr bool kPrivateScopeWorks = true;
#endif

// Opened once per process and never closed: tokenizers may live until exit.
Factory load_factory() {
  static std::once_flag once;
  static Factory factory = nullptr;
  static std::string error;
  std::call_once(once, [] {
    if (!kPrivateScopeWorks) {
      error =
          "unavailable in sanitizer builds (their runtime refuses RTLD_DEEPBIND, which keeps "
          "SentencePiece's protobuf apart from LibTorch's)";
      return;
    }
    std::vector<std::string> candidates;
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) candidates.push_back((exe.parent_path() / kShimName).string());
    candidates.push_back(kShimName);  // the loader's search path
    for (const std::string& path : candidates) {
      if (path.find('/') != std::string::npos && !std::filesystem::exists(path)) continue;
      void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (handle == nullptr) {
        error = ::dlerror();
        continue;
      }
      factory = reinterpret_cast<Factory>(::dlsym(handle, "causal_new_sentencepiece_backend"));
      if (factory != nullptr) return;
      error = path + " has no causal_new_sentencepiece_backend";
    }
  });
  if (factory == nullptr) {
    throw DataError(std::string("[tokenizer] cannot load ") + kShimName +
                    " (SentencePiece support; build it with the project): " + error);
  }
  return factory;
}

}  // namespace

bool sentencepiece_available() {
  try {
    load_factory();
    return true;
  } catch (const DataError&) {
    return false;
  }
}

std::unique_ptr<SentencePieceBackend> make_sentencepiece_backend() {
  return std::unique_ptr<SentencePieceBackend>(load_factory()());
}

}  // namespace causal
