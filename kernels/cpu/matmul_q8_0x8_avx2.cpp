// AVX2 / AVX-VNNI GEMM over Q8_0x8 weights (kernels/weight_repack.h) x Q8Act activation rows. A
// tile is one group of 8 rows x C activation rows; its accumulators hold one output row per float
// lane, so a block costs per activation row 8 x (broadcast, dot_u8s8), one conversion and one FMA
// for 8 rows, where the ggml layout pays a conversion, a multiply and an FMA per row and a
// horizontal sum per tile. The dot takes u8 x s8. On AVX2 the weights' absolute values (unpacked
// once per block) meet the activations carrying the weights' signs (a vpsignb per chunk); a pair
// sum reaches 2 x 128 x 127 = 32512, so two of them could overflow s16: every chunk is widened
// to s32 at once (dot_u8s8: maddubs + madd + add). AVX-VNNI's vpdpbusd has no s16 step, so there
// the weights go in offset by 128 instead. Built for each 256-bit tier
// (kernels/cpu/byte_dot_avx2.h), reached only through the ISA tables.
#include "kernels/cpu/byte_dot_avx2.h"
#include "kernels/cpu/interleaved_gemm_avx2.h"

namespace kvdesk {
namespace {

constexpr int kChunks = 8;  // 32-byte chunks of a block: values 4c .. 4c + 3 of the 8 rows

// kTileActs (4) act rows per tile: the 8 |w| (or w + 128) vectors, 4 float accumulators, the
// s32 sum and a broadcast fill the 16 ymm registers; the weights' signs are read from memory.

// A block as its act rows use it: the 8 chunk vectors, w + 128 (AVX-VNNI) or |w| (AVX2), and
// the 8 rows' scales.
struct alignas(64) UnpackedQ8_0 {
  __m256i w[kChunks];
  __m256 dw;
};

// The weights offset to u8 (AVX-VNNI): vpdpbusd sums in int32 with no s16 step, so w + 128 (the
// sign bit flipped) meets the activations as they are and the sum starts at -128 * a.sum, taking
// the offset back. A chunk costs one vpdpbusd, where the sign trick below spends a vpsignb too.
// On AVX2 the weights' signs move onto the activations: maddubs pairs of w + 128 could pass 2^15.
ALWAYS_INLINE void unpack_block(const BlockQ8_0x8& b, UnpackedQ8_0& u) {
  const __m256i sign_bit = _mm256_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 8
  for (int c = 0; c < kChunks; ++c) {
    const __m256i w = load_256(b.qs + 32 * c);
    u.w[c] = kByteDotVnni ? _mm256_xor_si256(w, sign_bit) : _mm256_abs_epi8(w);
  }
  u.dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.d)));
}

// The unpacked block b against block j of every act row; AVX2 reads the weights' signs from b.
template <int C>
ALWAYS_INLINE void unpacked_step(const UnpackedQ8_0& u, const BlockQ8_0x8& b, const char* acts, size_t a_stride,
                                 int64_t j, __m256 (&acc)[C]) {
#pragma GCC unroll 8
  for (int t = 0; t < C; ++t) {
    const BlockQ8Act& a = reinterpret_cast<const BlockQ8Act*>(acts + t * a_stride)[j];
    __m256i dot = _mm256_set1_epi32(kByteDotVnni ? -128 * a.sum : 0);
#pragma GCC unroll 8
    for (int c = 0; c < kChunks; ++c) {
      const __m256i a4 = broadcast_4_bytes(a.qs + 4 * c);
      dot = dot_u8s8(dot, u.w[c], kByteDotVnni ? a4 : _mm256_sign_epi8(a4, load_256(b.qs + 32 * c)));
    }
    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(u.dw, _mm256_set1_ps(a.d)), acc[t]);
  }
}

// The kernel as interleaved_matmul runs it.
struct Q8_0x8Kernel {
  using Block = BlockQ8_0x8;
  using Unpacked = UnpackedQ8_0;
  static constexpr GgmlType kType = GgmlType::Q8_0x8;
  static constexpr GgmlType kRowType = GgmlType::Q8_0;
  static constexpr int64_t kBlockValues = kQ8_0BlockValues;
  ALWAYS_INLINE static void unpack(const Block& b, Unpacked& u) { unpack_block(b, u); }
  template <int C>
  ALWAYS_INLINE static void step_unpacked(const Unpacked& u, const Block& b, const char* acts, size_t a_stride, int64_t j,
                                          __m256 (&acc)[C]) {
    unpacked_step<C>(u, b, acts, a_stride, j, acc);
  }
  template <int C>
  ALWAYS_INLINE static void step(const Block& b, const char* acts, size_t a_stride, int64_t j, __m256 (&acc)[C]) {
    Unpacked u;
    unpack_block(b, u);
    unpacked_step<C>(u, b, acts, a_stride, j, acc);
  }
};

}  // namespace

void KVDESK_TIER_NAME(matmul_q8_0x8)(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  interleaved_matmul<Q8_0x8Kernel>(args, row_begin, row_end);
}

}  // namespace kvdesk
