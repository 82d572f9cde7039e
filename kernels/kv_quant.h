// KV row formats: how one token's keys (or values) for one kv head are stored, and the
// scalar quantizers that write them. A row is self-contained: its scales first, then its
// values, so appending a token never requantizes another. Attention dequantizes rows in
// registers (kernels/attention.h); nothing keeps a dequantized copy.
//
//   f32 / f16 / bf16   values[head_dim]
//   fp8_e4m3/_e5m2     f32 s,  codes[head_dim]            x = s * fp8(code)
//   int8               f32 s,  q[head_dim] (int8)          x = s * q,  s = amax / 127
//   int4               f16 s[G], nib[head_dim / 2]         x = s[g] * (nibble - 8), G = ceil(head_dim / 32)
//                      byte i holds value 2i (low nibble) and 2i+1 (high nibble); group g is
//                      values [32g, 32g + 32), the last one shorter when head_dim % 32 != 0.
//
// Scale granularity, measured as round-trip NMSE (sum err^2 / sum x^2) on Gaussian rows, on
// rows with two 12x outlier channels (keys of real LLMs have some), and on stories260K's K/V:
//              per row               per 32                 per 16
//   int8    4.1e-5 / 3.7e-4     2.8e-5 / 1.2e-4 (+6% B)     2.2e-5 / 5.9e-5 (+12% B)
//   int4    1.1e-2 / 8.4e-2     7.3e-3 / 2.7e-2             5.7e-3 / 1.4e-2 (+11% B)
// int8 per row is already ~15x below fp8_e4m3 (6.6e-4) and its scale costs nothing in the
// kernel (it multiplies the finished dot product, or the softmax weight): groups would buy
// little for 6% more bytes and a multiply per vector. int4 per row collapses on outlier
// channels (8.4e-2), so it takes ggml's Q4_0 choice: groups of 32 with an f16 scale (4.5
// bits/value) and the 16 levels -8..7 with the largest-magnitude value at -8 (20% below the
// symmetric -7..7 grid). fp8 without a scale underflows on small rows (e4m3 NMSE 3.5e-2 on
// rows with |x| ~ 3e-3, vs 6.6e-4 scaled) and saturates above 448; one f32 scale per row
// (amax -> the format's largest value) removes both for 4 bytes a row.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/paged_kv.h"

namespace kvdesk {

constexpr int32_t kKvInt4Group = 32;   // int4 values per f16 scale

// Largest finite magnitudes; a row scale maps the row's amax there.
constexpr float kFp8E4M3Max = 448.0f;
constexpr float kFp8E5M2Max = 57344.0f;

// Scales at the front of a row (0 for f32/f16/bf16) and where the values start. Inline: the
// attention kernels ask per row.
constexpr int32_t kv_row_scales(KvType type, int32_t head_dim) {
  switch (type) {
    case KvType::FP8_E4M3:
    case KvType::FP8_E5M2:
    case KvType::INT8: return 1;
    case KvType::INT4: return (head_dim + kKvInt4Group - 1) / kKvInt4Group;
    default: return 0;
  }
}
constexpr size_t kv_row_values_offset(KvType type, int32_t head_dim) {
  const size_t scale_bytes = type == KvType::INT4 ? sizeof(uint16_t) : sizeof(float);
  return scale_bytes * size_t(kv_row_scales(type, head_dim));
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
