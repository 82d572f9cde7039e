// AVX2 + FMA + F16C kernels: Q8Act quantization, dots and tiled matmul for every computable
// weight type (the K-quants handed on to dot_kquant_avx2.cpp). Integer blocks go one per ymm
// through the u8 x s8 dot of kernels/cpu/byte_dot_avx2.h; float types use FMA.
// Built twice: with AVX2 flags for kAvx2Kernels, and with AVX-VNNI's too (KVDESK_AVXVNNI) for
// kAvxVnniKernels, each reached only after the CPU check.
#include <cstring>

#include "kernels/check.h"
#include "kernels/cpu/byte_dot_avx2.h"
#include "kernels/cpu/dot_isa.h"
#include "kernels/cpu/dot_subblock.h"
#include "kernels/cpu/dot_lowbit_formats.h"
#include "kernels/cpu/tile_driver.h"

namespace kvdesk {
namespace {

// ---- activation quantization ----------------------------------------------------------------

// d = amax / 127, qs[i] = round_half_even(x[i] * (1 / d)), sum = sum(qs): bit-identical to ref.
void quantize_act_block(const float* x, BlockQ8Act& y) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 v[4];
  __m256 amax = _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[i]));
  }
  const float d = hmax(amax) / 127.0f;
  const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
  __m256i q[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], id));
  // packs interleave 128-bit lanes: 4-byte groups come out as 0 2 4 6 1 3 5 7.
  const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
  const __m256i ordered = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(y.qs), ordered);
  y.d = d;
  const int32_t low_sum = hsum_epi32(_mm256_add_epi32(q[0], q[1]));
  y.low_sum = static_cast<int16_t>(low_sum);
  y.sum = static_cast<int16_t>(low_sum + hsum_epi32(_mm256_add_epi32(q[2], q[3])));
}

void prepare_act_row(GgmlType weight_type, const float* x, void* act, int64_t n) {
  switch (act_format_for(weight_type)) {
    case ActFormat::F32: std::memcpy(act, x, static_cast<size_t>(n) * sizeof(float)); return;
    case ActFormat::Q8K: return kAvx2KQuantKernels.prepare_act_row(weight_type, x, act, n);
    case ActFormat::Q8Act: break;
  }
  KVDESK_ASSERT(n % kQ8ActBlockValues == 0);
  BlockQ8Act* y = static_cast<BlockQ8Act*>(act);
  for (int64_t b = 0; b < n / kQ8ActBlockValues; ++b) quantize_act_block(x + b * kQ8ActBlockValues, y[b]);
}

// ---- integer blocks: Q8_0 / Q4_0 weights x Q8Act --------------------------------------------
//
// One block per step. Per 32-bit lane i (4 values):
//     dot[i]  = sum_{4 values} u8(w) * s8(a)     (dot_u8s8)
//     acc[i] += float(dot[i]) * fp16(w.d) * a.d
// Q8_0: u8(w) = |w| and s8(a) = a * sign(w), so pairs stay within s16.
// Q4_0: u8(w) = nibble 0..15, s8(a) = a, and -8 * a.sum is added to lane 0.

struct Q8_0Format {
  using Block = BlockQ8_0;
  struct Weights {
    __m256i abs;    // [32] |w|
    __m256i signs;  // [32] w, whose signs move onto the activations
  };
  ALWAYS_INLINE static Weights weights(const Block& b) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
    return Weights{_mm256_sign_epi8(w, w), w};
  }
  ALWAYS_INLINE static __m256i dot(const Weights& w, const BlockQ8Act& a) {
    const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
    return dot_u8s8(_mm256_setzero_si256(), w.abs, _mm256_sign_epi8(av, w.signs));
  }
};

struct Q4_0Format {
  using Block = BlockQ4_0;
  struct Weights {
    __m256i nibbles;  // [32] values 0..15: low nibbles, then high nibbles
  };
  ALWAYS_INLINE static Weights weights(const Block& b) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1);
    return Weights{_mm256_and_si256(both, _mm256_set1_epi8(15))};
  }
  ALWAYS_INLINE static __m256i dot(const Weights& w, const BlockQ8Act& a) {
    const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
    const __m256i bias = _mm256_setr_epi32(-8 * a.sum, 0, 0, 0, 0, 0, 0, 0);
    return dot_u8s8(bias, w.nibbles, av);
  }
};

