// Scalar row quantizers (ggml's reference rounding, bit for bit) and dequantizers for the
// computable weight types. Used to write GGUF files and as the truth the SIMD dots are tested by.
#include "kernels/quantize.h"

#include <cmath>

#include "kernels/check.h"
#include "kernels/fp16.h"
#include "kernels/quantize_common.h"

namespace kvdesk::ref {
namespace {

// d = amax / 127, qs[i] = round_half_away(x[i] / d)   (ggml: x * (1/d), roundf)
void quantize_block_q8_0(const float* x, BlockQ8_0& y) {
  float amax = 0.0f;
  for (int i = 0; i < kQ8_0BlockValues; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y.d = fp32_to_fp16(d);
  for (int i = 0; i < kQ8_0BlockValues; ++i) y.qs[i] = static_cast<int8_t>(std::round(x[i] * id));
}

// m = the value of largest magnitude (sign kept), d = m / -8,
// q[i] = min(15, trunc(x[i] / d + 8.5)) so q = 0 is exactly m and 8 is zero.
void quantize_block_q4_0(const float* x, BlockQ4_0& y) {
  const float d = signed_extreme(x, kQ4_0BlockValues) / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y.d = fp32_to_fp16(d);
  constexpr int kHalf = kQ4_0BlockValues / 2;
  for (int i = 0; i < kHalf; ++i) {
    const int lo = static_cast<int8_t>(x[i] * id + 8.5f);
    const int hi = static_cast<int8_t>(x[i + kHalf] * id + 8.5f);
    y.qs[i] = static_cast<uint8_t>((lo < 15 ? lo : 15) | (hi < 15 ? hi : 15) << 4);
  }
}

// y[i] = d * qs[i]
void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQ8_0BlockValues; ++b) {
    const float d = fp16_to_fp32(x[b].d);
    for (int i = 0; i < kQ8_0BlockValues; ++i) y[b * kQ8_0BlockValues + i] = d * x[b].qs[i];
  }
}

// y[i] = d * ((qs[i] & 15) - 8), y[i + 16] = d * ((qs[i] >> 4) - 8)
void dequantize_row_q4_0(const BlockQ4_0* x, float* y, int64_t n) {
  constexpr int kHalf = kQ4_0BlockValues / 2;
  for (int64_t b = 0; b < n / kQ4_0BlockValues; ++b) {
    const float d = fp16_to_fp32(x[b].d);
    float* out = y + b * kQ4_0BlockValues;
    for (int i = 0; i < kHalf; ++i) {
      out[i] = d * ((x[b].qs[i] & 15) - 8);
      out[i + kHalf] = d * ((x[b].qs[i] >> 4) - 8);
    }
  }
}

}  // namespace

void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
  quantize_blocks<kQ8_0BlockValues>(x, y, n, quantize_block_q8_0);
}

void quantize_row_q4_0(const float* x, BlockQ4_0* y, int64_t n) {
  quantize_blocks<kQ4_0BlockValues>(x, y, n, quantize_block_q4_0);
}

