// AVX2 / AVX-VNNI GEMM over Q4_Kx8 weights (kernels/weight_repack.h) x Q8K activation rows. A
// tile is one group of 8 rows x C activation rows, one output row per 32-bit lane. Per 32-value
// sub-block and activation row: one ByteSum of 8 chunks (AVX2: 8 maddubs summed in s16, 16
// products of at most 15 x 127: 30480 < 2^15, then one madd with the row's sub-block scale in
// both s16 lanes of its pair, so the scale costs no extra multiply; AVX-VNNI: 8 vpdpbusd and one
// vpmulld); the int32 sums of a super-block (at most 8 x 63 x 60960 < 2^31) meet fp16(d) and the
// mins once. The super-block's scales are unpacked for all 8 rows with a few vector shifts
// (kernels/cpu/k_x8_scales_avx2.h). Built for each 256-bit tier (kernels/cpu/byte_dot_avx2.h),
// reached only through the ISA tables.
#include "kernels/cpu/byte_dot_avx2.h"
#include "kernels/cpu/k_x8_scales_avx2.h"

namespace kvdesk {
namespace {

// kTileActs (4) act rows per tile: 8 weight vectors + 4 int32 accumulators + the s16 sum and a
// broadcast fill the 16 ymm registers; the float accumulators change once per super-block.

// Sub-block s as 8 vectors of 4 values x 8 rows: w[c] holds values 4c .. 4c + 3.
ALWAYS_INLINE void unpack_sub_block(const BlockQ4_Kx8& b, int s, __m256i (&w)[8]) {
  const __m256i nibble = _mm256_set1_epi8(15);
  const uint8_t* chunks = b.qs + 256 * (s / 2);
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) {
    const __m256i raw = load_256(chunks + 32 * c);
    w[c] = _mm256_and_si256(s % 2 == 0 ? raw : _mm256_srli_epi16(raw, 4), nibble);
  }
}

// Per row lane: sc[s] * sum of the sub-block's 32 products with act values a[0..31].
ALWAYS_INLINE __m256i sub_block_dot(const __m256i (&w)[8], const int8_t* a, ByteScale scale) {
  ByteSum isum = byte_sum(w[0], broadcast_4_bytes(a));
#pragma GCC unroll 8
  for (int c = 1; c < 8; ++c) isum = byte_sum_add(isum, w[c], broadcast_4_bytes(a + 4 * c));
  return widen_scaled(isum, scale);
}

// Super-block j of the group against super-block j of every act row, with the rows' scales sc
// and sub-block s's 8 vectors as sub_block(s, w) gives them.
template <int C, class SubBlock>
ALWAYS_INLINE void super_step(const BlockQ4_Kx8& b, const KX8Scales& sc, SubBlock sub_block, const char* acts,
                              size_t a_stride, int64_t j, __m256 (&acc)[C]) {
  const BlockQ8K* a[C];
  act_super_blocks(acts, a_stride, j, a);
  __m256i iacc[C];
#pragma GCC unroll 8
  for (int t = 0; t < C; ++t) iacc[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int s = 0; s < kKSubBlocks; ++s) {
    __m256i w[8];
    sub_block(s, w);
    const ByteScale scale = byte_scale(sc.scale[s]);
#pragma GCC unroll 8
    for (int t = 0; t < C; ++t) iacc[t] = _mm256_add_epi32(iacc[t], sub_block_dot(w, a[t]->qs + 32 * s, scale));
  }
  finish_super_block(b.scales, sc, a, iacc, acc);
}

// A super-block as its act rows use it: its 8 sub-blocks unpacked and the 8 rows' scales.
struct alignas(64) UnpackedQ4_K {
  __m256i w[kKSubBlocks][8];
  KX8Scales sc;
};

// The kernel as interleaved_matmul runs it.
struct Q4_Kx8Kernel {
  using Block = BlockQ4_Kx8;
  using Unpacked = UnpackedQ4_K;
  static constexpr GgmlType kType = GgmlType::Q4_Kx8;
  static constexpr GgmlType kRowType = GgmlType::Q4_K;
  static constexpr int64_t kBlockValues = kQK_K;
  ALWAYS_INLINE static void unpack(const Block& b, Unpacked& u) {
    u.sc = unpack_scales(b.scales);
#pragma GCC unroll 8
    for (int s = 0; s < kKSubBlocks; ++s) unpack_sub_block(b, s, u.w[s]);
  }
  // d and dmin are still read from b.
  template <int C>
  ALWAYS_INLINE static void step_unpacked(const Unpacked& u, const Block& b, const char* acts, size_t a_stride, int64_t j,
                                          __m256 (&acc)[C]) {
    const auto kept = [&](int s, __m256i (&w)[8]) {
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c) w[c] = u.w[s][c];
    };
    super_step<C>(b, u.sc, kept, acts, a_stride, j, acc);
  }
  template <int C>
  ALWAYS_INLINE static void step(const Block& b, const char* acts, size_t a_stride, int64_t j, __m256 (&acc)[C]) {
    const auto unpacked = [&](int s, __m256i (&w)[8]) { unpack_sub_block(b, s, w); };
    super_step<C>(b, unpack_scales(b.scales), unpacked, acts, a_stride, j, acc);
  }
};

}  // namespace

void KVDESK_TIER_NAME(matmul_q4_kx8)(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  interleaved_matmul<Q4_Kx8Kernel>(args, row_begin, row_end);
}

}  // namespace kvdesk
