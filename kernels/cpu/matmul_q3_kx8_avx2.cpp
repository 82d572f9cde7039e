// AVX2 / AVX-VNNI GEMM over Q3_Kx8 weights (kernels/weight_repack.h) x Q8Act activation rows. A
// tile is one group of 8 rows x C activation rows, one output row per 32-bit lane. The quants are
// signed (-4..3), so each chunk of 4 values x 8 rows is multiplied as |q| (u8) by the activations
// with q's signs (vpsignb), which also leaves no offset to take back; a 16-value sub-block's 4
// chunks share one ByteSum (on AVX2 an s16 sum of 8 products of at most 4 x 127) that meets the
// sub-block's scale (kernels/cpu/sub_block16_x8_avx2.h).
// Each act block (two sub-blocks) has its own scale, so the integer sums become floats once per
// 32 values, as the ggml-layout kernel and ref::vec_dot do. Built for each 256-bit tier
// (kernels/cpu/byte_dot_avx2.h), reached only through the ISA tables.
#include "kernels/cpu/six_bits_avx2.h"
#include "kernels/cpu/sub_block16_x8_avx2.h"

namespace kvdesk {
namespace {

// A super-block's scales for the 8 rows: sc[i] - 32 of row r in lanes 2r, 2r + 1 of scale[i].
struct Q3_KScales {
  __m256i scale[kSubBlocks];   // [16 sub-blocks][16] s16
};

ALWAYS_INLINE Q3_KScales unpack_scales(const BlockQ3_Kx8& b) {
  __m256i v[4];   // byte 8 (i % 4) + r of v[i / 4]: sc[i] of row r
  unpack_six_bits(b.scale_low, b.scale_high, v);
  const __m256i offset = _mm256_set1_epi16(32);
  Q3_KScales out;
#pragma GCC unroll 16
  for (int i = 0; i < kSubBlocks; ++i) {
    const __m128i half = i % 4 < 2 ? _mm256_castsi256_si128(v[i / 4]) : _mm256_extracti128_si256(v[i / 4], 1);
    out.scale[i] = _mm256_sub_epi16(_mm256_cvtepu8_epi16(row_bytes_twice(half, i % 2)), offset);
  }
  return out;
}

// Chunk c of sub-block i (the 16 values at 16i = 128h + 32k + 16 half): values 4c .. 4c + 3 of
// the sub-block for rows 0..7, as s8 q in -4..3.
ALWAYS_INLINE __m256i sub_block_chunk(const BlockQ3_Kx8& b, int i, int c) {
  const int h = i / 8;
  const int k = i % 8 / 2;
  const int chunk = 4 * (i % 2) + c;
  const __m256i pairs = _mm256_and_si256(_mm256_srli_epi16(load_256(b.qs + 32 * (8 * h + chunk)), 2 * k),
                                         _mm256_set1_epi8(3));
  // bit 4h + k of hmask to bit 2
  const __m256i bits = load_256(b.hmask + 32 * chunk);
  const int bit = 4 * h + k;
  const __m256i moved = bit >= 2 ? _mm256_srli_epi16(bits, bit - 2) : _mm256_slli_epi16(bits, 2 - bit);
  const __m256i third = _mm256_and_si256(moved, _mm256_set1_epi8(4));
  return _mm256_sub_epi8(_mm256_or_si256(pairs, third), _mm256_set1_epi8(4));
}

// Super-block j of the group against act blocks 8j .. 8j + 7 of every act row.
template <int C>
ALWAYS_INLINE void super_step(const BlockQ3_Kx8& b, const char* acts, size_t a_stride, int64_t j, __m256 (&acc)[C]) {
  const Q3_KScales sc = unpack_scales(b);
  const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.d)));
  const BlockQ8Act* a[C];
  super_block_acts(acts, a_stride, j, a);
  const auto add_chunk = [&](int i, int c, ByteSum (&sums)[C]) __attribute__((always_inline)) {
    const __m256i q = sub_block_chunk(b, i, c);
    const __m256i magnitude = _mm256_abs_epi8(q);
#pragma GCC unroll 8
    for (int t = 0; t < C; ++t) {
      sums[t] = byte_sum_add(sums[t], magnitude, _mm256_sign_epi8(chunk_acts(a[t], i, c), q));
    }
  };
#pragma GCC unroll 8
  for (int s = 0; s < kActBlocks; ++s) {
    __m256i dots[C];
    act_block_dots(s, sc.scale, add_chunk, dots);
#pragma GCC unroll 8
    for (int t = 0; t < C; ++t) {
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots[t]), _mm256_mul_ps(d, _mm256_broadcast_ss(&a[t][s].d)), acc[t]);
    }
  }
}

// The kernel as interleaved_matmul runs it.
struct Q3_Kx8Kernel {
  using Block = BlockQ3_Kx8;
  static constexpr GgmlType kType = GgmlType::Q3_Kx8;
  static constexpr GgmlType kRowType = GgmlType::Q3_K;
  static constexpr int64_t kBlockValues = kQK_K;
  template <int C>
  ALWAYS_INLINE static void step(const Block& b, const char* acts, size_t a_stride, int64_t j, __m256 (&acc)[C]) {
    super_step<C>(b, acts, a_stride, j, acc);
  }
};

}  // namespace

void KVDESK_TIER_NAME(matmul_q3_kx8)(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  interleaved_matmul<Q3_Kx8Kernel>(args, row_begin, row_end);
}

}  // namespace kvdesk
