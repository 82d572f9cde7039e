// Scalar quantizers and dequantizers for the low-bit K-quants Q2_K and Q3_K (256-value
// super-blocks of 16 sub-blocks of 16, layouts in ggml_types.h). Simple and layout-exact, not
// ggml's iterative search: Q3_K fits each sub-block's symmetric scale by trying a few scales
// around (extreme value) / -4 and keeping the least-squares scale of the best rounding; Q2_K
// spans each sub-block's [min(0, min), max] with its 4 levels. The sub-block scales are then
// quantized against the super-block's largest, and every value rounded against the scale the
// file will actually hold.
#include <cmath>
#include <cstring>

#include "kernels/check.h"
#include "kernels/fp16.h"
#include "kernels/quant_unpack.h"
#include "kernels/quantize_common.h"
#include "kernels/quantize.h"

namespace kvdesk::ref {
namespace {

constexpr int kSubValues = 16;
constexpr int kSubBlocks = kQK_K / kSubValues;
constexpr int kQ3Tries = 5;  // candidate inverse scales (-4 + 0.1 t) / extreme, |t| <= kQ3Tries

// Byte and shift of value v's 2-bit field in a Q2_K / Q3_K qs array.
int qs_byte(int v) { return 32 * (v / 128) + v % 32; }
int qs_shift(int v) { return 2 * ((v / 32) % 4); }

// The least-squares scale of sub-block x[16] over q = clamp(round(x * id), -4, 3) for the
// candidate id = (-4 + 0.1 t) / extreme; 0 for an all-zero sub-block.
float fit_q3_scale(const float* x) {
  return fit_scale(x, kSubValues, -4.0f, 0.1f, kQ3Tries, [](float v) { return static_cast<float>(clamp_int(v, -4, 3)); });
}

// Sub-block scales s[16] -> d = (the largest, sign kept) / -32, sc = round(s / d) + 32 in 6 bits.
void quantize_block_q3_k(const float* x, BlockQ3_K& y) {
  float scale[kSubBlocks];
  for (int i = 0; i < kSubBlocks; ++i) scale[i] = fit_q3_scale(x + kSubValues * i);
  y.d = fp32_to_fp16(signed_extreme(scale, kSubBlocks) / -32.0f);
  const float d = fp16_to_fp32(y.d);
  std::memset(y.scales, 0, sizeof(y.scales));
  std::memset(y.qs, 0, sizeof(y.qs));
  std::memset(y.hmask, 0, sizeof(y.hmask));
  for (int i = 0; i < kSubBlocks; ++i) {
    const int sc = steps_of(scale[i], d, -32, 31) + 32;
    y.scales[i % 8] |= static_cast<uint8_t>((sc & 15) << (4 * (i / 8)));
    y.scales[8 + i % 4] |= static_cast<uint8_t>((sc >> 4) << (2 * (i / 4)));
    const float step = d * (sc - 32);
    for (int l = 0; l < kSubValues; ++l) {
      const int v = kSubValues * i + l;
      const int q = steps_of(x[v], step, -4, 3) + 4;  // 0..7
      y.qs[qs_byte(v)] |= static_cast<uint8_t>((q & 3) << qs_shift(v));
      y.hmask[v % 32] |= static_cast<uint8_t>((q >> 2) << (v / 32));
    }
  }
}

// Affine sub-blocks of 16 with 4 levels: value ~= d * sc[i] * q - dmin * m[i], sc and m in 4 bits
// (scales[i] = sc | m << 4).
void quantize_block_q2_k(const float* x, BlockQ2_K& y) {
  int sc[kSubBlocks];
  int m[kSubBlocks];
  int q[kQK_K];
  quantize_affine_sub_blocks<kSubBlocks, kSubValues>(x, 4, 15, y.d, y.dmin, sc, m, q);
  for (int i = 0; i < kSubBlocks; ++i) y.scales[i] = static_cast<uint8_t>(sc[i] | m[i] << 4);
  std::memset(y.qs, 0, sizeof(y.qs));
  for (int v = 0; v < kQK_K; ++v) y.qs[qs_byte(v)] |= static_cast<uint8_t>(q[v] << qs_shift(v));
}

}  // namespace

void quantize_row_q2_k(const float* x, BlockQ2_K* y, int64_t n) { quantize_blocks<kQK_K>(x, y, n, quantize_block_q2_k); }
void quantize_row_q3_k(const float* x, BlockQ3_K* y, int64_t n) { quantize_blocks<kQK_K>(x, y, n, quantize_block_q3_k); }

// y = d * (scales[i] & 15) * q - dmin * (scales[i] >> 4), i = v / 16
void dequantize_row_q2_k(const BlockQ2_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int q[kQK_K];
    unpack_q2_k(x[b], q);
    const float d = fp16_to_fp32(x[b].d);
    const float dmin = fp16_to_fp32(x[b].dmin);
    for (int v = 0; v < kQK_K; ++v) {
      const uint8_t sm = x[b].scales[v / kSubValues];
      y[b * kQK_K + v] = d * (sm & 15) * q[v] - dmin * (sm >> 4);
    }
  }
}

// y = d * (sc[i] - 32) * q, i = v / 16, q in -4..3
void dequantize_row_q3_k(const BlockQ3_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int q[kQK_K];
    unpack_q3_k(x[b], q);
    const float d = fp16_to_fp32(x[b].d);
    for (int v = 0; v < kQK_K; ++v) y[b * kQK_K + v] = d * (q3_k_scale(x[b].scales, v / kSubValues) - 32) * q[v];
  }
}

}  // namespace kvdesk::ref