void quantize_row(GgmlType type, const float* x, void* out, int64_t n) {
  switch (type) {
    case GgmlType::F32: {
      float* y = static_cast<float*>(out);
      for (int64_t i = 0; i < n; ++i) y[i] = x[i];
      return;
    }
    case GgmlType::F16: {
      uint16_t* y = static_cast<uint16_t*>(out);
      for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
      return;
    }
    case GgmlType::BF16: {
      uint16_t* y = static_cast<uint16_t*>(out);
      for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_bf16(x[i]);
      return;
    }
    case GgmlType::Q8_0: quantize_row_q8_0(x, static_cast<BlockQ8_0*>(out), n); return;
    case GgmlType::Q4_0: quantize_row_q4_0(x, static_cast<BlockQ4_0*>(out), n); return;
    case GgmlType::Q4_1: quantize_row_q4_1(x, static_cast<BlockQ4_1*>(out), n); return;
    case GgmlType::Q5_0: quantize_row_q5_0(x, static_cast<BlockQ5_0*>(out), n); return;
    case GgmlType::Q5_1: quantize_row_q5_1(x, static_cast<BlockQ5_1*>(out), n); return;
    case GgmlType::Q4_K: quantize_row_q4_k(x, static_cast<BlockQ4_K*>(out), n); return;
    case GgmlType::Q5_K: quantize_row_q5_k(x, static_cast<BlockQ5_K*>(out), n); return;
    case GgmlType::Q6_K: quantize_row_q6_k(x, static_cast<BlockQ6_K*>(out), n); return;
    case GgmlType::Q2_K: quantize_row_q2_k(x, static_cast<BlockQ2_K*>(out), n); return;
    case GgmlType::Q3_K: quantize_row_q3_k(x, static_cast<BlockQ3_K*>(out), n); return;
    case GgmlType::IQ4_NL: quantize_row_iq4_nl(x, static_cast<BlockIQ4_NL*>(out), n); return;
    case GgmlType::IQ4_XS: quantize_row_iq4_xs(x, static_cast<BlockIQ4_XS*>(out), n); return;
    case GgmlType::MXFP4: quantize_row_mxfp4(x, static_cast<BlockMXFP4*>(out), n); return;
    default: KVDESK_ASSERT(!"quantize_row: type is not computable");
  }
}

void dequantize_row(GgmlType type, const void* row, float* y, int64_t n) {
  KVDESK_ASSERT(n % ggml_type_info(type).block_values == 0);
  switch (type) {
    case GgmlType::F32: {
      const float* x = static_cast<const float*>(row);
      for (int64_t i = 0; i < n; ++i) y[i] = x[i];
      return;
    }
    case GgmlType::F16: {
      const uint16_t* x = static_cast<const uint16_t*>(row);
      for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_fp32(x[i]);
      return;
    }
    case GgmlType::BF16: {
      const uint16_t* x = static_cast<const uint16_t*>(row);
      for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_fp32(x[i]);
      return;
    }
    case GgmlType::Q8_0: dequantize_row_q8_0(static_cast<const BlockQ8_0*>(row), y, n); return;
    case GgmlType::Q4_0: dequantize_row_q4_0(static_cast<const BlockQ4_0*>(row), y, n); return;
    case GgmlType::Q4_1: dequantize_row_q4_1(static_cast<const BlockQ4_1*>(row), y, n); return;
    case GgmlType::Q5_0: dequantize_row_q5_0(static_cast<const BlockQ5_0*>(row), y, n); return;
    case GgmlType::Q5_1: dequantize_row_q5_1(static_cast<const BlockQ5_1*>(row), y, n); return;
    case GgmlType::Q4_K: dequantize_row_q4_k(static_cast<const BlockQ4_K*>(row), y, n); return;
    case GgmlType::Q5_K: dequantize_row_q5_k(static_cast<const BlockQ5_K*>(row), y, n); return;
    case GgmlType::Q6_K: dequantize_row_q6_k(static_cast<const BlockQ6_K*>(row), y, n); return;
    case GgmlType::Q2_K: dequantize_row_q2_k(static_cast<const BlockQ2_K*>(row), y, n); return;
    case GgmlType::Q3_K: dequantize_row_q3_k(static_cast<const BlockQ3_K*>(row), y, n); return;
    case GgmlType::IQ4_NL: dequantize_row_iq4_nl(static_cast<const BlockIQ4_NL*>(row), y, n); return;
    case GgmlType::IQ4_XS: dequantize_row_iq4_xs(static_cast<const BlockIQ4_XS*>(row), y, n); return;
    case GgmlType::MXFP4: dequantize_row_mxfp4(static_cast<const BlockMXFP4*>(row), y, n); return;
    default: KVDESK_ASSERT(!"dequantize_row: type is not computable");
  }
}

}  // namespace kvdesk::ref