template <class F, int R, int C>
ALWAYS_INLINE void quant_step(const Tile& t, int64_t j, __m256 (&acc)[R][C]) {
  using Block = typename F::Block;
  typename F::Weights w[R];
  __m256 dw[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const Block& b = row_at<Block>(t.w, t.w_stride, r)[j];
    w[r] = F::weights(b);
    dw[r] = _mm256_set1_ps(_cvtsh_ss(b.d));
  }
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) {
    const BlockQ8Act& a = row_at<BlockQ8Act>(t.a, t.a_stride, c)[j];
    const __m256 da = _mm256_broadcast_ss(&a.d);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m256 dot = _mm256_cvtepi32_ps(F::dot(w[r], a));
      acc[r][c] = _mm256_fmadd_ps(dot, _mm256_mul_ps(dw[r], da), acc[r][c]);
    }
  }
}

template <class F>
struct QuantKernel : UnpackedActs {
  static constexpr int kGemvRows = 4;
  static constexpr int kRows = 2;
  static constexpr int kActs = 3;

  template <int R, int C>
  static void tile(const Tile& t) {
    const int64_t blocks = t.n / 32;
    __m256 acc[R][C];
    zero_tile(acc);
    for (int64_t j = 0; j < blocks; ++j) quant_step<F, R, C>(t, j, acc);
    store_tile(t, acc);
  }
};

// ---- float weights (F32 / F16 / BF16) x float activations ------------------------------------
//     acc[r][c] += float(w[r][k..k+7]) * a[c][k..k+7];  the last partial vector runs on
// zero-padded copies.

struct F32Format {
  using Elem = float;
  ALWAYS_INLINE static __m256 load(const Elem* p) { return _mm256_loadu_ps(p); }
};
struct F16Format {
  using Elem = uint16_t;
  ALWAYS_INLINE static __m256 load(const Elem* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};
struct Bf16Format {
  using Elem = uint16_t;
  ALWAYS_INLINE static __m256 load(const Elem* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
};

template <class F, int R, int C>
ALWAYS_INLINE void float_step(const Tile& t, int64_t k, __m256 (&acc)[R][C]) {
  __m256 w[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) w[r] = F::load(row_at<typename F::Elem>(t.w, t.w_stride, r) + k);
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) {
    const __m256 a = _mm256_loadu_ps(row_at<float>(t.a, t.a_stride, c) + k);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc[r][c] = _mm256_fmadd_ps(w[r], a, acc[r][c]);
  }
}

// The values [k, n) (fewer than 8) of every row of t, zero-padded to one vector.
template <class F, int R, int C>
ALWAYS_INLINE void float_tail(const Tile& t, int64_t k, __m256 (&acc)[R][C]) {
  using Elem = typename F::Elem;
  const size_t rest = static_cast<size_t>(t.n - k);
  Elem w[R][8] = {};
  float a[C][8] = {};
  for (int r = 0; r < R; ++r) std::memcpy(w[r], row_at<Elem>(t.w, t.w_stride, r) + k, rest * sizeof(Elem));
  for (int c = 0; c < C; ++c) std::memcpy(a[c], row_at<float>(t.a, t.a_stride, c) + k, rest * sizeof(float));
  const Tile padded{reinterpret_cast<const char*>(w), sizeof(w[0]), reinterpret_cast<const char*>(a),
                    sizeof(a[0]), 8, nullptr, 0};
  float_step<F, R, C>(padded, 0, acc);
}

template <class F>
struct FloatKernel : UnpackedActs {
  static constexpr int kGemvRows = 4;
  static constexpr int kRows = 4;
  static constexpr int kActs = 2;

