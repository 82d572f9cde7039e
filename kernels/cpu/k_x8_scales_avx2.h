// Internal, included only by the AVX2 GEMMs over Q4_Kx8 and Q5_Kx8 (kernels/weight_repack.h),
// whose blocks start with the same KScalesX8: a super-block's 128 six-bit scales and mins
// unpacked for all 8 rows with a few vector shifts, and the once-per-super-block float step that
// meets the integer sums with fp16(d), fp16(dmin), the mins and each act row's scale.
#pragma once
#include "kernels/cpu/interleaved_gemm_avx2.h"
#include "kernels/cpu/six_bits_avx2.h"

namespace kvdesk {
namespace {

constexpr int kKSubBlocks = 8;  // 32-value sub-blocks of a super-block

// A super-block's scales and mins, unpacked for the 8 rows.
struct KX8Scales {
  __m256i scale[kKSubBlocks];      // [8 sub-blocks][16] s16: sc[s] of row r in lanes 2r, 2r + 1
  __m256i mins[kKSubBlocks / 2];   // [4 pairs q][16] s16: m[2q] of row r in lane 2r, m[2q + 1] in 2r + 1
};

ALWAYS_INLINE KX8Scales unpack_scales(const KScalesX8& b) {
  __m256i v[4];
  unpack_six_bits(b.scale_low, b.scale_high, v);
  KX8Scales out;
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    const __m128i sc = q % 2 == 0 ? _mm256_castsi256_si128(v[q / 2]) : _mm256_extracti128_si256(v[q / 2], 1);
    const __m128i m = q % 2 == 0 ? _mm256_castsi256_si128(v[2 + q / 2]) : _mm256_extracti128_si256(v[2 + q / 2], 1);
    out.scale[2 * q] = _mm256_cvtepu8_epi16(row_bytes_twice(sc, 0));
    out.scale[2 * q + 1] = _mm256_cvtepu8_epi16(row_bytes_twice(sc, 1));
    out.mins[q] = _mm256_cvtepu8_epi16(row_bytes_zipped(m));
  }
  return out;
}

// Per row lane: sum_s m[s] * (bsums[2s] + bsums[2s + 1]).
ALWAYS_INLINE __m256i min_dot(const KX8Scales& sc, const BlockQ8K& a) {
  const __m128i pair_sums = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.bsums)),
                                           _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.bsums + 8)));
  const __m256i sums = _mm256_castsi128_si256(pair_sums);
  __m256i dot = _mm256_setzero_si256();
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    const __m256i pair = _mm256_permutevar8x32_epi32(sums, _mm256_set1_epi32(q));
    dot = _mm256_add_epi32(dot, _mm256_madd_epi16(sc.mins[q], pair));
  }
  return dot;
}

// acc[t] += fp16(d) * a[t].d * iacc[t] - fp16(dmin) * a[t].d * min_dot, per row lane: the
// super-block's integer sums iacc[t] (sum_s sc[s] * dot) against act row t become floats once.
template <int C>
ALWAYS_INLINE void finish_super_block(const KScalesX8& b, const KX8Scales& sc, const BlockQ8K* (&a)[C],
                                      const __m256i (&iacc)[C], __m256 (&acc)[C]) {
  const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.d)));
  const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.dmin)));
#pragma GCC unroll 8
  for (int t = 0; t < C; ++t) {
    const __m256 ad = _mm256_broadcast_ss(&a[t]->d);
    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[t]), _mm256_mul_ps(d, ad), acc[t]);
    acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(min_dot(sc, *a[t])), _mm256_mul_ps(dmin, ad), acc[t]);
  }
}

// Super-block j of every act row: a[t] for act row t of the tile.
template <int C>
ALWAYS_INLINE void act_super_blocks(const char* acts, size_t a_stride, int64_t j, const BlockQ8K* (&a)[C]) {
#pragma GCC unroll 8
  for (int t = 0; t < C; ++t) a[t] = reinterpret_cast<const BlockQ8K*>(acts + t * a_stride) + j;
}

}  // namespace
}  // namespace kvdesk
