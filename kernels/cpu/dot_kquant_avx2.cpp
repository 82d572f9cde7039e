// AVX2 + FMA + F16C kernels for the K-quants Q4_K, Q5_K and Q6_K against Q8K activation rows:
// Q8K quantization, dots and tiled matmul. A step is one 32-value sub-block s of super-block j
// (Q6_K: two 16-value ones) against act values 32s .. 32s + 31 of act super-block j, summed in
// integers. Per 16-bit lane i and 32-bit lane k of a step:
//     prod[i]  = u8(q[2i]) * s8(a[2i]) + u8(q[2i + 1]) * s8(a[2i + 1])   (maddubs; < 2^14 for q < 64)
//     iacc[k] += prod[2k] * scale[2k] + prod[2k + 1] * scale[2k + 1]      (madd, int16 sub-block scales)
// Once per super-block, with its one act scale a.d:
//     Q6_K:         iacc[k] -= 32 * (bsums[2k] * scales[2k] + bsums[2k + 1] * scales[2k + 1])
//     acc         += float(iacc) * fp16(d) * a.d
//     Q4_K / Q5_K:  acc[s] -= fp16(dmin) * m[s] * a.d * (bsums[2s] + bsums[2s + 1])
// Built with AVX2 flags, reached only through kAvx2KQuantKernels after the CPU check.
#include <cstring>

#include "kernels/check.h"
#include "kernels/cpu/simd_prelude.h"
#include "kernels/cpu/dot_isa.h"
#include "kernels/cpu/kquant_scales.h"
#include "kernels/cpu/tile_driver.h"

namespace kvdesk {
namespace {

// ---- activation quantization ----------------------------------------------------------------

// d = amax / 127 over 256 values, qs[i] = round_half_even(x[i] * (1 / d)), bsums[k] = sum of
// qs[16k .. 16k + 15]: bit-identical to ref.
void quantize_q8k_block(const float* x, BlockQ8K& y) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 amax = _mm256_setzero_ps();
  for (int i = 0; i < kQ8KBlockValues; i += 8) amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
  const float d = hmax(amax) / 127.0f;
  const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
  y.d = d;
  for (int g = 0; g < kQ8KBlockValues / 32; ++g) {
    __m256i q[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * g + 8 * i), id));
    // packs interleave 128-bit lanes: 4-byte groups come out as 0 2 4 6 1 3 5 7.
    const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    const __m256i ordered = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y.qs + 32 * g), ordered);
    y.bsums[2 * g] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q[0], q[1])));
    y.bsums[2 * g + 1] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q[2], q[3])));
  }
}

void prepare_act_row(GgmlType weight_type, const float* x, void* act, int64_t n) {
  KVDESK_ASSERT(act_format_for(weight_type) == ActFormat::Q8K && n % kQ8KBlockValues == 0);
  BlockQ8K* y = static_cast<BlockQ8K*>(act);
  for (int64_t b = 0; b < n / kQ8KBlockValues; ++b) quantize_q8k_block(x + b * kQ8KBlockValues, y[b]);
}

// ---- formats ----------------------------------------------------------------------------------
// F::Block; F::Decoded F::decode(const Block&) once per super-block and row; F::quants(block, s)
// -> [32] u8 of sub-block s; F::scale(decoded, s) -> [16] int16 scale of each prod lane;
// F::ActTerms F::act_terms(const BlockQ8K&) once per super-block and act; F::finish(decoded,
// iacc, terms, acc) the once-per-super-block part above.

struct KAffine {
  __m128i scale_min;  // [16] KScaleMinBytes
  __m256 d;           // [8] fp16(d)
  __m256 mins;        // [8] fp16(dmin) * m[s] in lane s
};

template <class Block>
ALWAYS_INLINE KAffine k_affine(const Block& b) {
  const KScaleMinBytes sm = k_scale_min_bytes(b.scales);
  const __m128i bytes = _mm_set_epi64x(static_cast<int64_t>(sm.high), static_cast<int64_t>(sm.low));
  const __m128i mins = _mm_shuffle_epi8(bytes, _mm_setr_epi8(k_min_byte(0), k_min_byte(1), k_min_byte(2), k_min_byte(3),
                                                             k_min_byte(4), k_min_byte(5), k_min_byte(6), k_min_byte(7),
                                                             -1, -1, -1, -1, -1, -1, -1, -1));
  const __m256 m = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mins));
  return KAffine{bytes, _mm256_set1_ps(_cvtsh_ss(b.d)), _mm256_mul_ps(m, _mm256_set1_ps(_cvtsh_ss(b.dmin)))};
}

