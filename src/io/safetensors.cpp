// safetensors reader and writer.
#include "io/safetensors.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/errors.h"
#include "io/atomic_file.h"
#include "io/safetensors_header.h"

namespace causal {
namespace {

const std::vector<std::pair<at::ScalarType, std::string>>& dtype_names() {
  static const std::vector<std::pair<at::ScalarType, std::string>> names{
      {at::kFloat, "F32"}, {at::kDouble, "F64"}, {at::kHalf, "F16"},  {at::kBFloat16, "BF16"},
      {at::kLong, "I64"},  {at::kInt, "I32"},    {at::kShort, "I16"}, {at::kChar, "I8"},
      {at::kByte, "U8"},   {at::kBool, "BOOL"}};
  return names;
}

std::string safetensors_at(const std::string& path) { return "[safetensors] " + path + ": "; }

// A dtype parse_safetensors_header accepted; the two tables must name the same dtypes.
at::ScalarType scalar_type(const std::string& path, const std::string& dtype) {
  auto it = std::find_if(dtype_names().begin(), dtype_names().end(),
                         [&](const auto& p) { return p.second == dtype; });
  if (it == dtype_names().end())
    throw CheckpointError(safetensors_at(path) + "dtype " + dtype + " has no tensor type");
  return it->first;
}

}  // namespace

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> data;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name == "__metadata__" || header.contains(name)) {
      throw CheckpointError(safetensors_at(path) + "duplicate or reserved tensor name '" + name + "'");
    }
    auto it = std::find_if(dtype_names().begin(), dtype_names().end(),
                           [&](const auto& p) { return p.first == tensor.scalar_type(); });
    if (it == dtype_names().end()) {
      throw CheckpointError(safetensors_at(path) + "tensor '" + name + "' has unsupported dtype " +
                            std::string(c10::toString(tensor.scalar_type())));
    }
    at::Tensor cpu = tensor.detach().to(at::kCPU).contiguous();
    const uint64_t bytes = cpu.numel() * cpu.element_size();
    header[name] = {
        {"dtype", it->second}, {"shape", cpu.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(cpu);
  }
  std::string text = header.dump();
  // Padding the header with spaces keeps the data 8-byte aligned, as the format recommends.
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t length = text.size();

  io_as<CheckpointError>([&] {
    write_file_synced(path, [&](std::ostream& out) {
      unsigned char prefix[8];
      for (int i = 0; i < 8; ++i) prefix[i] = static_cast<unsigned char>(length >> (8 * i));  // little-endian
      out.write(reinterpret_cast<const char*>(prefix), 8);
      out.write(text.data(), static_cast<std::streamsize>(text.size()));
      for (const at::Tensor& t : data) {
        out.write(static_cast<const char*>(t.data_ptr()),
                  static_cast<std::streamsize>(t.numel() * t.element_size()));
      }
    });
  });
}

namespace {

// The file open and its header read and checked.
struct OpenSafetensors {
  std::ifstream in;
  SafetensorsHeader header;
};

OpenSafetensors open_safetensors(const std::string& path) {
  OpenSafetensors f;
  f.in.open(path, std::ios::binary | std::ios::ate);
  if (!f.in) throw CheckpointError(safetensors_at(path) + "cannot open");
  const uint64_t size = static_cast<uint64_t>(f.in.tellg());
  f.in.seekg(0);
  unsigned char prefix[8] = {};
  f.in.read(reinterpret_cast<char*>(prefix), 8);
  const uint64_t length = safetensors_header_length(path, size, prefix);
  std::string text(length, '\0');
  f.in.read(text.data(), static_cast<std::streamsize>(length));
  if (!f.in) throw CheckpointError(safetensors_at(path) + "read failed in the header");
  f.header = parse_safetensors_header(path, size, length, text);
  return f;
}

// Reads entry `e`'s bytes into `t` (CPU, contiguous, e's size).
void read_entry(OpenSafetensors& f, const std::string& path, const SafetensorsEntry& e, const at::Tensor& t) {
  f.in.seekg(static_cast<std::streamoff>(8 + f.header.header_bytes + e.begin));
  f.in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(e.end - e.begin));
  if (!f.in) throw CheckpointError(safetensors_at(path) + "read failed in tensor '" + e.name + "'");
}

}  // namespace

NamedTensors load_safetensors(const std::string& path, std::map<std::string, std::string>* metadata) {
  OpenSafetensors f = open_safetensors(path);
  if (metadata != nullptr) *metadata = f.header.metadata;
  NamedTensors out;
  for (const SafetensorsEntry& e : f.header.entries) {
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(scalar_type(path, e.dtype)));
    read_entry(f, path, e, t);
    out.emplace_back(e.name, t);
  }
  return out;
}

std::vector<SafetensorsTensorInfo> safetensors_tensors(const std::string& path) {
  const OpenSafetensors f = open_safetensors(path);
  std::vector<SafetensorsTensorInfo> out;
  for (const SafetensorsEntry& e : f.header.entries)
    out.push_back({e.name, e.shape, scalar_type(path, e.dtype)});
  return out;
}

void read_safetensors_into(const std::string& path, const std::map<std::string, at::Tensor>& targets,
                           const TensorRead& after_read) {
  OpenSafetensors f = open_safetensors(path);
  for (const SafetensorsEntry& e : f.header.entries) {
    const auto found = targets.find(e.name);
    if (found == targets.end())
      throw CheckpointError(safetensors_at(path) + "tensor '" + e.name + "' has no place to be read into");
    const at::Tensor& t = found->second;
    if (t.sizes().vec() != e.shape || t.scalar_type() != scalar_type(path, e.dtype))
      throw CheckpointError(safetensors_at(path) + "tensor '" + e.name +
                            "' does not match its target's shape or dtype");
  }
  if (targets.size() != f.header.entries.size())
    throw CheckpointError(safetensors_at(path) + "holds " + std::to_string(f.header.entries.size()) +
                          " tensors, " + std::to_string(targets.size()) + " were expected");
  for (const SafetensorsEntry& e : f.header.entries) {
    const at::Tensor& t = targets.at(e.name);
    if (t.device().is_cpu() && t.is_contiguous()) {
      read_entry(f, path, e, t);
    } else {
      const at::Tensor buffer = at::empty(e.shape, at::TensorOptions().dtype(t.scalar_type()));
      read_entry(f, path, e, buffer);
      t.copy_(buffer);
    }
    if (after_read) after_read(e.name);
  }
}

}  // namespace causal
