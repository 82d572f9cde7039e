// AVX2 GEMM over Q4_Kx8 weights (kernels/weight_repack.h) x Q8K activation rows. A tile is one
// group of 8 rows x C activation rows, one output row per 32-bit lane. Per 32-value sub-block and
// activation row: 8 maddubs summed in s16 (16 products of at most 15 x 127: 30480 < 2^15), then
// one madd with the row's sub-block scale in both s16 lanes of its pair, so the scale costs no
// extra multiply; the int32 sums of a super-block (at most 8 x 63 x 60960 < 2^31) meet fp16(d)
// and the mins once. The super-block's scales are unpacked for all 8 rows with a few vector
// shifts. Built with AVX2 flags, reached only through the ISA tables.
#include "kernels/cpu/interleaved_gemm_avx2.h"

namespace kvdesk {
namespace {

// kTileActs (4) act rows per tile: 8 weight vectors + 4 int32 accumulators + the s16 sum and a
// broadcast fill the 16 ymm registers; the float accumulators change once per super-block.
constexpr int kSubBlocks = 8;

// A super-block's scales and mins, unpacked for the 8 rows.
struct Q4_KScales {
  __m256i scale[kSubBlocks];   // [8 sub-blocks][16] s16: sc[s] of row r in lanes 2r, 2r + 1
  __m256i mins[kSubBlocks / 2];  // [4 pairs q][16] s16: m[2q] of row r in lane 2r, m[2q + 1] in 2r + 1
};

// The 128 six-bit values (weight_repack.h) as u8: sc of sub-blocks 0-3, 4-7, m of 0-3, 4-7,
// each vector byte 8 (s % 4) + r.
ALWAYS_INLINE void unpack_six_bits(const BlockQ4_Kx8& b, __m256i (&v)[4]) {
  const __m256i low4 = _mm256_set1_epi8(15);
  const __m256i two = _mm256_set1_epi8(3);
  const __m256i low[2] = {load_256(b.scale_low), load_256(b.scale_low + 32)};
  const __m256i high = load_256(b.scale_high);
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    const __m256i l = _mm256_and_si256(k < 2 ? low[k] : _mm256_srli_epi16(low[k - 2], 4), low4);
    const __m256i h = _mm256_and_si256(_mm256_srli_epi16(high, 2 * k), two);
    v[k] = _mm256_or_si256(l, _mm256_slli_epi16(h, 4));
  }
}

ALWAYS_INLINE Q4_KScales unpack_scales(const BlockQ4_Kx8& b) {
  __m256i v[4];
  unpack_six_bits(b, v);
  // bytes 8h .. 8h + 7 (one sub-block's 8 rows) each twice; bytes i and 8 + i side by side
  const __m128i dup[2] = {_mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7),
                          _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15)};
  const __m128i zip = _mm_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
  Q4_KScales out;
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    const __m128i sc = q % 2 == 0 ? _mm256_castsi256_si128(v[q / 2]) : _mm256_extracti128_si256(v[q / 2], 1);
    const __m128i m = q % 2 == 0 ? _mm256_castsi256_si128(v[2 + q / 2]) : _mm256_extracti128_si256(v[2 + q / 2], 1);
    out.scale[2 * q] = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sc, dup[0]));
    out.scale[2 * q + 1] = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sc, dup[1]));
    out.mins[q] = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(m, zip));
  }
  return out;
}

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
ALWAYS_INLINE __m256i sub_block_dot(const __m256i (&w)[8], const int8_t* a, __m256i scale) {
  __m256i isum = _mm256_maddubs_epi16(w[0], broadcast_4_bytes(a));
#pragma GCC unroll 8
  for (int c = 1; c < 8; ++c) isum = _mm256_add_epi16(isum, _mm256_maddubs_epi16(w[c], broadcast_4_bytes(a + 4 * c)));
  return _mm256_madd_epi16(isum, scale);
}

// Per row lane: sum_s m[s] * (bsums[2s] + bsums[2s + 1]).
ALWAYS_INLINE __m256i min_dot(const Q4_KScales& sc, const BlockQ8K& a) {
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

// Super-block j of the group against super-block j of every act row.
template <int C>
ALWAYS_INLINE void super_step(const BlockQ4_Kx8& b, const char* acts, size_t a_stride, int64_t j, __m256 (&acc)[C]) {
  const Q4_KScales sc = unpack_scales(b);
  const BlockQ8K* a[C];
  __m256i iacc[C];
#pragma GCC unroll 8
  for (int t = 0; t < C; ++t) {
    a[t] = reinterpret_cast<const BlockQ8K*>(acts + t * a_stride) + j;
    iacc[t] = _mm256_setzero_si256();
  }
#pragma GCC unroll 8
  for (int s = 0; s < kSubBlocks; ++s) {
    __m256i w[8];
    unpack_sub_block(b, s, w);
#pragma GCC unroll 8
    for (int t = 0; t < C; ++t) iacc[t] = _mm256_add_epi32(iacc[t], sub_block_dot(w, a[t]->qs + 32 * s, sc.scale[s]));
  }
  const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.d)));
  const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.dmin)));
#pragma GCC unroll 8
  for (int t = 0; t < C; ++t) {
    const __m256 ad = _mm256_broadcast_ss(&a[t]->d);
    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[t]), _mm256_mul_ps(d, ad), acc[t]);
    acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(min_dot(sc, *a[t])), _mm256_mul_ps(dmin, ad), acc[t]);
  }
}

// The kernel as interleaved_matmul runs it.
struct Q4_Kx8Kernel {
  using Block = BlockQ4_Kx8;
  static constexpr GgmlType kType = GgmlType::Q4_Kx8;
  static constexpr GgmlType kRowType = GgmlType::Q4_K;
  static constexpr int64_t kBlockValues = kQK_K;
  template <int C>
  ALWAYS_INLINE static void step(const Block& b, const char* acts, size_t a_stride, int64_t j, __m256 (&acc)[C]) {
    super_step<C>(b, acts, a_stride, j, acc);
  }
};

}  // namespace

void matmul_q4_kx8_avx2(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  interleaved_matmul<Q4_Kx8Kernel>(args, row_begin, row_end);
}

}  // namespace kvdesk
