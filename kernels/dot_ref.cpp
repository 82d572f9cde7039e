// Scalar truth for the dot products: activation preparation (float copy or BlockQ8Act) and
// weight-row x activation-row dots for every computable type, accumulated in double.
#include <cmath>

#include "kernels/check.h"
#include "kernels/dot.h"
#include "kernels/fp16.h"

namespace kvdesk {

ActFormat act_format_for(GgmlType weight_type) {
  switch (weight_type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16: return ActFormat::F32;
    case GgmlType::Q8_0:
    case GgmlType::Q4_0: return ActFormat::Q8Act;
    default: KVDESK_ASSERT(!"act_format_for: type is not computable");
  }
  return ActFormat::F32;
}

size_t act_row_bytes(GgmlType weight_type, int64_t n) {
  if (act_format_for(weight_type) == ActFormat::F32) return static_cast<size_t>(n) * sizeof(float);
  KVDESK_ASSERT(n % kQ8ActBlockValues == 0);
  return static_cast<size_t>(n / kQ8ActBlockValues) * sizeof(BlockQ8Act);
}

namespace ref {
namespace {

// d = amax / 127, qs[i] = round_half_even(x[i] * (1 / d)), sum = sum(qs)
// (x * (1/d) and ties-to-even are what the SIMD paths compute, so they match bit for bit).
void quantize_act_block(const float* x, BlockQ8Act& y) {
  float amax = 0.0f;
  for (int i = 0; i < kQ8ActBlockValues; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y.d = d;
  y.sum = 0;
  for (int i = 0; i < kQ8ActBlockValues; ++i) {
    y.qs[i] = static_cast<int8_t>(std::nearbyint(x[i] * id));
    y.sum += y.qs[i];
  }
}

// sum_i w[i] * a[i], w in float / fp16 / bf16 through `to_float`
template <typename W, typename ToFloat>
float dot_float(const W* w, const float* a, int64_t n, ToFloat to_float) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(to_float(w[i])) * a[i];
  return static_cast<float>(sum);
}

// sum_b fp16(w[b].d) * a[b].d * sum_i w[b].qs[i] * a[b].qs[i]
float dot_q8_0(const BlockQ8_0* w, const BlockQ8Act* a, int64_t n) {
  double sum = 0.0;
  for (int64_t b = 0; b < n / kQ8_0BlockValues; ++b) {
    int32_t isum = 0;
    for (int i = 0; i < kQ8_0BlockValues; ++i) isum += w[b].qs[i] * a[b].qs[i];
    sum += static_cast<double>(fp16_to_fp32(w[b].d) * a[b].d) * isum;
  }
  return static_cast<float>(sum);
}

// sum_b fp16(w[b].d) * a[b].d * (sum_i q[i] * a[b].qs[i] - 8 * a[b].sum),  q[i] in 0..15
float dot_q4_0(const BlockQ4_0* w, const BlockQ8Act* a, int64_t n) {
  constexpr int kHalf = kQ4_0BlockValues / 2;
  double sum = 0.0;
  for (int64_t b = 0; b < n / kQ4_0BlockValues; ++b) {
    int32_t isum = 0;
    for (int i = 0; i < kHalf; ++i) {
      isum += (w[b].qs[i] & 15) * a[b].qs[i] + (w[b].qs[i] >> 4) * a[b].qs[i + kHalf];
    }
    sum += static_cast<double>(fp16_to_fp32(w[b].d) * a[b].d) * (isum - 8 * a[b].sum);
  }
  return static_cast<float>(sum);
}

}  // namespace

void prepare_act_row(GgmlType weight_type, const float* x, void* act, int64_t n) {
  if (act_format_for(weight_type) == ActFormat::F32) {
    float* y = static_cast<float*>(act);
    for (int64_t i = 0; i < n; ++i) y[i] = x[i];
    return;
  }
  KVDESK_ASSERT(n % kQ8ActBlockValues == 0);
  BlockQ8Act* y = static_cast<BlockQ8Act*>(act);
  for (int64_t b = 0; b < n / kQ8ActBlockValues; ++b) quantize_act_block(x + b * kQ8ActBlockValues, y[b]);
}

float vec_dot(GgmlType weight_type, const void* w_row, const void* act_row, int64_t n) {
  const float* a = static_cast<const float*>(act_row);
  const BlockQ8Act* qa = static_cast<const BlockQ8Act*>(act_row);
  switch (weight_type) {
    case GgmlType::F32:
      return dot_float(static_cast<const float*>(w_row), a, n, [](float v) { return v; });
    case GgmlType::F16:
      return dot_float(static_cast<const uint16_t*>(w_row), a, n, fp16_to_fp32);
    case GgmlType::BF16:
      return dot_float(static_cast<const uint16_t*>(w_row), a, n, bf16_to_fp32);
    case GgmlType::Q8_0:
      KVDESK_ASSERT(n % kQ8_0BlockValues == 0);
      return dot_q8_0(static_cast<const BlockQ8_0*>(w_row), qa, n);
    case GgmlType::Q4_0:
      KVDESK_ASSERT(n % kQ4_0BlockValues == 0);
      return dot_q4_0(static_cast<const BlockQ4_0*>(w_row), qa, n);
    default: KVDESK_ASSERT(!"vec_dot: type is not computable");
  }
  return 0.0f;
}

}  // namespace ref
}  // namespace kvdesk
