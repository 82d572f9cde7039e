// AVX2 / AVX-VNNI GEMM over IQ4_XSx8 weights (kernels/weight_repack.h) x Q8Act activation rows. A tile is
// one group of 8 rows x C activation rows, one output row per 32-bit lane. Each 32-byte chunk of
// a sub-block becomes two vectors of signed levels, unpacked once for all C act rows, and meets
// the act rows as kernels/cpu/level_indices_x8_avx2.h says. Sub-block s meets act block 8j + s with
// its own scale (the act format of IQ4_XS, so the products are those of ggml's layout), so its
// int32 sums become floats once per sub-block: one conversion and one FMA for 8 rows per act
// row, scaled by fp16(d) * (ls[s] - 32) of the 8 rows times the act scale. The super-block's 64
// six-bit scales are unpacked for all 8 rows with a few vector shifts. Built for each 256-bit tier
// (kernels/cpu/byte_dot_avx2.h), reached only through the ISA tables.
#include "kernels/cpu/level_indices_x8_avx2.h"

namespace kvdesk {
namespace {

constexpr int kSubBlocks = 8;   // 32-value sub-blocks of a super-block
constexpr int kChunks = 4;      // 32-byte chunks of a sub-block: 4 values x 8 rows, low and high nibbles

// Registers: the 1-act-row tile (decode) keeps everything in the 16 ymm registers; the
// kTileActs (4) tile needs more (per chunk the levels and their absolute values, 4 int32
// sub-block sums, 4 float accumulators, the table, the nibble mask, a broadcast), and the
// compiler keeps some of them on the stack.

// A super-block's sub-block scales, unpacked for the 8 rows.
struct XsScales {
  __m256 d;                                     // [8] fp16(d) of the rows
  alignas(32) int8_t ls[kIQ4_XSScaleValues];    // [8 sub-blocks][8 rows] ls - 32
};

// The 64 six-bit values (weight_repack.h) as ls - 32: scale_high sits in both 128-bit lanes,
// the high lane shifted by 2 bits, so its low bit pairs are the high bits of v 0..15 and 16..31,
// and shifted by 4 more those of v 32..47 and 48..63.
ALWAYS_INLINE XsScales unpack_scales(const BlockIQ4_XSx8& b) {
  const __m256i low4 = _mm256_set1_epi8(15);
  const __m256i two = _mm256_set1_epi8(3);
  const __m256i low = load_256(b.scale_low);
  const __m256i high = _mm256_srlv_epi64(
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scale_high))),
      _mm256_setr_epi64x(0, 0, 2, 2));
  const __m256i first = _mm256_or_si256(_mm256_and_si256(low, low4), _mm256_slli_epi16(_mm256_and_si256(high, two), 4));
  const __m256i second = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(low, 4), low4),
                                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi64(high, 4), two), 4));
  XsScales out;
  out.d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.d)));
  const __m256i offset = _mm256_set1_epi8(32);
  _mm256_store_si256(reinterpret_cast<__m256i*>(out.ls), _mm256_sub_epi8(first, offset));
  _mm256_store_si256(reinterpret_cast<__m256i*>(out.ls + 32), _mm256_sub_epi8(second, offset));
  return out;
}

// fp16(d) * (ls[s] - 32) of the 8 rows, one float lane each (exact: an 11-bit by 6-bit product).
ALWAYS_INLINE __m256 row_scales(const XsScales& sc, int s) {
  const __m128i ls = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc.ls + kInterleavedRows * s));
  return _mm256_mul_ps(sc.d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(ls)));
}

// Sub-block s of the group against act block 8j + s of every act row.
template <int C>
ALWAYS_INLINE void sub_block_step(const BlockIQ4_XSx8& b, const XsScales& sc, const char* acts, size_t a_stride,
                                  int64_t j, int s, __m256 (&acc)[C]) {
  levels_block_step<C>(level_table(kIq4nlValues), b.qs + 32 * kChunks * s, [&] { return row_scales(sc, s); }, acts,
                       a_stride, kSubBlocks * j + s, acc);
}

// Super-block j of the group against super-block j of every act row.
template <int C>
ALWAYS_INLINE void super_step(const BlockIQ4_XSx8& b, const char* acts, size_t a_stride, int64_t j, __m256 (&acc)[C]) {
  const XsScales sc = unpack_scales(b);
#pragma GCC unroll 8
  for (int s = 0; s < kSubBlocks; ++s) sub_block_step<C>(b, sc, acts, a_stride, j, s, acc);
}

// The kernel as interleaved_matmul runs it.
struct IQ4_XSx8Kernel {
  using Block = BlockIQ4_XSx8;
  static constexpr GgmlType kType = GgmlType::IQ4_XSx8;
  static constexpr GgmlType kRowType = GgmlType::IQ4_XS;
  static constexpr int64_t kBlockValues = kQK_K;
  template <int C>
  ALWAYS_INLINE static void step(const Block& b, const char* acts, size_t a_stride, int64_t j, __m256 (&acc)[C]) {
    super_step<C>(b, acts, a_stride, j, acc);
  }
};

}  // namespace

void KVDESK_TIER_NAME(matmul_iq4_xsx8)(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  interleaved_matmul<IQ4_XSx8Kernel>(args, row_begin, row_end);
}

}  // namespace kvdesk
