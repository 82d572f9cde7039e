// AVX2 GEMM over Q5_Kx8 weights (kernels/weight_repack.h) x Q8K activation rows: the Q4_Kx8
// GEMM with each 4-value chunk's fifth bits or-ed in as bit 4 before the maddubs. A tile is one
// group of 8 rows x C activation rows, one output row per 32-bit lane. Per 32-value sub-block
// and activation row: two runs of 4 maddubs, each summed in s16 (8 products of at most 31 x 127:
// 31496 < 2^15; 8 maddubs would overflow), each met by one madd with the row's sub-block scale;
// the int32 sums of a super-block (at most 8 x 63 x 125984 < 2^31) meet fp16(d) and the mins
// once (kernels/cpu/k_x8_scales_avx2.h). Built with AVX2 flags, reached only through the ISA
// tables.
#include "kernels/cpu/k_x8_scales_avx2.h"

namespace kvdesk {
namespace {

// kTileActs (4) act rows per tile: a run of 4 weight vectors, 4 int32 accumulators, the s16 sum,
// a broadcast, the run's qh vector and two masks fill 13 of the 16 ymm registers (batch 1: 10);
// the unpacked scales live on the stack as memory operands of the madds.
constexpr int kRunChunks = 4;     // 4-value chunks summed in s16 before a madd: half a sub-block
constexpr int kRuns = 2;          // runs of a sub-block

// Bit c of every byte of qh vector s (the fifth bits of chunk c) moved to bit 4, the rest
// cleared. The shifts are of 16-bit lanes by a count in a register (c is a loop index); the
// mask drops the bits that cross bytes.
ALWAYS_INLINE __m256i fifth_bits(__m256i qh, int c) {
  const __m256i moved = c < 4 ? _mm256_sll_epi16(qh, _mm_cvtsi32_si128(4 - c))
                              : _mm256_srl_epi16(qh, _mm_cvtsi32_si128(c - 4));
  return _mm256_and_si256(moved, _mm256_set1_epi8(16));
}

// Run `run` of sub-block s as 4 vectors of 4 values x 8 rows, 0..31 each: w[c] holds values
// 16 run + 4c .. 16 run + 4c + 3.
ALWAYS_INLINE void unpack_run(const BlockQ5_Kx8& b, int s, int run, __m256i (&w)[kRunChunks]) {
  const __m256i nibble = _mm256_set1_epi8(15);
  const int first = kRunChunks * run;
  const uint8_t* chunks = b.low.qs + 256 * (s / 2) + 32 * first;
  const __m256i qh = load_256(b.qh + 32 * s);
#pragma GCC unroll 4
  for (int c = 0; c < kRunChunks; ++c) {
    const __m256i raw = load_256(chunks + 32 * c);
    const __m256i low = _mm256_and_si256(s % 2 == 0 ? raw : _mm256_srli_epi16(raw, 4), nibble);
    w[c] = _mm256_or_si256(low, fifth_bits(qh, first + c));
  }
}

// v pinned where it was computed: GCC cannot move code across an empty asm that reads and
// writes it. Without this GCC 12 defers a super-block's 16 madd-and-adds per act row to its end
// and spills their operands to the stack.
ALWAYS_INLINE void pin_register(__m256i& v) { __asm__("" : "+x"(v)); }

// iacc += per row lane sc[s] * sum of the run's 16 products with act values a[0..15].
ALWAYS_INLINE void add_run_dot(const __m256i (&w)[kRunChunks], const int8_t* a, __m256i scale, __m256i& iacc) {
  __m256i isum = _mm256_maddubs_epi16(w[0], broadcast_4_bytes(a));
#pragma GCC unroll 4
  for (int c = 1; c < kRunChunks; ++c) isum = _mm256_add_epi16(isum, _mm256_maddubs_epi16(w[c], broadcast_4_bytes(a + 4 * c)));
  iacc = _mm256_add_epi32(iacc, _mm256_madd_epi16(isum, scale));
  pin_register(iacc);
}

// Super-block j of the group against super-block j of every act row.
template <int C>
ALWAYS_INLINE void super_step(const BlockQ5_Kx8& b, const char* acts, size_t a_stride, int64_t j, __m256 (&acc)[C]) {
  const KX8Scales sc = unpack_scales(b.low);
  const BlockQ8K* a[C];
  act_super_blocks(acts, a_stride, j, a);
  __m256i iacc[C];
#pragma GCC unroll 8
  for (int t = 0; t < C; ++t) iacc[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int s = 0; s < kKSubBlocks; ++s) {
#pragma GCC unroll 2
    for (int run = 0; run < kRuns; ++run) {
      __m256i w[kRunChunks];
      unpack_run(b, s, run, w);
#pragma GCC unroll 8
      for (int t = 0; t < C; ++t) add_run_dot(w, a[t]->qs + 32 * s + 4 * kRunChunks * run, sc.scale[s], iacc[t]);
    }
  }
  finish_super_block(b.low, sc, a, iacc, acc);
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

void matmul_q5_kx8_avx2(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  interleaved_matmul<Q5_Kx8Kernel>(args, row_begin, row_end);
}

}  // namespace kvdesk
