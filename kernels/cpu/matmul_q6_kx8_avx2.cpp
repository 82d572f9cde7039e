// AVX2 / AVX-VNNI GEMM over Q6_Kx8 weights (kernels/weight_repack.h) x Q8K activation rows. A
// tile is one group of 8 rows x C activation rows, one output row per 32-bit lane. Quants stay
// unsigned (q in 0..63) for the u8 x s8 dot, so on AVX2 only two maddubs may share an s16 sum (4
// products of at most 63 x 127: 32004 < 2^15); each such pair meets its 16-value sub-block's
// scale in one madd (AVX-VNNI: 4 vpdpbusd into one int32 sum, one vpmulld; byte_dot_avx2.h). The
// tile walks 16-value sub-blocks, 4 weight vectors live (walking 32-value quarters, 8 live, spilled
// and ran at 0.7x the ggml-layout kernel). The -32 offset is paid once per super-block and act row: 32 * sum_i scales[i] * bsums[i], madds
// over pairs of sub-blocks. Built for each 256-bit tier, reached only through the ISA tables.
#include <cstring>

#include "kernels/cpu/byte_dot_avx2.h"
#include "kernels/cpu/interleaved_gemm_avx2.h"

namespace kvdesk {
namespace {

// kTileActs (4) act rows per tile: 4 weight vectors + 4 int32 accumulators + two s16 sums, products and
// broadcasts fit the 16 ymm registers; the float accumulators change once per super-block.
constexpr int kSubBlocks = 16;

// The scales of sub-blocks 2q and 2q + 1 of the 8 rows, unpacked where they are used (all 16
// at once would be 24 vectors, past the 16 ymm registers, spilled and reloaded):
//     pair_scale(b, q, 0 or 1): [16] s16, scales[2q + half] of row r in lanes 2r, 2r + 1
//     zipped_scales(b, q):      [16] s16, scales[2q] of row r in lane 2r, scales[2q + 1] in 2r + 1
ALWAYS_INLINE __m128i scale_bytes(const BlockQ6_Kx8& b, int q) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales + 16 * q));
}
ALWAYS_INLINE __m256i pair_scale(const BlockQ6_Kx8& b, int q, int half) {
  return _mm256_cvtepi8_epi16(row_bytes_twice(scale_bytes(b, q), half));
}
ALWAYS_INLINE __m256i zipped_scales(const BlockQ6_Kx8& b, int q) {
  return _mm256_cvtepi8_epi16(row_bytes_zipped(scale_bytes(b, q)));
}

// Sub-block i as 4 vectors of 4 values x 8 rows: w[c] holds values 4c .. 4c + 3 of the
// sub-block, chunks 0..2 the packed vectors' low 6 bits, chunk 3 their top 2 bits gathered.
ALWAYS_INLINE void unpack_sub_block(const BlockQ6_Kx8& b, int i, __m256i (&w)[4]) {
  const uint8_t* codes = b.codes + 96 * i;
  const __m256i packed[3] = {load_256(codes), load_256(codes + 32), load_256(codes + 64)};
  const __m256i six = _mm256_set1_epi8(0x3F);
#pragma GCC unroll 3
  for (int a = 0; a < 3; ++a) w[a] = _mm256_and_si256(packed[a], six);
  // bits 6, 7 of vector a to bits 2a, 2a + 1
  w[3] = _mm256_or_si256(_mm256_or_si256(shifted_bits(packed[0], 6, 0x03), shifted_bits(packed[1], 4, 0x0C)),
                         shifted_bits(packed[2], 2, 0x30));
}

// Per row lane: scales[i] * the sub-block's 16 products with act values a[0..15], in two sums of
// two chunks each: on AVX2 s16 sums, each met by the scale, on AVX-VNNI int32 sums added first.
ALWAYS_INLINE __m256i sub_block_dot(const __m256i (&w)[4], const int8_t* a, __m256i pair_scale) {
  const ByteScale scale = byte_scale(pair_scale);
  const ByteSum first = byte_sum_pair(w[0], broadcast_4_bytes(a), w[1], broadcast_4_bytes(a + 4));
  const ByteSum second = byte_sum_pair(w[2], broadcast_4_bytes(a + 8), w[3], broadcast_4_bytes(a + 12));
  if constexpr (kByteDotVnni) return widen_scaled(_mm256_add_epi32(first, second), scale);
  return _mm256_add_epi32(widen_scaled(first, scale), widen_scaled(second, scale));
}

