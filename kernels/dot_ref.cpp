// Scalar truth for the dot products: activation preparation (float copy, BlockQ8Act or BlockQ8K) and
// weight-row x activation-row dots for every computable type, accumulated in double.
#include <cmath>

#include "kernels/check.h"
#include "kernels/dot.h"
#include "kernels/fp16.h"
#include "kernels/quant_unpack.h"

namespace kvdesk {

ActFormat act_format_for(GgmlType weight_type) {
  switch (weight_type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16: return ActFormat::F32;
    // The 32-value weight blocks, and the low-bit super-block types whose sub-blocks are 16
    // (Q2_K, Q3_K: two per act block, told apart per int32 lane) or 32 values (IQ4_XS), meet
    // BlockQ8Act: one act scale per weight scale.
    case GgmlType::Q8_0:
    case GgmlType::Q8_0x8:
    case GgmlType::Q4_0:
    case GgmlType::Q4_0x8:
    case GgmlType::Q4_1:
    case GgmlType::Q4_1x8:
    case GgmlType::Q5_0:
    case GgmlType::Q5_0x8:
    case GgmlType::Q5_1:
    case GgmlType::Q5_1x8:
    case GgmlType::Q2_K:
    case GgmlType::Q2_Kx8:
    case GgmlType::Q3_K:
    case GgmlType::Q3_Kx8:
    case GgmlType::IQ4_NL:
    case GgmlType::IQ4_NLx8:
    case GgmlType::MXFP4:
    case GgmlType::MXFP4x8:
    case GgmlType::IQ4_XS:
    case GgmlType::IQ4_XSx8: return ActFormat::Q8Act;
    // The K-quants meet BlockQ8K: one act scale per 256-value super-block, so the sub-block
    // scales multiply integers and the super-block converts to float once.
    case GgmlType::Q4_K:
    case GgmlType::Q4_Kx8:
    case GgmlType::Q5_K:
    case GgmlType::Q5_Kx8:
    case GgmlType::Q6_K:
    case GgmlType::Q6_Kx8: return ActFormat::Q8K;
    default: KVDESK_ASSERT(!"act_format_for: type is not computable");
  }
  return ActFormat::F32;
}

size_t act_row_bytes(GgmlType weight_type, int64_t n) {
  switch (act_format_for(weight_type)) {
    case ActFormat::F32: return static_cast<size_t>(n) * sizeof(float);
    case ActFormat::Q8K:
      KVDESK_ASSERT(n % kQ8KBlockValues == 0);
      return static_cast<size_t>(n / kQ8KBlockValues) * sizeof(BlockQ8K);
    case ActFormat::Q8Act: break;
  }
  KVDESK_ASSERT(n % kQ8ActBlockValues == 0);
  return static_cast<size_t>(n / kQ8ActBlockValues) * sizeof(BlockQ8Act);
}

namespace ref {
namespace {

// d = amax / 127, qs[i] = round_half_even(x[i] * (1 / d)), sum = sum(qs), low_sum its first 16
// (x * (1/d) and ties-to-even are what the SIMD paths compute, so they match bit for bit).
void quantize_act_block(const float* x, BlockQ8Act& y) {
  float amax = 0.0f;
  for (int i = 0; i < kQ8ActBlockValues; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y.d = d;
  int32_t sums[2] = {0, 0};
  for (int i = 0; i < kQ8ActBlockValues; ++i) {
    y.qs[i] = static_cast<int8_t>(std::nearbyint(x[i] * id));
    sums[i / kQ8ActLowValues] += y.qs[i];
  }
  y.low_sum = static_cast<int16_t>(sums[0]);
  y.sum = static_cast<int16_t>(sums[0] + sums[1]);
}

// d = amax / 127 over 256 values, qs[i] = round_half_even(x[i] * (1 / d)), bsums[k] = sum of
// qs[16k .. 16k + 15], as quantize_act_block.
void quantize_q8k_block(const float* x, BlockQ8K& y) {
  float amax = 0.0f;
  for (int i = 0; i < kQ8KBlockValues; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y.d = d;
  for (int k = 0; k < kQ8KBlockValues / kQ8KSumValues; ++k) {
    int sum = 0;
    for (int i = kQ8KSumValues * k; i < kQ8KSumValues * (k + 1); ++i) {
      y.qs[i] = static_cast<int8_t>(std::nearbyint(x[i] * id));
      sum += y.qs[i];
    }
    y.bsums[k] = static_cast<int16_t>(sum);
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

// sum_i q[i] * qs[i] over values [first, first + count)
int32_t int_dot(const int* q, const int8_t* qs, int first, int count) {
  int32_t isum = 0;
  for (int i = first; i < first + count; ++i) isum += q[i] * qs[i];
  return isum;
}

// Affine 32-value blocks (Q4_1, Q5_1): sum_b fp16(d) * a.d * sum_i q[i] * a.qs[i] + fp16(m) * a.d * a.sum
template <class Block, class Unpack>
float dot_affine32(const Block* w, const BlockQ8Act* a, int64_t n, Unpack unpack) {
  double sum = 0.0;
  for (int64_t b = 0; b < n / 32; ++b) {
    int q[32];
    unpack(w[b], q);
    sum += static_cast<double>(fp16_to_fp32(w[b].d) * a[b].d) * int_dot(q, a[b].qs, 0, 32) +
           static_cast<double>(fp16_to_fp32(w[b].m)) * (a[b].d * static_cast<float>(a[b].sum));
  }
  return static_cast<float>(sum);
}

void unpack_q4_1(const BlockQ4_1& b, int* q) {
  for (int i = 0; i < 16; ++i) q[i] = b.qs[i] & 15, q[i + 16] = b.qs[i] >> 4;
}

// sum_b fp16(d) * a.d * (sum_i q[i] * a.qs[i] - 16 * a.sum),  q[i] in 0..31
float dot_q5_0(const BlockQ5_0* w, const BlockQ8Act* a, int64_t n) {
  double sum = 0.0;
  for (int64_t b = 0; b < n / 32; ++b) {
    int q[32];
    unpack_5bit(w[b].qs, w[b].qh, q);
    sum += static_cast<double>(fp16_to_fp32(w[b].d) * a[b].d) * (int_dot(q, a[b].qs, 0, 32) - 16 * a[b].sum);
  }
  return static_cast<float>(sum);
}

// Q4_K / Q5_K against one Q8K super-block each, summed in integers and converted once:
//   fp16(d) * a.d * sum_s sc[s] * sum_l q * a.qs  -  fp16(dmin) * a.d * sum_s m[s] * (bsums[2s] + bsums[2s + 1])
template <class Block, class Unpack>
float dot_k_affine(const Block* w, const BlockQ8K* a, int64_t n, Unpack unpack) {
  double sum = 0.0;
  for (int64_t j = 0; j < n / kQK_K; ++j) {
    int q[kQK_K];
    unpack(w[j], q);
    int32_t scaled = 0;
    int32_t mins = 0;
    for (int s = 0; s < 8; ++s) {
      const KScaleMin sm = k_scale_min(w[j].scales, s);
      scaled += sm.scale * int_dot(q, a[j].qs, 32 * s, 32);
      mins += sm.min * (a[j].bsums[2 * s] + a[j].bsums[2 * s + 1]);
    }
    sum += static_cast<double>(fp16_to_fp32(w[j].d) * a[j].d) * scaled -
           static_cast<double>(fp16_to_fp32(w[j].dmin) * a[j].d) * mins;
  }
  return static_cast<float>(sum);
}

// Q6_K against one Q8K super-block each: fp16(d) * a.d * sum_k scales[k] * sum_{16 values} (q - 32) * a.qs
float dot_q6_k(const BlockQ6_K* w, const BlockQ8K* a, int64_t n) {
  double sum = 0.0;
  for (int64_t j = 0; j < n / kQK_K; ++j) {
    int q[kQK_K];
    unpack_q6_k(w[j], q);
    for (int& v : q) v -= 32;
    int32_t scaled = 0;
    for (int k = 0; k < kQK_K / 16; ++k) scaled += w[j].scales[k] * int_dot(q, a[j].qs, 16 * k, 16);
    sum += static_cast<double>(fp16_to_fp32(w[j].d) * a[j].d) * scaled;
  }
  return static_cast<float>(sum);
}

// sum_i a.qs[i] over values [first, first + count) of one act block
int32_t act_sum(const BlockQ8Act& a, int first, int count) {
  int32_t sum = 0;
  for (int i = first; i < first + count; ++i) sum += a.qs[i];
  return sum;
}

// Q2_K: act block 8j + s meets 16-value sub-blocks i = 2s + h (h = 0, 1) of super-block j:
//   fp16(d) * (scales[i] & 15) * a.d * sum_l q * a.qs[16h + l]
//     - fp16(dmin) * (scales[i] >> 4) * a.d * sum_l a.qs[16h + l]
float dot_q2_k(const BlockQ2_K* w, const BlockQ8Act* a, int64_t n) {
  double sum = 0.0;
  for (int64_t j = 0; j < n / kQK_K; ++j) {
    int q[kQK_K];
    unpack_q2_k(w[j], q);
    const float d = fp16_to_fp32(w[j].d);
    const float dmin = fp16_to_fp32(w[j].dmin);
    for (int s = 0; s < 8; ++s) {
      const BlockQ8Act& as = a[8 * j + s];
      for (int h = 0; h < 2; ++h) {
        const uint8_t sm = w[j].scales[2 * s + h];
        sum += static_cast<double>(d * (sm & 15) * as.d) * int_dot(q + 32 * s, as.qs, 16 * h, 16) -
               static_cast<double>(dmin * (sm >> 4) * as.d) * act_sum(as, 16 * h, 16);
      }
    }
  }
  return static_cast<float>(sum);
}

// Q3_K: act block 8j + s meets 16-value sub-blocks i = 2s + h of super-block j:
//   fp16(d) * (sc[i] - 32) * a.d * sum_l q * a.qs[16h + l],  q in -4..3
float dot_q3_k(const BlockQ3_K* w, const BlockQ8Act* a, int64_t n) {
  double sum = 0.0;
  for (int64_t j = 0; j < n / kQK_K; ++j) {
    int q[kQK_K];
    unpack_q3_k(w[j], q);
    const float d = fp16_to_fp32(w[j].d);
    for (int s = 0; s < 8; ++s) {
      const BlockQ8Act& as = a[8 * j + s];
      for (int h = 0; h < 2; ++h) {
        const int sc = q3_k_scale(w[j].scales, 2 * s + h) - 32;
        sum += static_cast<double>(d * sc * as.d) * int_dot(q + 32 * s, as.qs, 16 * h, 16);
      }
    }
  }
  return static_cast<float>(sum);
}

// IQ4_NL: sum_b fp16(d) * a.d * sum_i level[i] * a.qs[i]
float dot_iq4_nl(const BlockIQ4_NL* w, const BlockQ8Act* a, int64_t n) {
  double sum = 0.0;
  for (int64_t b = 0; b < n / kIq4nlBlockValues; ++b) {
    int q[32];
    unpack_iq4(w[b].qs, q);
    sum += static_cast<double>(fp16_to_fp32(w[b].d) * a[b].d) * int_dot(q, a[b].qs, 0, 32);
  }
  return static_cast<float>(sum);
}

// MXFP4: sum_b 2^(e - 128) * a.d * sum_i doubled E2M1 level[i] * a.qs[i]
float dot_mxfp4(const BlockMXFP4* w, const BlockQ8Act* a, int64_t n) {
  double sum = 0.0;
  for (int64_t b = 0; b < n / kMxfp4BlockValues; ++b) {
    int q[32];
    unpack_levels(kMxfp4Values, w[b].qs, q);
    sum += static_cast<double>(mxfp4_scale(w[b].e) * a[b].d) * int_dot(q, a[b].qs, 0, 32);
  }
  return static_cast<float>(sum);
}

// IQ4_XS: act block 8j + s meets sub-block s of super-block j:
//   fp16(d) * (ls[s] - 32) * a.d * sum_l level * a.qs[l]
float dot_iq4_xs(const BlockIQ4_XS* w, const BlockQ8Act* a, int64_t n) {
  double sum = 0.0;
  for (int64_t j = 0; j < n / kQK_K; ++j) {
    const float d = fp16_to_fp32(w[j].d);
    for (int s = 0; s < 8; ++s) {
      int q[32];
      unpack_iq4(w[j].qs + 16 * s, q);
      const BlockQ8Act& as = a[8 * j + s];
      sum += static_cast<double>(d * (iq4_xs_scale(w[j], s) - 32) * as.d) * int_dot(q, as.qs, 0, 32);
    }
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
  if (act_format_for(weight_type) == ActFormat::Q8K) {
    KVDESK_ASSERT(n % kQ8KBlockValues == 0);
    BlockQ8K* y = static_cast<BlockQ8K*>(act);
    for (int64_t b = 0; b < n / kQ8KBlockValues; ++b) quantize_q8k_block(x + b * kQ8KBlockValues, y[b]);
    return;
  }
  KVDESK_ASSERT(n % kQ8ActBlockValues == 0);
  BlockQ8Act* y = static_cast<BlockQ8Act*>(act);
  for (int64_t b = 0; b < n / kQ8ActBlockValues; ++b) quantize_act_block(x + b * kQ8ActBlockValues, y[b]);
}

float vec_dot(GgmlType weight_type, const void* w_row, const void* act_row, int64_t n) {
  const float* a = static_cast<const float*>(act_row);
  const BlockQ8Act* qa = static_cast<const BlockQ8Act*>(act_row);
  const BlockQ8K* ka = static_cast<const BlockQ8K*>(act_row);
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
    case GgmlType::Q4_1:
      KVDESK_ASSERT(n % 32 == 0);
      return dot_affine32(static_cast<const BlockQ4_1*>(w_row), qa, n, unpack_q4_1);
    case GgmlType::Q5_0:
      KVDESK_ASSERT(n % 32 == 0);
      return dot_q5_0(static_cast<const BlockQ5_0*>(w_row), qa, n);
    case GgmlType::Q5_1:
      KVDESK_ASSERT(n % 32 == 0);
      return dot_affine32(static_cast<const BlockQ5_1*>(w_row), qa, n,
                          [](const BlockQ5_1& b, int* q) { unpack_5bit(b.qs, b.qh, q); });
    case GgmlType::Q4_K:
      KVDESK_ASSERT(n % kQK_K == 0);
      return dot_k_affine(static_cast<const BlockQ4_K*>(w_row), ka, n, unpack_q4_k);
    case GgmlType::Q5_K:
      KVDESK_ASSERT(n % kQK_K == 0);
      return dot_k_affine(static_cast<const BlockQ5_K*>(w_row), ka, n, unpack_q5_k);
    case GgmlType::Q6_K:
      KVDESK_ASSERT(n % kQK_K == 0);
      return dot_q6_k(static_cast<const BlockQ6_K*>(w_row), ka, n);
    case GgmlType::Q2_K:
      KVDESK_ASSERT(n % kQK_K == 0);
      return dot_q2_k(static_cast<const BlockQ2_K*>(w_row), qa, n);
    case GgmlType::Q3_K:
      KVDESK_ASSERT(n % kQK_K == 0);
      return dot_q3_k(static_cast<const BlockQ3_K*>(w_row), qa, n);
    case GgmlType::IQ4_NL:
      KVDESK_ASSERT(n % kIq4nlBlockValues == 0);
      return dot_iq4_nl(static_cast<const BlockIQ4_NL*>(w_row), qa, n);
    case GgmlType::MXFP4:
      KVDESK_ASSERT(n % kMxfp4BlockValues == 0);
      return dot_mxfp4(static_cast<const BlockMXFP4*>(w_row), qa, n);
    case GgmlType::IQ4_XS:
      KVDESK_ASSERT(n % kQK_K == 0);
      return dot_iq4_xs(static_cast<const BlockIQ4_XS*>(w_row), qa, n);
    default: KVDESK_ASSERT(!"vec_dot: type is not computable");
  }
  return 0.0f;
}

}  // namespace ref
}  // namespace kvdesk
