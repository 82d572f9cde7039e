// Scalar quantizers and dequantizers for the K-quants Q4_K, Q5_K and Q6_K (256-value
// super-blocks, layouts in ggml_types.h). The quantizers are simple and layout-exact, not
// ggml's iterative search: per sub-block min/max (Q4_K, Q5_K) or signed extreme (Q6_K) scales,
// themselves quantized against the super-block's largest, then every value rounded against
// the scale the file will actually hold.
#include <cmath>
#include <cstring>

#include "kernels/check.h"
#include "kernels/fp16.h"
#include "kernels/quant_unpack.h"
#include "kernels/quantize_common.h"
#include "kernels/quantize.h"

namespace kvdesk::ref {
namespace {

constexpr int kSubValues = 32;    // Q4_K / Q5_K sub-block
constexpr int kSubBlocks = kQK_K / kSubValues;
constexpr int kQ6SubValues = 16;  // Q6_K sub-block
constexpr int kQ6SubBlocks = kQK_K / kQ6SubValues;

// Inverse of k_scale_min: 6-bit scales sc[8] and mins m[8] -> the 12 packed bytes.
void pack_scale_min(const int* sc, const int* m, uint8_t* scales) {
  std::memset(scales, 0, kKScaleBytes);
  for (int s = 0; s < 4; ++s) {
    scales[s] = static_cast<uint8_t>(sc[s]);
    scales[s + 4] = static_cast<uint8_t>(m[s]);
  }
  for (int s = 4; s < 8; ++s) {
    scales[s + 4] = static_cast<uint8_t>((sc[s] & 15) | (m[s] & 15) << 4);
    scales[s - 4] |= static_cast<uint8_t>((sc[s] >> 4) << 6);
    scales[s] |= static_cast<uint8_t>((m[s] >> 4) << 6);
  }
}

// Asymmetric super-block with kLevels quant levels (16 for Q4_K, 32 for Q5_K) and 6-bit
// sub-block scales and mins: writes d, dmin and the packed scales; q[256] gets the quants in
// value order.
template <int kLevels>
void quantize_affine_super(const float* x, uint16_t& d_out, uint16_t& dmin_out, uint8_t* scales, int* q) {
  int sc[kSubBlocks];
  int m[kSubBlocks];
  quantize_affine_sub_blocks<kSubBlocks, kSubValues>(x, kLevels, 63, d_out, dmin_out, sc, m, q);
  pack_scale_min(sc, m, scales);
}

void quantize_block_q4_k(const float* x, BlockQ4_K& y) {
  int q[kQK_K];
  quantize_affine_super<16>(x, y.d, y.dmin, y.scales, q);
  for (int s = 0; s < kSubBlocks; s += 2) {
    for (int l = 0; l < kSubValues; ++l) {
      y.qs[32 * (s / 2) + l] = static_cast<uint8_t>(q[32 * s + l] | q[32 * (s + 1) + l] << 4);
    }
  }
}

void quantize_block_q5_k(const float* x, BlockQ5_K& y) {
  int q[kQK_K];
  quantize_affine_super<32>(x, y.d, y.dmin, y.scales, q);
  std::memset(y.qh, 0, sizeof(y.qh));
  for (int s = 0; s < kSubBlocks; ++s) {
    for (int l = 0; l < kSubValues; ++l) {
      const int v = q[32 * s + l];
      if (s % 2 == 0) {
        y.qs[32 * (s / 2) + l] = static_cast<uint8_t>(v & 15);
      } else {
        y.qs[32 * (s / 2) + l] |= static_cast<uint8_t>((v & 15) << 4);
      }
      y.qh[l] |= static_cast<uint8_t>((v >> 4) << s);
    }
  }
}

// Sub-block i of 16 values: scale_i = extreme_i / -32 (the extreme gets q = 0, zero q = 32);
// int8 sc[i] = round(scale_i / d) with d = (largest |scale|, sign kept) / -128.
void quantize_block_q6_k(const float* x, BlockQ6_K& y) {
  float scale[kQ6SubBlocks];
  for (int i = 0; i < kQ6SubBlocks; ++i) scale[i] = signed_extreme(x + kQ6SubValues * i, kQ6SubValues) / -32.0f;
  y.d = fp32_to_fp16(signed_extreme(scale, kQ6SubBlocks) / -128.0f);
  const float d = fp16_to_fp32(y.d);
  int q[kQK_K];
  for (int i = 0; i < kQ6SubBlocks; ++i) {
    y.scales[i] = static_cast<int8_t>(steps_of(scale[i], d, -128, 127));
    const float step = d * y.scales[i];
    for (int l = 0; l < kQ6SubValues; ++l) {
      const int v = kQ6SubValues * i + l;
      q[v] = steps_of(x[v], step, -32, 31) + 32;
    }
  }
  for (int h = 0; h < 2; ++h) {
    const int* qh = q + 128 * h;   // quarters k = 0..3 at qh + 32k
    for (int l = 0; l < 32; ++l) {
      y.ql[64 * h + l] = static_cast<uint8_t>((qh[l] & 15) | (qh[64 + l] & 15) << 4);
      y.ql[64 * h + 32 + l] = static_cast<uint8_t>((qh[32 + l] & 15) | (qh[96 + l] & 15) << 4);
      y.qh[32 * h + l] = static_cast<uint8_t>((qh[l] >> 4) | (qh[32 + l] >> 4) << 2 | (qh[64 + l] >> 4) << 4 |
                                              (qh[96 + l] >> 4) << 6);
    }
  }
}

// y = d * sc[s] * q - dmin * m[s] for value 32s + l, q from `unpack`.
template <class Block, class Unpack>
void dequantize_affine(const Block* x, float* y, int64_t n, Unpack unpack) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int q[kQK_K];
    unpack(x[b], q);
    const float d = fp16_to_fp32(x[b].d);
    const float dmin = fp16_to_fp32(x[b].dmin);
    for (int s = 0; s < kSubBlocks; ++s) {
      const KScaleMin sm = k_scale_min(x[b].scales, s);
      const float scale = d * sm.scale;
      const float shift = dmin * sm.min;
      for (int l = 0; l < kSubValues; ++l) y[b * kQK_K + 32 * s + l] = scale * q[32 * s + l] - shift;
    }
  }
}

}  // namespace

void quantize_row_q4_k(const float* x, BlockQ4_K* y, int64_t n) { quantize_blocks<kQK_K>(x, y, n, quantize_block_q4_k); }
void quantize_row_q5_k(const float* x, BlockQ5_K* y, int64_t n) { quantize_blocks<kQK_K>(x, y, n, quantize_block_q5_k); }
void quantize_row_q6_k(const float* x, BlockQ6_K* y, int64_t n) { quantize_blocks<kQK_K>(x, y, n, quantize_block_q6_k); }

void dequantize_row_q4_k(const BlockQ4_K* x, float* y, int64_t n) { dequantize_affine(x, y, n, unpack_q4_k); }
void dequantize_row_q5_k(const BlockQ5_K* x, float* y, int64_t n) { dequantize_affine(x, y, n, unpack_q5_k); }

// y = d * scales[v / 16] * (q - 32)
void dequantize_row_q6_k(const BlockQ6_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int q[kQK_K];
    unpack_q6_k(x[b], q);
    const float d = fp16_to_fp32(x[b].d);
    for (int v = 0; v < kQK_K; ++v) y[b * kQK_K + v] = d * x[b].scales[v / kQ6SubValues] * (q[v] - 32);
  }
}

}  // namespace kvdesk::ref
