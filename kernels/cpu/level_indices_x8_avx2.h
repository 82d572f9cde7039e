// Internal, included only by the AVX2 / AVX-VNNI GEMMs over 4-bit level indices in an 8-row
// interleaved layout (IQ4_XSx8, IQ4_NLx8 into kIq4nlValues, MXFP4x8 into kMxfp4Values; kernels/
// weight_repack.h): a 32-byte chunk of indices becomes two vectors of signed levels (low and high
// nibbles) with one byte shuffle each, and a levels vector meets 4 act bytes per row lane. The dot
// takes u8 x s8, so the levels' absolute values meet the activations carrying the levels' signs;
// |level| <= 127, so on AVX2 a pair sum reaches 2 x 127 x 127 = 32258 and two could overflow s16:
// every vector is widened to s32 at once (dot_u8s8; one vpdpbusd on AVX-VNNI).
#pragma once
#include "kernels/cpu/byte_dot_avx2.h"
#include "kernels/cpu/interleaved_gemm_avx2.h"

namespace kvdesk {
namespace {

// A 16-level table in both 128-bit lanes: the shuffle from indices to levels.
ALWAYS_INLINE __m256i level_table(const int8_t (&levels)[16]) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(levels)));
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
#pragma GCC unroll 8
  for (int t = 0; t < C; ++t) {
    const __m256i signed_a = _mm256_sign_epi8(broadcast_4_bytes(a[t]->qs + offset), levels);
    dot[t] = dot_u8s8(dot[t], abs_levels, signed_a);
    pin_register(dot[t]);
  }
}

// 32 values of a group whose level indices are qs ([4 chunks][8 rows][4 bytes], as Q4_0x8's)
// against act block `block` of every act row: acc[t] += float(integer dot) * row_scales() *
// a[t].d, one conversion and one FMA for 8 rows per act row. row_scales() ([8] the rows'
// scales) is called after the dots, so its registers are not held across them.
template <int C, class RowScales>
ALWAYS_INLINE void levels_block_step(__m256i table, const uint8_t* qs, RowScales row_scales, const char* acts,
                                     size_t a_stride, int64_t block, __m256 (&acc)[C]) {
  constexpr int kChunks = 4;  // 32-byte chunks of a block: 4 values x 8 rows, low and high nibbles
  const BlockQ8Act* a[C];
  __m256i dot[C];
#pragma GCC unroll 8
  for (int t = 0; t < C; ++t) {
    a[t] = reinterpret_cast<const BlockQ8Act*>(acts + t * a_stride) + block;
    dot[t] = _mm256_setzero_si256();
  }
#pragma GCC unroll 4
  for (int c = 0; c < kChunks; ++c) {
    const __m256i raw = load_256(qs + 32 * c);
    levels_dot(low_levels(table, raw), a, 4 * c, dot);
    levels_dot(high_levels(table, raw), a, 16 + 4 * c, dot);
  }
  const __m256 scales = row_scales();
#pragma GCC unroll 8
  for (int t = 0; t < C; ++t) {
    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[t]), _mm256_mul_ps(scales, _mm256_set1_ps(a[t]->d)), acc[t]);
  }
}

}  // namespace
}  // namespace kvdesk
