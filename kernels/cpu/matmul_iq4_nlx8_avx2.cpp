// AVX2 / AVX-VNNI GEMM over IQ4_NLx8 weights (kernels/weight_repack.h: Q4_0x8's layout, the nibbles level
// indices) x Q8Act activation rows. A tile is one group of 8 rows x C activation rows, one output
// row per 32-bit lane. Each 32-byte chunk of a block becomes two vectors of signed levels,
// unpacked once for all C act rows, and meets the act rows as kernels/cpu/level_indices_x8_avx2.h
// says; a block's int32 sums become floats once, scaled by fp16(d) of the 8 rows times the act
// scale (the products of ggml's layout, which meets the same act blocks). Built for each 256-bit tier
// (kernels/cpu/byte_dot_avx2.h), reached only through the ISA tables.
//
// Registers: the 1-act-row tile (decode) keeps everything in the 16 ymm registers; the
// kTileActs (4) tile needs more (per chunk the levels and their absolute values, 4 int32 block
// sums, 4 float accumulators, the table, the nibble mask, a broadcast), and the compiler keeps
// some of them on the stack.
#include "kernels/cpu/level_indices_x8_avx2.h"

namespace kvdesk {
namespace {

// The kernel as interleaved_matmul runs it: block j of the group against block j of every act row.
struct IQ4_NLx8Kernel {
  using Block = BlockQ4_0x8;
  static constexpr GgmlType kType = GgmlType::IQ4_NLx8;
  static constexpr GgmlType kRowType = GgmlType::IQ4_NL;
  static constexpr int64_t kBlockValues = kIq4nlBlockValues;
  template <int C>
  ALWAYS_INLINE static void step(const Block& b, const char* acts, size_t a_stride, int64_t j, __m256 (&acc)[C]) {
    const auto row_scales = [&] { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.d))); };
    levels_block_step<C>(level_table(kIq4nlValues), b.qs, row_scales, acts, a_stride, j, acc);
  }
};

}  // namespace

void KVDESK_TIER_NAME(matmul_iq4_nlx8)(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  interleaved_matmul<IQ4_NLx8Kernel>(args, row_begin, row_end);
}

}  // namespace kvdesk
