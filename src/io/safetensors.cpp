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

NamedTensors load_safetensors(const std::string& path, std::map<std::string, std::string>* metadata) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw CheckpointError(safetensors_at(path) + "cannot open");
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  if (size < 8)
    throw CheckpointError(safetensors_at(path) + "file of " + std::to_string(size) + " bytes has no header");
  unsigned char prefix[8];
  in.read(reinterpret_cast<char*>(prefix), 8);
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= static_cast<uint64_t>(prefix[i]) << (8 * i);
  if (length > size - 8) {
    throw CheckpointError(safetensors_at(path) + "header length " + std::to_string(length) +
                          " exceeds the file (" + std::to_string(size) + " bytes)");
  }
  std::string text(length, '\0');
  in.read(text.data(), static_cast<std::streamsize>(length));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(safetensors_at(path) + "header is not JSON: " + e.what());
  }
  if (!header.is_object()) throw CheckpointError(safetensors_at(path) + "header is not a JSON object");
  const uint64_t data_bytes = size - 8 - length;

  struct Entry {
    std::string name;
    at::ScalarType dtype;
    std::vector<int64_t> shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (metadata != nullptr) *metadata = value.get<std::map<std::string, std::string>>();
      continue;
    }
    try {
      const std::string dtype = value.at("dtype").get<std::string>();
      auto it = std::find_if(dtype_names().begin(), dtype_names().end(),
                             [&](const auto& p) { return p.second == dtype; });
      if (it == dtype_names().end())
        throw CheckpointError(safetensors_at(path) + "tensor '" + name + "' has unknown dtype " + dtype);
      Entry e{name, it->first, value.at("shape").get<std::vector<int64_t>>(),
              value.at("data_offsets").at(0).get<uint64_t>(), value.at("data_offsets").at(1).get<uint64_t>()};
      int64_t numel = 1;
      for (int64_t d : e.shape) {
        if (d < 0)
          throw CheckpointError(safetensors_at(path) + "tensor '" + name + "' has a negative dimension");
        numel *= d;
      }
      const uint64_t expected = static_cast<uint64_t>(numel) * c10::elementSize(e.dtype);
      if (e.end < e.begin || e.end - e.begin != expected || e.end > data_bytes) {
        throw CheckpointError(safetensors_at(path) + "tensor '" + name + "' byte range [" +
                              std::to_string(e.begin) + ", " + std::to_string(e.end) +
                              ") does not hold its " + std::to_string(expected) + " bytes inside the " +
                              std::to_string(data_bytes) + "-byte data section");
      }
      entries.push_back(std::move(e));
    } catch (const nlohmann::json::exception& ex) {
      throw CheckpointError(safetensors_at(path) + "tensor '" + name +
                            "' has a malformed entry: " + ex.what());
    }
  }
  // The ranges must tile the data section: no overlap, no gap, nothing left over.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  uint64_t covered = 0;
  for (const Entry& e : entries) {
    if (e.begin != covered) {
      throw CheckpointError(safetensors_at(path) + "tensor '" + e.name + "' starts at byte " +
                            std::to_string(e.begin) + ", expected " + std::to_string(covered) +
                            " (ranges overlap or leave a gap)");
    }
    covered = e.end;
  }
  if (covered != data_bytes) {
    throw CheckpointError(safetensors_at(path) + std::to_string(data_bytes - covered) +
                          " bytes after the last tensor");
  }

  NamedTensors out;
  for (const Entry& e : entries) {
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(e.dtype));
    in.seekg(static_cast<std::streamoff>(8 + length + e.begin));
    in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(e.end - e.begin));
    if (!in) throw CheckpointError(safetensors_at(path) + "read failed in tensor '" + e.name + "'");
    out.emplace_back(e.name, t);
  }
  return out;
}

}  // namespace causal
