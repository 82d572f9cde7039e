// Internal, included only by the AVX2 GEMMs over IQ4 level indices in an 8-row interleaved
// layout (IQ4_XSx8, IQ4_NLx8; kernels/weight_repack.h): a 32-byte chunk of indices becomes two
// vectors of signed levels (low and high nibbles) with one byte shuffle each, and a levels
// vector meets 4 act bytes per row lane. maddubs takes u8 x s8, so the levels' absolute values
// meet the activations carrying the levels' signs; |level| <= 127, so a pair sum reaches
// 2 x 127 x 127 = 32258 and two could overflow s16: every vector is widened to s32 by its own
// madd.
#pragma once
#include "kernels/cpu/interleaved_gemm_avx2.h"

namespace kvdesk {
namespace {

// kIq4nlValues in both 128-bit lanes: the shuffle table from indices to levels.
ALWAYS_INLINE __m256i iq4_level_table() {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
}

// The levels of a chunk's low nibbles, and of its high nibbles.
ALWAYS_INLINE __m256i low_levels(__m256i table, __m256i raw) {
  return _mm256_shuffle_epi8(table, _mm256_and_si256(raw, _mm256_set1_epi8(15)));
}
ALWAYS_INLINE __m256i high_levels(__m256i table, __m256i raw) {
  return low_levels(table, _mm256_srli_epi16(raw, 4));
}

// dot[t] += per row lane: the 4 products of one levels vector with act bytes a[t] + offset.
template <int C>
ALWAYS_INLINE void levels_dot(__m256i levels, const BlockQ8Act* (&a)[C], int offset, __m256i (&dot)[C]) {
  const __m256i abs_levels = _mm256_abs_epi8(levels);
  const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 8
  for (int t = 0; t < C; ++t) {
    const __m256i signed_a = _mm256_sign_epi8(broadcast_4_bytes(a[t]->qs + offset), levels);
    dot[t] = _mm256_add_epi32(dot[t], _mm256_madd_epi16(_mm256_maddubs_epi16(abs_levels, signed_a), ones));
    pin_register(dot[t]);
  }
}

}  // namespace
}  // namespace kvdesk