  template <int R, int C>
  static void tile(const Tile& t) {
    __m256 acc[R][C];
    zero_tile(acc);
    int64_t k = 0;
    for (; k + 8 <= t.n; k += 8) float_step<F, R, C>(t, k, acc);
    if (k < t.n) float_tail<F, R, C>(t, k, acc);
    store_tile(t, acc);
  }
};

// ---- sub-block formats (Q4_1, Q5_0, Q5_1, and Q2_K, Q3_K, IQ4_NL, IQ4_XS of
// kernels/cpu/dot_lowbit_formats.h) x Q8Act: kernels/cpu/dot_subblock.h (the K-quants meet Q8K
// rows in kernels/cpu/dot_kquant_avx2.cpp)

// u8 x s8 -> int32 lanes of 4 products (dot_u8s8; on AVX2 the s16 pairs do not saturate for
// u8 up to 128 against |s8| <= 127: quants below 64, IQ4's |level| <= 127).
struct ByteDot {
  ALWAYS_INLINE static __m256i dot(__m256i acc, __m256i u8, __m256i s8) { return dot_u8s8(acc, u8, s8); }
};

template <class F>
using SubBlock = SubBlockKernel<F, ByteDot, 4, 2, 3>;

// ---- entry points ------------------------------------------------------------------------------

// The K-quants go to dot_kquant_avx2.cpp (AVX2's for both tiers); the interleaved GEMMs are this
// tier's (KVDESK_TIER_NAME).
using Avx2Table = KernelTable<
    Serves<GgmlType::F32, FloatKernel<F32Format>>, Serves<GgmlType::F16, FloatKernel<F16Format>>,
    Serves<GgmlType::BF16, FloatKernel<Bf16Format>>, Serves<GgmlType::Q8_0, QuantKernel<Q8_0Format>>,
    Interleaved<GgmlType::Q8_0x8, &KVDESK_TIER_NAME(matmul_q8_0x8)>,
    Serves<GgmlType::Q4_0, QuantKernel<Q4_0Format>>, Interleaved<GgmlType::Q4_0x8, &KVDESK_TIER_NAME(matmul_q4_0x8)>,
    Serves<GgmlType::Q4_1, SubBlock<Q4_1Format>>,
    Interleaved<GgmlType::Q4_1x8, &KVDESK_TIER_NAME(matmul_q4_1x8)>,
    Serves<GgmlType::Q5_0, SubBlock<Q5_0Format>>, Interleaved<GgmlType::Q5_0x8, &KVDESK_TIER_NAME(matmul_q5_0x8)>,
    Serves<GgmlType::Q5_1, SubBlock<Q5_1Format>>, Interleaved<GgmlType::Q5_1x8, &KVDESK_TIER_NAME(matmul_q5_1x8)>,
    HandsOff<GgmlType::Q4_K, kAvx2KQuantKernels>, Interleaved<GgmlType::Q4_Kx8, &KVDESK_TIER_NAME(matmul_q4_kx8)>,
    HandsOff<GgmlType::Q5_K, kAvx2KQuantKernels>, Interleaved<GgmlType::Q5_Kx8, &KVDESK_TIER_NAME(matmul_q5_kx8)>,
    HandsOff<GgmlType::Q6_K, kAvx2KQuantKernels>,
    Interleaved<GgmlType::Q6_Kx8, &KVDESK_TIER_NAME(matmul_q6_kx8)>, Serves<GgmlType::Q2_K, SubBlock<Q2_KFormat>>,
    Interleaved<GgmlType::Q2_Kx8, &KVDESK_TIER_NAME(matmul_q2_kx8)>,
    Serves<GgmlType::Q3_K, SubBlock<Q3_KFormat>>, Interleaved<GgmlType::Q3_Kx8, &KVDESK_TIER_NAME(matmul_q3_kx8)>,
    Serves<GgmlType::IQ4_NL, SubBlock<IQ4_NLFormat>>,
    Interleaved<GgmlType::IQ4_NLx8, &KVDESK_TIER_NAME(matmul_iq4_nlx8)>,
    Serves<GgmlType::IQ4_XS, SubBlock<IQ4_XSFormat>>, Interleaved<GgmlType::IQ4_XSx8, &KVDESK_TIER_NAME(matmul_iq4_xsx8)>,
    Serves<GgmlType::MXFP4, SubBlock<MXFP4Format>>, Interleaved<GgmlType::MXFP4x8, &KVDESK_TIER_NAME(matmul_mxfp4x8)>>;

}  // namespace

#if defined(KVDESK_AVXVNNI)
const IsaKernels kAvxVnniKernels = {&prepare_act_row, &Avx2Table::vec_dot, &Avx2Table::matmul_rows};
#else
const IsaKernels kAvx2Kernels = {&prepare_act_row, &Avx2Table::vec_dot, &Avx2Table::matmul_rows};
#endif

}  // namespace kvdesk