// sc[s] in every int16 lane
ALWAYS_INLINE __m256i k_affine_scale(const KAffine& k, int s) {
  return _mm256_cvtepu8_epi16(_mm_shuffle_epi8(k.scale_min, _mm_set1_epi8(static_cast<char>(k_scale_byte(s)))));
}

struct KAffineActTerms {
  __m256 d;         // [8] a.d
  __m256 min_sums;  // [8] a.d * (bsums[2s] + bsums[2s + 1]) in lane s
};

ALWAYS_INLINE KAffineActTerms k_affine_act_terms(const BlockQ8K& a) {
  const __m256 d = _mm256_broadcast_ss(&a.d);
  const __m256i pair_sums = _mm256_madd_epi16(load_256(a.bsums), _mm256_set1_epi16(1));
  return KAffineActTerms{d, _mm256_mul_ps(_mm256_cvtepi32_ps(pair_sums), d)};
}

ALWAYS_INLINE void k_affine_finish(const KAffine& k, __m256i iacc, const KAffineActTerms& a, __m256& acc) {
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc), _mm256_mul_ps(k.d, a.d), acc);
  acc = _mm256_fnmadd_ps(k.mins, a.min_sums, acc);
}

// Sub-block s of the 128 nibble bytes: bytes 32 * (s / 2) .. +31, low or high nibbles
ALWAYS_INLINE __m256i k_nibbles(const uint8_t* qs, int s) {
  const __m256i bytes = load_256(qs + 32 * (s / 2));
  return _mm256_and_si256(s % 2 == 0 ? bytes : _mm256_srli_epi16(bytes, 4), _mm256_set1_epi8(15));
}

struct Q4_KFormat {
  using Block = BlockQ4_K;
  using Decoded = KAffine;
  using ActTerms = KAffineActTerms;
  ALWAYS_INLINE static Decoded decode(const Block& b) { return k_affine(b); }
  ALWAYS_INLINE static __m256i quants(const Block& b, int s) { return k_nibbles(b.qs, s); }
  ALWAYS_INLINE static __m256i scale(const Decoded& d, int s) { return k_affine_scale(d, s); }
  ALWAYS_INLINE static ActTerms act_terms(const BlockQ8K& a) { return k_affine_act_terms(a); }
  ALWAYS_INLINE static void finish(const Decoded& d, __m256i iacc, const ActTerms& a, __m256& acc) {
    k_affine_finish(d, iacc, a, acc);
  }
};

struct Q5_KFormat {
  using Block = BlockQ5_K;
  using Decoded = KAffine;
  using ActTerms = KAffineActTerms;
  ALWAYS_INLINE static Decoded decode(const Block& b) { return k_affine(b); }
  // 5th bit of value 32s + l is bit s of qh[l]
  ALWAYS_INLINE static __m256i quants(const Block& b, int s) {
    const __m256i high = _mm256_and_si256(_mm256_srl_epi16(load_256(b.qh), _mm_cvtsi32_si128(s)), _mm256_set1_epi8(1));
    return _mm256_or_si256(k_nibbles(b.qs, s), _mm256_slli_epi16(high, 4));
  }
  ALWAYS_INLINE static __m256i scale(const Decoded& d, int s) { return k_affine_scale(d, s); }
  ALWAYS_INLINE static ActTerms act_terms(const BlockQ8K& a) { return k_affine_act_terms(a); }
  ALWAYS_INLINE static void finish(const Decoded& d, __m256i iacc, const ActTerms& a, __m256& acc) {
    k_affine_finish(d, iacc, a, acc);
  }
};

