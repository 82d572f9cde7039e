// Scalar quantizers and dequantizers for the 32-value affine and 5-bit formats Q4_1, Q5_0 and
// Q5_1 (ggml's reference rounding: min/max or signed-extreme scale, x * (1/d), truncating +0.5).
#include <cmath>
#include <cstring>

#include "kernels/check.h"
#include "kernels/fp16.h"
#include "kernels/quant_unpack.h"
#include "kernels/quantize_common.h"
#include "kernels/quantize.h"

namespace kvdesk::ref {
namespace {

constexpr int kValues = 32;
constexpr int kHalf = kValues / 2;

struct Range {
  float min;
  float max;
};

Range range_of(const float* x) {
  Range r{x[0], x[0]};
  for (int i = 1; i < kValues; ++i) {
    r.min = std::fmin(r.min, x[i]);
    r.max = std::fmax(r.max, x[i]);
  }
  return r;
}

int clamp_to(int q, int top) { return q < top ? q : top; }

// q[32] in 0..31 -> low nibbles into qs (value i and i + 16 share qs[i]), 5th bits into qh.
void pack_5bit(const int* q, uint8_t* qs, uint8_t* qh) {
  uint32_t high = 0;
  for (int i = 0; i < kHalf; ++i) {
    qs[i] = static_cast<uint8_t>((q[i] & 15) | (q[i + kHalf] & 15) << 4);
    high |= static_cast<uint32_t>(q[i] >> 4) << i;
    high |= static_cast<uint32_t>(q[i + kHalf] >> 4) << (i + kHalf);
  }
  std::memcpy(qh, &high, sizeof(high));
}

// d = (max - min) / 15, m = min, q[i] = min(15, trunc((x[i] - min) / d + 0.5))
void quantize_block_q4_1(const float* x, BlockQ4_1& y) {
  const Range r = range_of(x);
  const float d = (r.max - r.min) / 15.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y.d = fp32_to_fp16(d);
  y.m = fp32_to_fp16(r.min);
  for (int i = 0; i < kHalf; ++i) {
    const int lo = clamp_to(static_cast<int8_t>((x[i] - r.min) * id + 0.5f), 15);
    const int hi = clamp_to(static_cast<int8_t>((x[i + kHalf] - r.min) * id + 0.5f), 15);
    y.qs[i] = static_cast<uint8_t>(lo | hi << 4);
  }
}

// d = extreme / -16, q[i] = min(31, trunc(x[i] / d + 16.5)) so q = 0 is the extreme, 16 zero.
void quantize_block_q5_0(const float* x, BlockQ5_0& y) {
  const float d = signed_extreme(x, kValues) / -16.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y.d = fp32_to_fp16(d);
  int q[kValues];
  for (int i = 0; i < kValues; ++i) q[i] = clamp_to(static_cast<int8_t>(x[i] * id + 16.5f), 31);
  pack_5bit(q, y.qs, y.qh);
}

// d = (max - min) / 31, m = min, q[i] = min(31, trunc((x[i] - min) / d + 0.5))
void quantize_block_q5_1(const float* x, BlockQ5_1& y) {
  const Range r = range_of(x);
  const float d = (r.max - r.min) / 31.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y.d = fp32_to_fp16(d);
  y.m = fp32_to_fp16(r.min);
  int q[kValues];
  for (int i = 0; i < kValues; ++i) q[i] = clamp_to(static_cast<int8_t>((x[i] - r.min) * id + 0.5f), 31);
  pack_5bit(q, y.qs, y.qh);
}

}  // namespace

void quantize_row_q4_1(const float* x, BlockQ4_1* y, int64_t n) { quantize_blocks<kValues>(x, y, n, quantize_block_q4_1); }
void quantize_row_q5_0(const float* x, BlockQ5_0* y, int64_t n) { quantize_blocks<kValues>(x, y, n, quantize_block_q5_0); }
void quantize_row_q5_1(const float* x, BlockQ5_1* y, int64_t n) { quantize_blocks<kValues>(x, y, n, quantize_block_q5_1); }

// y[i] = d * (qs[i] & 15) + m, y[i + 16] = d * (qs[i] >> 4) + m
void dequantize_row_q4_1(const BlockQ4_1* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kValues; ++b) {
    const float d = fp16_to_fp32(x[b].d);
    const float m = fp16_to_fp32(x[b].m);
    float* out = y + b * kValues;
    for (int i = 0; i < kHalf; ++i) {
      out[i] = d * (x[b].qs[i] & 15) + m;
      out[i + kHalf] = d * (x[b].qs[i] >> 4) + m;
    }
  }
}

// y[i] = d * (q[i] - 16)
void dequantize_row_q5_0(const BlockQ5_0* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kValues; ++b) {
    const float d = fp16_to_fp32(x[b].d);
    int q[kValues];
    unpack_5bit(x[b].qs, x[b].qh, q);
    for (int i = 0; i < kValues; ++i) y[b * kValues + i] = d * (q[i] - 16);
  }
}

// y[i] = d * q[i] + m
void dequantize_row_q5_1(const BlockQ5_1* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kValues; ++b) {
    const float d = fp16_to_fp32(x[b].d);
    const float m = fp16_to_fp32(x[b].m);
    int q[kValues];
    unpack_5bit(x[b].qs, x[b].qh, q);
    for (int i = 0; i < kValues; ++i) y[b * kValues + i] = d * q[i] + m;
  }
}

}  // namespace kvdesk::ref
