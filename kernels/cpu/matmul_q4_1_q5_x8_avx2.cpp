// AVX2 / AVX-VNNI GEMM over Q4_1x8, Q5_0x8 and Q5_1x8 weights (kernels/weight_repack.h) x Q8Act
// activation rows. A tile is one group of 8 rows x C activation rows, one output row per 32-bit
// lane, as Q4_0x8's: a block unpacks once into 8 vectors of 4 values x 8 rows, q = nibble (| fifth
// bit << 4 for Q5: 0..31, unsigned for the u8 x s8 dot), and per activation row the values' halves
// each take one ByteSum of 4 chunks (on AVX2 an s16 sum of 16 products of at most 31 x 127:
// 31496 < 2^15). Q5_0's -16 offset is taken back as 16 * a.sum, Q4_1's and Q5_1's minimum added
// as m * a.d * a.sum, as ref::vec_dot does. Built for each 256-bit tier
// (kernels/cpu/byte_dot_avx2.h), reached only through the ISA tables.
#include "kernels/cpu/byte_dot_avx2.h"
#include "kernels/cpu/interleaved_gemm_avx2.h"

namespace kvdesk {
namespace {

// Bit c of every byte of v at bit 4 (16-bit shifts: the bit never crosses into the other byte).
ALWAYS_INLINE __m256i bit_to_four(__m256i v, int c) {
  return c <= 4 ? _mm256_slli_epi16(v, 4 - c) : _mm256_srli_epi16(v, c - 4);
}

// The block's 32 values per row as 8 vectors of 4 values x 8 rows: w[c] holds values
// 4c .. 4c + 3 (chunk c % 4's low nibbles for c < 4, its high ones for c >= 4, with fifth bit c
// where the block has fifth bits).
template <class Block>
ALWAYS_INLINE void unpack_block(const Block& b, __m256i (&w)[8]) {
  const __m256i nibble = _mm256_set1_epi8(15);
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m256i raw = load_256(b.low.qs + 32 * c);
    w[c] = _mm256_and_si256(raw, nibble);
    w[4 + c] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), nibble);
  }
  if constexpr (requires { b.qh; }) {
    const __m256i fifth = _mm256_set1_epi8(16);
    const __m256i qh = load_256(b.qh);
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) w[c] = _mm256_or_si256(w[c], _mm256_and_si256(bit_to_four(qh, c), fifth));
  }
}

// acc (rows of the group) += fp16(d) * a.d * (dot - 16 * a.sum) for Q5_0, or fp16(d) * a.d * dot
// + fp16(m) * a.d * a.sum for Q4_1 and Q5_1, per row lane; dw = fp16(d), mw = fp16(m).
template <bool kHasMin>
ALWAYS_INLINE void act_step(const __m256i (&w)[8], __m256 dw, __m256 mw, const BlockQ8Act& a, __m256& acc) {
  ByteSum low = byte_sum(w[0], broadcast_4_bytes(a.qs));
  ByteSum high = byte_sum(w[4], broadcast_4_bytes(a.qs + 16));
#pragma GCC unroll 3
  for (int k = 1; k < 4; ++k) {
    low = byte_sum_add(low, w[k], broadcast_4_bytes(a.qs + 4 * k));
    high = byte_sum_add(high, w[4 + k], broadcast_4_bytes(a.qs + 16 + 4 * k));
  }
  __m256i dot = _mm256_add_epi32(widen(low), widen(high));
  if constexpr (!kHasMin) dot = _mm256_sub_epi32(dot, _mm256_slli_epi32(_mm256_set1_epi32(a.sum), 4));
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(dw, _mm256_set1_ps(a.d)), acc);
  if constexpr (kHasMin) acc = _mm256_fmadd_ps(mw, _mm256_set1_ps(a.d * static_cast<float>(a.sum)), acc);
}

// One block of the group against block j of every act row.
template <class Block, int C>
ALWAYS_INLINE void block_step(const Block& b, const char* acts, size_t a_stride, int64_t j, __m256 (&acc)[C]) {
  constexpr bool kHasMin = requires { b.m; };
  __m256i w[8];
  unpack_block(b, w);
  const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.low.d)));
  __m256 mw = _mm256_setzero_ps();
  if constexpr (kHasMin) mw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.m)));
#pragma GCC unroll 8
  for (int t = 0; t < C; ++t) {
    act_step<kHasMin>(w, dw, mw, reinterpret_cast<const BlockQ8Act*>(acts + t * a_stride)[j], acc[t]);
  }
}

// The kernels as interleaved_matmul runs them.
template <class B, GgmlType kInterleaved, GgmlType kRow>
struct Block32x8Kernel {
  using Block = B;
  static constexpr GgmlType kType = kInterleaved;
  static constexpr GgmlType kRowType = kRow;
  static constexpr int64_t kBlockValues = kQ8ActBlockValues;
  template <int C>
  ALWAYS_INLINE static void step(const Block& b, const char* acts, size_t a_stride, int64_t j, __m256 (&acc)[C]) {
    block_step<Block, C>(b, acts, a_stride, j, acc);
  }
};

}  // namespace

void KVDESK_TIER_NAME(matmul_q4_1x8)(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  interleaved_matmul<Block32x8Kernel<BlockQ4_1x8, GgmlType::Q4_1x8, GgmlType::Q4_1>>(args, row_begin, row_end);
}

void KVDESK_TIER_NAME(matmul_q5_0x8)(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  interleaved_matmul<Block32x8Kernel<BlockQ5_0x8, GgmlType::Q5_0x8, GgmlType::Q5_0>>(args, row_begin, row_end);
}

void KVDESK_TIER_NAME(matmul_q5_1x8)(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  interleaved_matmul<Block32x8Kernel<BlockQ5_1x8, GgmlType::Q5_1x8, GgmlType::Q5_1>>(args, row_begin, row_end);
}

}  // namespace kvdesk
