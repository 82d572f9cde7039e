// AVX2 GEMM over Q4_0x8 weights (kernels/weight_repack.h) x Q8Act activation rows. A tile is
// one group of 8 rows x C activation rows; its accumulators hold one output row per float lane,
// so a block costs per activation row 8 maddubs (s16 sums of 16 products stay below 2^15:
// 16 x 15 x 127 = 30480), one madd, one conversion and one FMA, and the result is stored as 8
// floats with no horizontal sum. Built with AVX2 flags, reached only through the ISA tables.
#include <cstring>

#include "kernels/check.h"
#include "kernels/cpu/dot_isa.h"
#include "kernels/cpu/simd_prelude.h"
#include "kernels/weight_repack.h"

namespace kvdesk {
namespace {

// Activation rows per tile: 8 weight vectors + 4 float accumulators + the s16 sum, a broadcast
// and the row scales fill the 16 ymm registers.
constexpr int kTileActs = 4;
// Weight bytes of a row block that stays in L2 while the whole batch streams past it.
constexpr size_t kRowBlockBytes = 256 * 1024;

ALWAYS_INLINE __m256i broadcast_4_bytes(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

// The group's 32 values per row as 8 vectors of 4 values x 8 rows: chunk c's low nibbles
// (values 4c .. 4c + 3) in w[c], its high nibbles (values 16 + 4c ..) in w[4 + c].
ALWAYS_INLINE void unpack_block(const BlockQ4_0x8& b, __m256i (&w)[8]) {
  const __m256i nibble = _mm256_set1_epi8(15);
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m256i raw = load_256(b.qs + 32 * c);
    w[c] = _mm256_and_si256(raw, nibble);
    w[4 + c] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), nibble);
  }
}

// acc (rows of the group) += fp16(d) * a.d * (dot - 8 * a.sum) per row lane; dw = fp16(d).
ALWAYS_INLINE void act_step(const __m256i (&w)[8], __m256 dw, const BlockQ8Act& a, __m256& acc) {
  __m256i isum = _mm256_maddubs_epi16(w[0], broadcast_4_bytes(a.qs));
#pragma GCC unroll 8
  for (int k = 1; k < 8; ++k) {
    const int8_t* values = a.qs + (k < 4 ? 4 * k : 16 + 4 * (k - 4));
    isum = _mm256_add_epi16(isum, _mm256_maddubs_epi16(w[k], broadcast_4_bytes(values)));
  }
  const __m256i dot = _mm256_sub_epi32(_mm256_madd_epi16(isum, _mm256_set1_epi16(1)),
                                       _mm256_slli_epi32(_mm256_set1_epi32(a.sum), 3));
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(dw, _mm256_set1_ps(a.d)), acc);
}

// One block of the group against block j of every act row.
template <int C>
ALWAYS_INLINE void block_step(const BlockQ4_0x8& b, const char* acts, size_t a_stride, int64_t j, __m256 (&acc)[C]) {
  __m256i w[8];
  unpack_block(b, w);
  const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.d)));
#pragma GCC unroll 8
  for (int t = 0; t < C; ++t) act_step(w, dw, reinterpret_cast<const BlockQ8Act*>(acts + t * a_stride)[j], acc[t]);
}

// y[t * ld_y + r] for the group's 8 rows r and act rows t < C, over all blocks.
template <int C>
void tile(const BlockQ4_0x8* group, const char* acts, size_t a_stride, int64_t blocks, float* y, int64_t ld_y) {
  __m256 acc[C];
#pragma GCC unroll 8
  for (int t = 0; t < C; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t j = 0; j < blocks; ++j) block_step<C>(group[j], acts, a_stride, j, acc);
#pragma GCC unroll 8
  for (int t = 0; t < C; ++t) _mm256_storeu_ps(y + t * ld_y, acc[t]);
}

// Groups [g_begin, g_end) against act rows [c, c + C).
template <int C>
void run_groups(const MatmulArgs& args, size_t a_stride, int64_t g_begin, int64_t g_end, int64_t c) {
  const int64_t blocks = args.n / kQ4_0BlockValues;
  const auto* groups = static_cast<const BlockQ4_0x8*>(args.weights);
  const char* acts = static_cast<const char*>(args.acts) + static_cast<size_t>(c) * a_stride;
  for (int64_t g = g_begin; g < g_end; ++g) {
    tile<C>(groups + g * blocks, acts, a_stride, blocks, args.y + c * args.ld_y + g * kInterleavedRows, args.ld_y);
  }
}

// The act rows [c, batch) fewer than kTileActs, in one narrower tile.
void run_rest(const MatmulArgs& args, size_t a_stride, int64_t g_begin, int64_t g_end, int64_t c) {
  switch (args.batch - c) {
    case 1: return run_groups<1>(args, a_stride, g_begin, g_end, c);
    case 2: return run_groups<2>(args, a_stride, g_begin, g_end, c);
    case 3: return run_groups<3>(args, a_stride, g_begin, g_end, c);
    default: return;
  }
}

}  // namespace

// Row groups in L2-sized blocks; inside each, act rows kTileActs at a time walk the groups.
// Batch 1 (decode) streams the groups, one contiguous run of memory.
void matmul_q4_0x8_avx2(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  KVDESK_ASSERT(args.weight_type == GgmlType::Q4_0x8 && row_begin % kInterleavedRows == 0 &&
                row_end % kInterleavedRows == 0);
  const size_t a_stride = act_row_bytes(args.weight_type, args.n);
  const size_t group_bytes = kInterleavedRows * ggml_row_bytes(GgmlType::Q4_0, args.n);
  const int64_t block_groups = group_bytes < kRowBlockBytes ? static_cast<int64_t>(kRowBlockBytes / group_bytes) : 1;
  const int64_t g_end = row_end / kInterleavedRows;
  for (int64_t gb = row_begin / kInterleavedRows; gb < g_end; gb += block_groups) {
    const int64_t ge = g_end - gb < block_groups ? g_end : gb + block_groups;
    int64_t c = 0;
    for (; c + kTileActs <= args.batch; c += kTileActs) run_groups<kTileActs>(args, a_stride, gb, ge, c);
    run_rest(args, a_stride, gb, ge, c);
  }
}

}  // namespace kvdesk