// Per row lane: 32 * sum_i scales[i] * bsums[i], the -32 offset of every quant; zipped(q) gives
// pair q's zipped_scales.
template <class Zipped>
ALWAYS_INLINE __m256i offset_dot(const BlockQ8K& a, Zipped zipped) {
  __m256i dot = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int q = 0; q < kSubBlocks / 2; ++q) {
    int32_t pair;
    std::memcpy(&pair, a.bsums + 2 * q, sizeof(pair));
    dot = _mm256_add_epi32(dot, _mm256_madd_epi16(zipped(q), _mm256_set1_epi32(pair)));
  }
  return _mm256_slli_epi32(dot, 5);
}

// Super-block j of the group against super-block j of every act row, sub-block i's 4 vectors
// and pair_scale as sub_block(i, w) gives them, pair q's zipped_scales as zipped(q).
template <int C, class SubBlock, class Zipped>
ALWAYS_INLINE void super_step(const BlockQ6_Kx8& b, SubBlock sub_block, Zipped zipped, const char* acts,
                              size_t a_stride, int64_t j, __m256 (&acc)[C]) {
  const BlockQ8K* a[C];
  __m256i iacc[C];
#pragma GCC unroll 8
  for (int t = 0; t < C; ++t) {
    a[t] = reinterpret_cast<const BlockQ8K*>(acts + t * a_stride) + j;
    iacc[t] = _mm256_setzero_si256();
  }
#pragma GCC unroll 16
  for (int i = 0; i < kSubBlocks; ++i) {
    __m256i w[4];
    const __m256i scale = sub_block(i, w);
#pragma GCC unroll 8
    for (int t = 0; t < C; ++t) {
      iacc[t] = _mm256_add_epi32(iacc[t], sub_block_dot(w, a[t]->qs + 16 * i, scale));
      pin_register(iacc[t]);
    }
  }
  const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.d)));
#pragma GCC unroll 8
  for (int t = 0; t < C; ++t) {
    const __m256i unbiased = _mm256_sub_epi32(iacc[t], offset_dot(*a[t], zipped));
    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(unbiased), _mm256_mul_ps(d, _mm256_broadcast_ss(&a[t]->d)), acc[t]);
  }
}

// A super-block as its act rows use it: its 16 sub-blocks unpacked, each one's pair_scale and
// each pair's zipped_scales.
struct alignas(64) UnpackedQ6_K {
  __m256i w[kSubBlocks][4];
  __m256i scale[kSubBlocks];
  __m256i zipped[kSubBlocks / 2];
};

// The kernel as interleaved_matmul runs it.
struct Q6_Kx8Kernel {
  using Block = BlockQ6_Kx8;
  using Unpacked = UnpackedQ6_K;
  static constexpr GgmlType kType = GgmlType::Q6_Kx8;
  static constexpr GgmlType kRowType = GgmlType::Q6_K;
  static constexpr int64_t kBlockValues = kQK_K;
  ALWAYS_INLINE static void unpack(const Block& b, Unpacked& u) {
#pragma GCC unroll 16
    for (int i = 0; i < kSubBlocks; ++i) {
      unpack_sub_block(b, i, u.w[i]);
      u.scale[i] = pair_scale(b, i / 2, i % 2);
    }
#pragma GCC unroll 8
    for (int q = 0; q < kSubBlocks / 2; ++q) u.zipped[q] = zipped_scales(b, q);
  }
  // d is still read from b.
  template <int C>
  ALWAYS_INLINE static void step_unpacked(const Unpacked& u, const Block& b, const char* acts, size_t a_stride, int64_t j,
                                          __m256 (&acc)[C]) {
    const auto kept = [&](int i, __m256i (&w)[4]) {
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) w[c] = u.w[i][c];
      return u.scale[i];
    };
    super_step<C>(b, kept, [&](int q) { return u.zipped[q]; }, acts, a_stride, j, acc);
  }
  template <int C>
  ALWAYS_INLINE static void step(const Block& b, const char* acts, size_t a_stride, int64_t j, __m256 (&acc)[C]) {
    const auto unpacked = [&](int i, __m256i (&w)[4]) {
      unpack_sub_block(b, i, w);
      return pair_scale(b, i / 2, i % 2);
    };
    super_step<C>(b, unpacked, [&](int q) { return zipped_scales(b, q); }, acts, a_stride, j, acc);
  }
};

}  // namespace

void KVDESK_TIER_NAME(matmul_q6_kx8)(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  interleaved_matmul<Q6_Kx8Kernel>(args, row_begin, row_end);
}

}  // namespace kvdesk
