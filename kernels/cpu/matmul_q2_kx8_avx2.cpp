// AVX2 / AVX-VNNI GEMM over Q2_Kx8 weights (kernels/weight_repack.h) x Q8Act activation rows. A
// tile is one group of 8 rows x C activation rows, one output row per 32-bit lane. Quants stay
// unsigned (0..3) for the u8 x s8 dot; a 16-value sub-block's 4 chunks share one ByteSum (on
// AVX2 an s16 sum of 8 products of at most 3 x 127) that meets the sub-block's 4-bit scale
// (kernels/cpu/sub_block16_x8_avx2.h). The mins, one per 16 values, meet
// the act block's two half sums (BlockQ8Act low_sum and sum - low_sum) in one madd per act
// block. Each act block has its own scale, so the integer sums become floats once per 32 values,
// as the ggml-layout kernel and ref::vec_dot do. Built for each 256-bit tier
// (kernels/cpu/byte_dot_avx2.h), reached only through the ISA tables.
#include "kernels/cpu/sub_block16_x8_avx2.h"

namespace kvdesk {
namespace {

// A super-block's scales and mins for the 8 rows.
struct Q2_KScales {
  __m256i scale[kSubBlocks];   // [16 sub-blocks][16] s16: scale of sub-block i, row r in lanes 2r, 2r + 1
  __m256i mins[kActBlocks];    // [8 act blocks s][16] s16: min of sub-block 2s, row r in lane 2r; 2s + 1 in 2r + 1
};

ALWAYS_INLINE Q2_KScales unpack_scales(const BlockQ2_Kx8& b) {
  const __m128i nibble = _mm_set1_epi8(15);
  Q2_KScales out;
#pragma GCC unroll 8
  for (int s = 0; s < kActBlocks; ++s) {
    const __m128i two = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales + 16 * s));  // sub-blocks 2s, 2s + 1
    const __m128i scales = _mm_and_si128(two, nibble);
    out.scale[2 * s] = _mm256_cvtepu8_epi16(row_bytes_twice(scales, 0));
    out.scale[2 * s + 1] = _mm256_cvtepu8_epi16(row_bytes_twice(scales, 1));
    out.mins[s] = _mm256_cvtepu8_epi16(row_bytes_zipped(_mm_and_si128(_mm_srli_epi16(two, 4), nibble)));
  }
  return out;
}

// Chunk c of sub-block i (the 16 values at 16i = 128h + 32k + 16 half): values 4c .. 4c + 3 of
// the sub-block for rows 0..7, as u8 q in 0..3.
ALWAYS_INLINE __m256i sub_block_chunk(const BlockQ2_Kx8& b, int i, int c) {
  const int h = i / 8;
  const int k = i % 8 / 2;
  const int chunk = 4 * (i % 2) + c;
  return _mm256_and_si256(_mm256_srli_epi16(load_256(b.qs + 32 * (8 * h + chunk)), 2 * k), _mm256_set1_epi8(3));
}

// Per row lane: min[2s] * (sum of the act block's first 16 values) + min[2s + 1] * (of its last 16).
ALWAYS_INLINE __m256i min_dot(const Q2_KScales& sc, int s, const BlockQ8Act& a) {
  const int32_t halves = int32_t(uint16_t(a.low_sum)) | int32_t(uint32_t(uint16_t(a.sum - a.low_sum)) << 16);
  return _mm256_madd_epi16(sc.mins[s], _mm256_set1_epi32(halves));
}

// Super-block j of the group against act blocks 8j .. 8j + 7 of every act row.
template <int C>
ALWAYS_INLINE void super_step(const BlockQ2_Kx8& b, const char* acts, size_t a_stride, int64_t j, __m256 (&acc)[C]) {
  const Q2_KScales sc = unpack_scales(b);
  const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.d)));
  const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.dmin)));
  const BlockQ8Act* a[C];
  super_block_acts(acts, a_stride, j, a);
  const auto add_chunk = [&](int i, int c, ByteSum (&sums)[C]) __attribute__((always_inline)) {
    const __m256i q = sub_block_chunk(b, i, c);
#pragma GCC unroll 8
    for (int t = 0; t < C; ++t) sums[t] = byte_sum_add(sums[t], q, chunk_acts(a[t], i, c));
  };
#pragma GCC unroll 8
  for (int s = 0; s < kActBlocks; ++s) {
    __m256i dots[C];
    act_block_dots(s, sc.scale, add_chunk, dots);
#pragma GCC unroll 8
    for (int t = 0; t < C; ++t) {
      const __m256 ad = _mm256_broadcast_ss(&a[t][s].d);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots[t]), _mm256_mul_ps(d, ad), acc[t]);
      acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(min_dot(sc, s, a[t][s])), _mm256_mul_ps(dmin, ad), acc[t]);
    }
  }
}

// The kernel as interleaved_matmul runs it.
struct Q2_Kx8Kernel {
  using Block = BlockQ2_Kx8;
  static constexpr GgmlType kType = GgmlType::Q2_Kx8;
  static constexpr GgmlType kRowType = GgmlType::Q2_K;
  static constexpr int64_t kBlockValues = kQK_K;
  template <int C>
  ALWAYS_INLINE static void step(const Block& b, const char* acts, size_t a_stride, int64_t j, __m256 (&acc)[C]) {
    super_step<C>(b, acts, a_stride, j, acc);
  }
};

}  // namespace

void KVDESK_TIER_NAME(matmul_q2_kx8)(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  interleaved_matmul<Q2_Kx8Kernel>(args, row_begin, row_end);
}

}  // namespace kvdesk
