// Internal, included only by the ISA translation units: 256-bit micro-kernels for the 32-value
// weight blocks with a 5th bit or a min, Q4_1, Q5_0 and Q5_1, against BlockQ8Act rows. Each
// including unit supplies its u8 x s8 dot (AVX2: maddubs + madd; AVX-512: VNNI vpdpbusd on ymm)
// and its tile shape. Everything here has internal linkage so each ISA keeps its own copy.
//
// Weight block j meets act block j. Per int32 lane i (values 4i..4i+3):
//     dot[i]  = sum_{4 values} u8(q) * s8(a)  -  kOffset * sum_{4 values} s8(a)
//     acc[i] += float(dot[i]) * d * a.d
// and, for formats with a min, in lane 0:
//     min_acc[0] += m * a.d * a.sum
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/tile_driver.h"

namespace kvdesk {
namespace {

#define SUBBLOCK_INLINE inline __attribute__((always_inline))

SUBBLOCK_INLINE __m256i load_32_bytes(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// 16 packed nibble bytes -> [32] u8: low nibbles (values 0..15), then high nibbles (16..31)
SUBBLOCK_INLINE __m256i nibbles_32(const uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1);
  return _mm256_and_si256(both, _mm256_set1_epi8(15));
}

// 32 bits (little-endian) -> [32] bytes, 16 where bit i is set, 0 elsewhere
SUBBLOCK_INLINE __m256i fifth_bits_32(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
  const __m256i select = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
  return _mm256_and_si256(set, _mm256_set1_epi8(16));
}

// ---- formats ----------------------------------------------------------------------------------
// F::Block, F::kOffset, F::kHasMin; F::Scales F::scales(const Block&) decoded once per block
// and row; F::quants(block) -> [32] u8; Scales::d -> [8] d; Scales::m -> [8] m, the value added
// to every weight (only lane 0 meets a nonzero act sum).

struct Q4_1Format {
  using Block = BlockQ4_1;
  static constexpr int kOffset = 0;
  static constexpr bool kHasMin = true;
  struct Scales {
    __m256 d;   // [8] d
    __m256 m;   // [8] m
  };
  SUBBLOCK_INLINE static Scales scales_of(uint16_t d, uint16_t m) {
    return Scales{_mm256_set1_ps(_cvtsh_ss(d)), _mm256_set1_ps(_cvtsh_ss(m))};
  }
  SUBBLOCK_INLINE static Scales scales(const Block& b) { return scales_of(b.d, b.m); }
  SUBBLOCK_INLINE static __m256i quants(const Block& b) { return nibbles_32(b.qs); }
};

struct Q5_0Format {
  using Block = BlockQ5_0;
  static constexpr int kOffset = 16;
  static constexpr bool kHasMin = false;
  struct Scales {
    __m256 d;
  };
  SUBBLOCK_INLINE static Scales scales(const Block& b) { return Scales{_mm256_set1_ps(_cvtsh_ss(b.d))}; }
  SUBBLOCK_INLINE static __m256i quants(const Block& b) {
    return _mm256_or_si256(nibbles_32(b.qs), fifth_bits_32(b.qh));
  }
};

struct Q5_1Format {
  using Block = BlockQ5_1;
  static constexpr int kOffset = 0;
  static constexpr bool kHasMin = true;
  using Scales = Q4_1Format::Scales;
  SUBBLOCK_INLINE static Scales scales(const Block& b) { return Q4_1Format::scales_of(b.d, b.m); }
  SUBBLOCK_INLINE static __m256i quants(const Block& b) {
    return _mm256_or_si256(nibbles_32(b.qs), fifth_bits_32(b.qh));
  }
};

// ---- micro-kernel -----------------------------------------------------------------------------

SUBBLOCK_INLINE float subblock_hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// The act side of one block: quants, scale, and -kOffset * (sum of each lane's 4 values).
struct SubBlockAct {
  __m256i qs;    // [32] s8
  __m256 d;      // a.d in every lane
  __m256i bias;  // [8] int32
};

template <class F, class Dot>
SUBBLOCK_INLINE SubBlockAct subblock_act(const BlockQ8Act& a) {
  const __m256i qs = load_32_bytes(reinterpret_cast<const uint8_t*>(a.qs));
  __m256i bias = _mm256_setzero_si256();
  if constexpr (F::kOffset != 0) {
    bias = _mm256_sub_epi32(bias, Dot::dot(bias, _mm256_set1_epi8(F::kOffset), qs));
  }
  return SubBlockAct{qs, _mm256_broadcast_ss(&a.d), bias};
}

// Block j of every row of the tile against act block j.
template <class F, class Dot, int R, int C>
SUBBLOCK_INLINE void subblock_block(const Tile& t, int64_t j, __m256 (&acc)[R][C], __m256 (&min_acc)[R][C]) {
  using Block = typename F::Block;
  __m256i q[R];
  typename F::Scales scales[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const Block& b = row_at<Block>(t.w, t.w_stride, r)[j];
    q[r] = F::quants(b);
    scales[r] = F::scales(b);
  }
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) {
    const BlockQ8Act& act = row_at<BlockQ8Act>(t.a, t.a_stride, c)[j];
    const SubBlockAct a = subblock_act<F, Dot>(act);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m256 dot = _mm256_cvtepi32_ps(Dot::dot(a.bias, q[r], a.qs));
      acc[r][c] = _mm256_fmadd_ps(dot, _mm256_mul_ps(scales[r].d, a.d), acc[r][c]);
    }
    if constexpr (F::kHasMin) {
      const __m256 sum = _mm256_setr_ps(act.d * static_cast<float>(act.sum), 0, 0, 0, 0, 0, 0, 0);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) min_acc[r][c] = _mm256_fmadd_ps(scales[r].m, sum, min_acc[r][c]);
    }
  }
}

// Tile shape per ISA: kGemvRowsT rows for batch 1, kRowsT x kActsT for batches.
template <class F, class Dot, int kGemvRowsT, int kRowsT, int kActsT>
struct SubBlockKernel {
  static constexpr int kGemvRows = kGemvRowsT;
  static constexpr int kRows = kRowsT;
  static constexpr int kActs = kActsT;

  static ActPanel pack_acts(const MatmulArgs& args, size_t a_stride, int64_t first, int) {
    return unpacked_acts(args, a_stride, first);
  }

  template <int R, int C>
  static void tile(const Tile& t) {
    const int64_t blocks = t.n / 32;
    __m256 acc[R][C];
    __m256 min_acc[R][C];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps(), min_acc[r][c] = _mm256_setzero_ps();
    }
    for (int64_t j = 0; j < blocks; ++j) subblock_block<F, Dot, R, C>(t, j, acc, min_acc);
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) t.y[c * t.ld_y + r * t.y_row_stride] = subblock_hsum(acc[r][c]) + subblock_hsum(min_acc[r][c]);
    }
  }
};

#undef SUBBLOCK_INLINE

}  // namespace
}  // namespace kvdesk
