// KV row formats: how one token's keys (or values) for one kv head are stored, and the
// scalar quantizers that write them. What a row's values are is the forward's choice, not the
// format's: quantized K types hold the model's smoothed keys, int8 / int4 ones also scaled per
// channel (engine/model/key_smoothing.h), and int8 / int4 rows Hadamard-rotated (hadamard.h). A row is self-contained: its scales first, then its
// values, so appending a token never requantizes another. Attention dequantizes rows in
// registers (kernels/attention.h); nothing keeps a dequantized copy.
//
//   f32 / f16 / bf16   values[head_dim]
//   fp8_e4m3/_e5m2     f32 s,  codes[head_dim]                  x = s * fp8(code), s = amax / fp8 max
//   int8               {f16 s, f16 m}[G], q[head_dim] (uint8)   x = s[g] * q + m[g],  s = (max - m) / 255
//   int4               {f16 s, f16 m}[G], nib[head_dim / 2]     x = s[g] * nibble + m[g], s = (max - m) / 15
//                      G = ceil(head_dim / group); group g is values [group*g, group*g + group), the
//                      last one shorter; int4 byte i holds value 2i (low nibble) and 2i+1 (high).
//
// Scales follow the data. int8 and int4 are affine (asymmetric): each group's [min, max] is
// spread over all 256 / 16 levels, m = f16(min) and s = f16((max - m) / levels), so a group whose
// values sit on one side of zero, or whose one large value is an outlier of one sign (keys of
// real LLMs have such channels; stories260K's reach |k| = 28 among values of a few units),
// loses no level to the empty side. Groups: int8 32 values (head_dim when smaller), 4 bytes
// per 32 values = 12.5% over 8 bits; int4 64 values, 4 bytes per 64 = 12.5% over 4 bits (groups
// of 32 would cost 25%). fp8 is a float format, so its relative precision does not depend on the
// scale: one f32 scale per row (amax -> the format's largest normal) only keeps small rows out
// of the subnormals (e4m3 NMSE 3.5e-2 on rows with |x| ~ 3e-3, vs 6.6e-4 scaled) and large
// ones from saturating, for 4 bytes a row.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/paged_kv.h"

namespace kvdesk {

constexpr int32_t kKvInt8Group = 32;   // int8 values per (scale, min) pair
constexpr int32_t kKvInt4Group = 64;   // int4 values per (scale, min) pair
constexpr float kKvInt8Levels = 255.0f;   // codes 0..255
constexpr float kKvInt4Levels = 15.0f;    // codes 0..15

// Largest finite magnitudes; a row scale maps the row's amax there.
constexpr float kFp8E4M3Max = 448.0f;
constexpr float kFp8E5M2Max = 57344.0f;

// Values per scale group of an int8 / int4 row (head_dim itself when smaller; 0 for others). A
// head_dim that is not a multiple of it leaves a short part after the whole groups: a group of
// its own (a short range, so a finer step) while the row's (scale, min) pairs stay within 15% of
// its codes' bytes, else the part joins the last whole group, which is then wider. int4 rows of
// Phi-2's 80 and Phi-3's 96 dims are one group each, scales at 10% and 8.3% where 64 + 16 and
// 64 + 32 would cost 20% and 16.7%; the round-trip NMSE of N(0, 1) rows is 8.6e-3 and 9.2e-3
// (64 dims in one group: 8.0e-3; simulated with the short group: 7.2e-3 and 7.4e-3). Every
// boundary but the row's end stays at a multiple of the group size, where the SIMD kernels'
// value units expect it.
constexpr int32_t kKvMaxScaleBytesPercent = 15;   // the most a short last group may bring a row to
// The group of a row at least that long (0 for types without groups).
constexpr int32_t kv_standard_group(KvType type) {
  return type == KvType::INT8 ? kKvInt8Group : type == KvType::INT4 ? kKvInt4Group : 0;
}
constexpr int32_t kv_row_group(KvType type, int32_t head_dim) {
  const int32_t group = kv_standard_group(type);
  return head_dim < group ? head_dim : group;
}

// Scale entries at the front of a row (0 for f32/f16/bf16): one f32 for fp8, one (f16 scale,
// f16 min) pair per group for int8 / int4. Inline: the attention kernels ask per row.
constexpr int32_t kv_row_scales(KvType type, int32_t head_dim) {
  switch (type) {
    case KvType::FP8_E4M3:
    case KvType::FP8_E5M2: return 1;
    case KvType::INT8:
    case KvType::INT4: {
      const int32_t whole = head_dim / kv_row_group(type, head_dim);
      const int32_t code_bytes = type == KvType::INT8 ? head_dim : head_dim / 2;
      const bool short_group = head_dim % kv_row_group(type, head_dim) != 0 &&
                               4 * (whole + 1) * 100 <= kKvMaxScaleBytesPercent * code_bytes;
      return short_group ? whole + 1 : whole;
    }
    default: return 0;
  }
}

// The scale group of an int8 / int4 row that value i belongs to.
constexpr int32_t kv_group_of(KvType type, int32_t head_dim, int32_t i) {
  const int32_t g = i / kv_row_group(type, head_dim), last = kv_row_scales(type, head_dim) - 1;
  return g < last ? g : last;
}

// One past the last value of scale group g (its first is g * kv_row_group).
constexpr int32_t kv_group_end(KvType type, int32_t head_dim, int32_t g) {
  return g + 1 < kv_row_scales(type, head_dim) ? (g + 1) * kv_row_group(type, head_dim) : head_dim;
}

// Whether an int8 / int4 row of head_dim ends in a group wider than the others.
constexpr bool kv_row_wide_last_group(KvType type, int32_t head_dim) {
  const int32_t group = kv_row_group(type, head_dim);
  return group > 0 && kv_row_scales(type, head_dim) * group < head_dim;
}

// Every scale entry is 4 bytes (an f32, or an f16 pair), so values start 4-byte aligned: after
// `scales` entries, or a row's kv_row_scales (the attention kernels count those once a call).
constexpr size_t kv_values_offset(int32_t scales) { return 4 * size_t(scales); }
constexpr size_t kv_row_values_offset(KvType type, int32_t head_dim) {
  return kv_values_offset(kv_row_scales(type, head_dim));
}

// fp8 codes, bit-exact: round to nearest even, saturating to +-max (no inf); NaN stays NaN.
uint8_t fp32_to_fp8_e4m3(float x);
uint8_t fp32_to_fp8_e5m2(float x);
float fp8_e4m3_to_fp32(uint8_t code);
float fp8_e5m2_to_fp32(uint8_t code);

namespace ref {
// x[head_dim] -> one row of kv_row_bytes(type, head_dim) bytes.
void quantize_kv_row(KvType type, const float* x, uint8_t* row, int32_t head_dim);
// One row -> x[head_dim].
void dequantize_kv_row(KvType type, const uint8_t* row, float* x, int32_t head_dim);
}  // namespace ref

}  // namespace kvdesk
