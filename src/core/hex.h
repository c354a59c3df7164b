// Bytes <-> lowercase hexadecimal text, two digits per byte: SHA-256 digests, generator states, escapes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace causal {

// `size` bytes from `bytes` as 2 * size lowercase digits, the high nibble of each byte first.
std::string to_hex(const void* bytes, std::size_t size);

// The bytes to_hex wrote: nullopt when `text` has an odd length or a character outside [0-9a-f].
std::optional<std::vector<uint8_t>> from_hex(std::string_view text);

}  // namespace causal
