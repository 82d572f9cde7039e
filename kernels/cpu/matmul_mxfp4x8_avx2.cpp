// AVX2 / AVX-VNNI GEMM over MXFP4x8 weights (kernels/weight_repack.h: Q4_0x8's layout, the nibbles indices
// into the doubled E2M1 levels, each row's E8M0 exponent for its scale) x Q8Act activation rows,
// as IQ4_NLx8's: the levels (|level| <= 12) meet the act rows as kernels/cpu/level_indices_x8_avx2.h
// says, and a block's int32 sums become floats once, scaled by 2^(e - 128) of the 8 rows times
// the act scale (the products of ggml's layout, which meets the same act blocks). Built for
// each 256-bit tier (kernels/cpu/byte_dot_avx2.h), reached only through the ISA tables.
#include "kernels/cpu/level_indices_x8_avx2.h"

namespace kvdesk {
namespace {

// 2^(e - 128) of the 8 rows' exponents, as mxfp4_scale: the float whose exponent field is e - 1
// for e >= 2, the denormals 2^-128 and 2^-127 (bits 0x00200000 << e) below.
ALWAYS_INLINE __m256 half_scales(const uint8_t* e) {
  const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(e)));
  const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(v, _mm256_set1_epi32(1)), 23);
  const __m256i denormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), v);
  const __m256i below_two = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), v);
  return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, denormal, below_two));
}

// The kernel as interleaved_matmul runs it: block j of the group against block j of every act row.
struct MXFP4x8Kernel {
  using Block = BlockMXFP4x8;
  static constexpr GgmlType kType = GgmlType::MXFP4x8;
  static constexpr GgmlType kRowType = GgmlType::MXFP4;
  static constexpr int64_t kBlockValues = kMxfp4BlockValues;
  template <int C>
  ALWAYS_INLINE static void step(const Block& b, const char* acts, size_t a_stride, int64_t j, __m256 (&acc)[C]) {
    levels_block_step<C>(level_table(kMxfp4Values), b.qs, [&] { return half_scales(b.e); }, acts, a_stride, j, acc);
  }
};

}  // namespace

void KVDESK_TIER_NAME(matmul_mxfp4x8)(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  interleaved_matmul<MXFP4x8Kernel>(args, row_begin, row_end);
}

}  // namespace kvdesk
