// Internal, included only by the AVX2 / AVX-VNNI GEMMs over Q2_Kx8 and Q3_Kx8
// (kernels/weight_repack.h), whose super-blocks are 16 sub-blocks of 16 values with a scale each
// and meet Q8Act rows: the walk both take. Act block s of a super-block (32 values, its own scale)
// meets sub-blocks 2s and 2s + 1; per act row, a sub-block's 4 chunks of 4 values x 8 rows sum
// into one ByteSum (on AVX2 an s16 vector, which each kernel bounds below 2^15) that meets the
// sub-block's scales (widen_scaled), and each act block's int32 sums become floats once, in the
// kernel.
#pragma once
#include "kernels/cpu/byte_dot_avx2.h"
#include "kernels/cpu/interleaved_gemm_avx2.h"

namespace kvdesk {
namespace {

constexpr int kSubBlocks = 16;                              // 16-value sub-blocks of a super-block
constexpr int kActBlocks = kQK_K / kQ8ActBlockValues;       // act blocks a super-block meets
constexpr int kSubBlockChunks = 4;                          // chunks of 4 values in a sub-block

// a[t]: act block 8j of act row t, the first that super-block j meets.
template <int C>
ALWAYS_INLINE void super_block_acts(const char* acts, size_t a_stride, int64_t j, const BlockQ8Act* (&a)[C]) {
#pragma GCC unroll 8
  for (int t = 0; t < C; ++t) a[t] = reinterpret_cast<const BlockQ8Act*>(acts + t * a_stride) + kActBlocks * j;
}

// The 4 act bytes that chunk c of sub-block i meets in act row a (a super-block's first act block).
ALWAYS_INLINE __m256i chunk_acts(const BlockQ8Act* a, int i, int c) {
  return broadcast_4_bytes(a[i / 2].qs + 16 * (i % 2) + 4 * c);
}

// dots[t] = sum over sub-blocks i = 2s, 2s + 1 of scales[i] . (sub-block i's products with act
// row t), per row lane; add_chunk(i, c, sums) adds chunk c of sub-block i's products with every
// act row t to sums[t] (byte_sum_add); scales[i] holds each row's scale in both s16 halves of its
// lane (byte_scale).
template <int C, class AddChunk>
ALWAYS_INLINE void act_block_dots(int s, const __m256i* scales, AddChunk add_chunk, __m256i (&dots)[C]) {
#pragma GCC unroll 8
  for (int t = 0; t < C; ++t) dots[t] = _mm256_setzero_si256();
#pragma GCC unroll 2
  for (int i = 2 * s; i < 2 * s + 2; ++i) {
    ByteSum sums[C];
#pragma GCC unroll 8
    for (int t = 0; t < C; ++t) sums[t] = byte_sum_zero();
#pragma GCC unroll 4
    for (int c = 0; c < kSubBlockChunks; ++c) add_chunk(i, c, sums);
    const ByteScale scale = byte_scale(scales[i]);
#pragma GCC unroll 8
    for (int t = 0; t < C; ++t) dots[t] = _mm256_add_epi32(dots[t], widen_scaled(sums[t], scale));
  }
}

}  // namespace
}  // namespace kvdesk
