// AVX2 / AVX-VNNI GEMM over Q4_0x8 weights (kernels/weight_repack.h) x Q8Act activation rows. A
// tile is one group of 8 rows x C activation rows; its accumulators hold one output row per float
// lane, so a block costs per activation row one ByteSum of 8 chunks (AVX2: 8 maddubs, whose s16
// sums of 16 products stay below 2^15: 16 x 15 x 127 = 30480, and one madd; AVX-VNNI: 8 vpdpbusd),
// one conversion and one FMA, and the result is stored as 8 floats with no horizontal sum. Built
// for each 256-bit tier (kernels/cpu/byte_dot_avx2.h), reached only through the ISA tables.
#include "kernels/cpu/byte_dot_avx2.h"
#include "kernels/cpu/interleaved_gemm_avx2.h"

namespace kvdesk {
namespace {

// kTileActs (4) act rows per tile: 8 weight vectors + 4 float accumulators + the s16 sum, a
// broadcast and the row scales fill the 16 ymm registers.

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

// The 4 act bytes that chunk k of the block meets: values 4k .. 4k + 3 (low nibbles, k < 4) or
// 16 + 4(k - 4) .. (high nibbles).
ALWAYS_INLINE __m256i chunk_acts(const BlockQ8Act& a, int k) {
  return broadcast_4_bytes(a.qs + (k < 4 ? 4 * k : 16 + 4 * (k - 4)));
}

// dot - 8 * a.sum per row lane: on AVX-VNNI the int32 sum starts at -8 * a.sum; on AVX2 the
// offset is taken from the widened s16 sum.
ALWAYS_INLINE __m256i offset_dot(const __m256i (&w)[8], const BlockQ8Act& a) {
  if constexpr (kByteDotVnni) {
    __m256i dot = _mm256_set1_epi32(-8 * a.sum);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) dot = dot_u8s8(dot, w[k], chunk_acts(a, k));
    return dot;
  } else {
    ByteSum isum = byte_sum(w[0], chunk_acts(a, 0));
#pragma GCC unroll 8
    for (int k = 1; k < 8; ++k) isum = byte_sum_add(isum, w[k], chunk_acts(a, k));
    return _mm256_sub_epi32(widen(isum), _mm256_slli_epi32(_mm256_set1_epi32(a.sum), 3));
  }
}

// acc (rows of the group) += fp16(d) * a.d * (dot - 8 * a.sum) per row lane; dw = fp16(d).
ALWAYS_INLINE void act_step(const __m256i (&w)[8], __m256 dw, const BlockQ8Act& a, __m256& acc) {
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(offset_dot(w, a)), _mm256_mul_ps(dw, _mm256_set1_ps(a.d)), acc);
}

// A block as its act rows use it: unpack_block's vectors and the 8 rows' scales.
struct alignas(64) UnpackedQ4_0 {
  __m256i w[8];
  __m256 dw;
};

// The kernel as interleaved_matmul runs it.
struct Q4_0x8Kernel {
  using Block = BlockQ4_0x8;
  using Unpacked = UnpackedQ4_0;
  static constexpr GgmlType kType = GgmlType::Q4_0x8;
  static constexpr GgmlType kRowType = GgmlType::Q4_0;
  static constexpr int64_t kBlockValues = kQ4_0BlockValues;

  ALWAYS_INLINE static void unpack(const Block& b, Unpacked& u) {
    unpack_block(b, u.w);
    u.dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.d)));
  }
  // The unpacked block against block j of every act row.
  template <int C>
  ALWAYS_INLINE static void step_unpacked(const Unpacked& u, const Block&, const char* acts, size_t a_stride, int64_t j,
                                          __m256 (&acc)[C]) {
#pragma GCC unroll 8
    for (int t = 0; t < C; ++t) act_step(u.w, u.dw, reinterpret_cast<const BlockQ8Act*>(acts + t * a_stride)[j], acc[t]);
  }
  template <int C>
  ALWAYS_INLINE static void step(const Block& b, const char* acts, size_t a_stride, int64_t j, __m256 (&acc)[C]) {
    Unpacked u;
    unpack(b, u);
    step_unpacked<C>(u, b, acts, a_stride, j, acc);
  }
};

}  // namespace

void KVDESK_TIER_NAME(matmul_q4_0x8)(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  interleaved_matmul<Q4_0x8Kernel>(args, row_begin, row_end);
}

}  // namespace kvdesk
