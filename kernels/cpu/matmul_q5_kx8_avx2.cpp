// AVX2 / AVX-VNNI GEMM over Q5_Kx8 weights (kernels/weight_repack.h) x Q8K activation rows: the
// Q4_Kx8 GEMM over 5-bit quants, every 8 of them unpacked from 5 bytes. A tile is one group of 8
// rows x C activation rows, one output row per 32-bit lane. Per 32-value sub-block and activation
// row: two runs of 4 chunks, each one ByteSum (on AVX2 an s16 sum of 8 products of at most
// 31 x 127: 31496 < 2^15; 8 maddubs would overflow) met by the row's sub-block scale (AVX2: one
// madd; AVX-VNNI: one vpmulld); the int32 sums of a super-block (at most 8 x 63 x 125984 < 2^31)
// meet fp16(d) and the mins once (kernels/cpu/k_x8_scales_avx2.h). Built for each 256-bit tier
// (kernels/cpu/byte_dot_avx2.h), reached only through the ISA tables.
#include "kernels/cpu/byte_dot_avx2.h"
#include "kernels/cpu/k_x8_scales_avx2.h"

namespace kvdesk {
namespace {

// kTileActs (4) act rows per tile: a run of 4 weight vectors, 4 int32 accumulators, the s16 sum,
// a broadcast and the packed vectors and masks of the unpacking fit the 16 ymm registers;
// the unpacked scales live on the stack as memory operands of the madds.
constexpr int kRunChunks = 4;     // 4-value chunks summed in s16 before a madd: half a sub-block
constexpr int kRuns = 2;          // runs of a sub-block

// Run `run` of sub-block s as 4 vectors of 4 values x 8 rows, 0..31 each: w[c] holds values
// 16 run + 4c .. 16 run + 4c + 3. Run 0 is the packed vectors 0..3 masked; run 1 vector 4
// masked and chunks 5..7 gathered from the vectors' top 3 bits.
ALWAYS_INLINE void unpack_run(const BlockQ5_Kx8& b, int s, int run, __m256i (&w)[kRunChunks]) {
  const uint8_t* codes = b.codes + 160 * s;
  const __m256i five = _mm256_set1_epi8(0x1F);
  if (run == 0) {
#pragma GCC unroll 4
    for (int c = 0; c < kRunChunks; ++c) w[c] = _mm256_and_si256(load_256(codes + 32 * c), five);
    return;
  }
  const __m256i v0 = load_256(codes), v1 = load_256(codes + 32), v2 = load_256(codes + 64);
  const __m256i v3 = load_256(codes + 96), v4 = load_256(codes + 128);
  w[0] = _mm256_and_si256(v4, five);
  w[1] = _mm256_or_si256(shifted_bits(v0, 5, 0x07), shifted_bits(v1, 2, 0x18));
  w[2] = _mm256_or_si256(shifted_bits(v2, 5, 0x07), shifted_bits(v3, 2, 0x18));
  w[3] = _mm256_or_si256(_mm256_or_si256(shifted_bits(v4, 5, 0x07), shifted_bits(v1, 4, 0x08)),
                         shifted_bits(v3, 3, 0x10));
}

// iacc += per row lane sc[s] * sum of the run's 16 products with act values a[0..15].
ALWAYS_INLINE void add_run_dot(const __m256i (&w)[kRunChunks], const int8_t* a, ByteScale scale, __m256i& iacc) {
  ByteSum isum = byte_sum(w[0], broadcast_4_bytes(a));
#pragma GCC unroll 4
  for (int c = 1; c < kRunChunks; ++c) isum = byte_sum_add(isum, w[c], broadcast_4_bytes(a + 4 * c));
  iacc = _mm256_add_epi32(iacc, widen_scaled(isum, scale));
  pin_register(iacc);
}

// Super-block j of the group against super-block j of every act row.
template <int C>
ALWAYS_INLINE void super_step(const BlockQ5_Kx8& b, const char* acts, size_t a_stride, int64_t j, __m256 (&acc)[C]) {
  const KX8Scales sc = unpack_scales(b.scales);
  const BlockQ8K* a[C];
  act_super_blocks(acts, a_stride, j, a);
  __m256i iacc[C];
#pragma GCC unroll 8
  for (int t = 0; t < C; ++t) iacc[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int s = 0; s < kKSubBlocks; ++s) {
    const ByteScale scale = byte_scale(sc.scale[s]);
#pragma GCC unroll 2
    for (int run = 0; run < kRuns; ++run) {
      __m256i w[kRunChunks];
      unpack_run(b, s, run, w);
#pragma GCC unroll 8
      for (int t = 0; t < C; ++t) add_run_dot(w, a[t]->qs + 32 * s + 4 * kRunChunks * run, scale, iacc[t]);
    }
  }
  finish_super_block(b.scales, sc, a, iacc, acc);
}

// The kernel as interleaved_matmul runs it.
struct Q5_Kx8Kernel {
  using Block = BlockQ5_Kx8;
  static constexpr GgmlType kType = GgmlType::Q5_Kx8;
  static constexpr GgmlType kRowType = GgmlType::Q5_K;
  static constexpr int64_t kBlockValues = kQK_K;
  template <int C>
  ALWAYS_INLINE static void step(const Block& b, const char* acts, size_t a_stride, int64_t j, __m256 (&acc)[C]) {
    super_step<C>(b, acts, a_stride, j, acc);
  }
};

}  // namespace

void KVDESK_TIER_NAME(matmul_q5_kx8)(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  interleaved_matmul<Q5_Kx8Kernel>(args, row_begin, row_end);
}

}  // namespace kvdesk