struct Q6_KFormat {
  using Block = BlockQ6_K;
  struct Decoded {
    __m128i scales;    // [16] s8 scales
    __m256i offset;    // [16] int16 32 * scales[k]
    __m256 d;          // [8] fp16(d)
  };
  struct ActTerms {
    __m256 d;          // [8] a.d
    __m256i bsums;     // [16] int16
  };
  ALWAYS_INLINE static Decoded decode(const Block& b) {
    const __m128i scales = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    return Decoded{scales, _mm256_slli_epi16(_mm256_cvtepi8_epi16(scales), 5), _mm256_set1_ps(_cvtsh_ss(b.d))};
  }
  // s = 4h + k: low 4 bits from ql[64h + 32 (k & 1) + l] (high nibble for k >= 2), high 2 bits
  // from qh[32h + l] >> 2k.
  ALWAYS_INLINE static __m256i quants(const Block& b, int s) {
    const int h = s / 4;
    const int k = s % 4;
    const __m256i ql = load_256(b.ql + 64 * h + 32 * (k & 1));
    const __m256i low = _mm256_and_si256(k < 2 ? ql : _mm256_srli_epi16(ql, 4), _mm256_set1_epi8(15));
    const __m256i qh = _mm256_srl_epi16(load_256(b.qh + 32 * h), _mm_cvtsi32_si128(2 * k));
    return _mm256_or_si256(low, _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(3)), 4));
  }
  // lanes 0-7 (values 0-15) take scales[2s], lanes 8-15 scales[2s + 1]
  ALWAYS_INLINE static __m256i scale(const Decoded& d, int s) {
    const __m128i pick = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(d.scales, _mm_add_epi8(pick, _mm_set1_epi8(static_cast<char>(2 * s)))));
  }
  ALWAYS_INLINE static ActTerms act_terms(const BlockQ8K& a) {
    return ActTerms{_mm256_broadcast_ss(&a.d), load_256(a.bsums)};
  }
  ALWAYS_INLINE static void finish(const Decoded& d, __m256i iacc, const ActTerms& a, __m256& acc) {
    const __m256i unbiased = _mm256_sub_epi32(iacc, _mm256_madd_epi16(a.bsums, d.offset));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(unbiased), _mm256_mul_ps(d.d, a.d), acc);
  }
};

// ---- micro-kernel -----------------------------------------------------------------------------

// Super-block j of every row of the tile against act super-block j of every act row.
template <class F, int R, int C>
ALWAYS_INLINE void kquant_super(const Tile& t, int64_t j, __m256 (&acc)[R][C]) {
  const typename F::Block* blocks[R];
  typename F::Decoded dec[R];
  decode_rows<F>(t, j, blocks, dec);
  const BlockQ8K* acts[C];
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) acts[c] = &row_at<BlockQ8K>(t.a, t.a_stride, c)[j];
  __m256i iacc[R][C];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) iacc[r][c] = _mm256_setzero_si256();
  }
#pragma GCC unroll 8
  for (int s = 0; s < kQK_K / 32; ++s) {
    __m256i w[R];
    __m256i sc[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      w[r] = F::quants(*blocks[r], s);
      sc[r] = F::scale(dec[r], s);
    }
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const __m256i a = load_256(acts[c]->qs + 32 * s);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        iacc[r][c] = _mm256_add_epi32(iacc[r][c], _mm256_madd_epi16(_mm256_maddubs_epi16(w[r], a), sc[r]));
      }
    }
  }
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) {
    const typename F::ActTerms terms = F::act_terms(*acts[c]);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) F::finish(dec[r], iacc[r][c], terms, acc[r][c]);
  }
}

template <class F>
struct KQuantKernel : UnpackedActs {
  static constexpr int kGemvRows = 4;
  static constexpr int kRows = 2;
  static constexpr int kActs = 2;

  template <int R, int C>
  static void tile(const Tile& t) {
    __m256 acc[R][C];
    zero_tile(acc);
    for (int64_t j = 0; j < t.n / kQK_K; ++j) kquant_super<F, R, C>(t, j, acc);
    store_tile(t, acc);
  }
};

// ---- entry points ------------------------------------------------------------------------------

using KQuantTable = KernelTable<Serves<GgmlType::Q4_K, KQuantKernel<Q4_KFormat>>,
                                Serves<GgmlType::Q5_K, KQuantKernel<Q5_KFormat>>,
                                Serves<GgmlType::Q6_K, KQuantKernel<Q6_KFormat>>>;

}  // namespace

const IsaKernels kAvx2KQuantKernels = {&prepare_act_row, &KQuantTable::vec_dot, &KQuantTable::matmul_rows};

}  // namespace kvdesk
