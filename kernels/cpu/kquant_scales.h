// Internal, included only by the K-quant ISA translation units: Q4_K / Q5_K's 12 packed scale
// bytes -> their eight 6-bit scales sc[s] and eight 6-bit mins m[s] as 16 bytes (k_scale_min for
// all eight at once), computed in two 64-bit general-purpose registers so the vector units stay
// on the dot products. Internal linkage so each ISA keeps its own copy.
#pragma once
#include <cstdint>
#include <cstring>

namespace kvdesk {
namespace {

// Byte order of the unpacked 16: sc[0..3], m[0..3], sc[4..7], m[4..7].
struct KScaleMinBytes {
  uint64_t low;   // [8] u8 sc[0..3], m[0..3]
  uint64_t high;  // [8] u8 sc[4..7], m[4..7]
};
constexpr int k_scale_byte(int s) { return s < 4 ? s : s + 4; }
constexpr int k_min_byte(int s) { return s < 4 ? s + 4 : s + 8; }

// Bytes 0-7 of the packed 12 hold sc[0..3], m[0..3] in their low 6 bits and the high 2 bits of
// sc[4..7], m[4..7] on top; bytes 8-11 hold the low 4 bits of sc[4..7] | m[4..7] << 4.
inline KScaleMinBytes k_scale_min_bytes(const uint8_t* packed) {
  uint64_t first;
  uint32_t last;
  std::memcpy(&first, packed, sizeof(first));
  std::memcpy(&last, packed + 8, sizeof(last));
  const uint64_t low_bits = (last | uint64_t{last >> 4} << 32) & 0x0F0F0F0F0F0F0F0Full;
  const uint64_t top_bits = (first >> 6 & 0x0303030303030303ull) << 4;
  return KScaleMinBytes{first & 0x3F3F3F3F3F3F3F3Full, low_bits | top_bits};
}

}  // namespace
}  // namespace kvdesk
