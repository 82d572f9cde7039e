// Internal, included only by the ISA translation units: 256-bit micro-kernels for the weight
// formats built from sub-blocks with their own scales, Q4_1, Q5_0 and Q5_1 here, Q2_K, Q3_K,
// IQ4_NL and IQ4_XS in dot_lowbit_formats.h (AVX2 only), IQ4_NL and MXFP4 in
// level_index_format.h, against BlockQ8Act rows. Each including unit supplies its u8 x s8 dot
// (AVX2 and AVX-VNNI: dot_u8s8 of byte_dot_avx2.h; AVX-512: VNNI vpdpbusd on ymm) and its tile
// shape; AVX-512 uses these for Q4_1, Q5_0, Q5_1 and MXFP4 only (its super-block types take zmm
// steps). The K-quants Q4_K, Q5_K and Q6_K meet Q8K rows in dot_kquant_avx2.cpp and
// dot_kquant_avx512.cpp instead.
// Everything here has internal linkage so each ISA keeps its own copy.
//
// One sub-block s of weight block j meets act block j * kSubBlocks + s. Per int32 lane i
// (values 4i..4i+3; lanes 0-3 are values 0-15, lanes 4-7 values 16-31):
//     dot[i]  = sum_{4 values} u8(q) * s8(a)  -  kOffset * sum_{4 values} s8(a)
//     acc[i] += float(dot[i]) * scale[i] * a.d          (scale per lane: Q2_K/Q3_K halves differ)
// and, for formats with a min, once per weight block, lane s for sub-block s:
//     min_acc[s] += min(s) * a.d * a.sum
// Formats whose quants are signed levels (IQ4) run the u8 x s8 dot on |q| against a with q's
// signs; formats with a min per 16 values (Q2_K) add, per lane and step,
//     min_acc[i] += min(lane i) * a.d * sum_{4 values} s8(a)
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/cpu/simd_prelude.h"
#include "kernels/cpu/tile_driver.h"

namespace kvdesk {
namespace {

// 16 packed nibble bytes -> [32] u8: low nibbles (values 0..15), then high nibbles (16..31)
ALWAYS_INLINE __m256i nibbles_32(const uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1);
  return _mm256_and_si256(both, _mm256_set1_epi8(15));
}

// 32 bits (little-endian) -> [32] bytes, 16 where bit i is set, 0 elsewhere
ALWAYS_INLINE __m256i fifth_bits_32(const uint8_t* qh) {
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
// F::Block, F::kSubBlocks, F::kOffset, F::kHasMin; F::Scales F::scales(const Block&) decoded once
// per block and row; F::quants(block, s) -> [32] u8; F::scale(scales, s) -> [8] lane scales;
// F::mins(scales) -> [8] the value added to every weight of sub-block s in lane s (lanes past
// kSubBlocks are ignored: their act side is zero).
// Optional: F::kSigned = true when F::quants gives s8 levels rather than u8 quants;
// F::kLaneMins = true when the min varies within a sub-block: F::lane_mins(scales, s) -> [8]
// the value added to every weight of each lane (kHasMin is then false).

template <class F>
constexpr bool kSignedQuants = requires { requires F::kSigned; };
template <class F>
constexpr bool kHasLaneMins = requires { requires F::kLaneMins; };

// scale[16] of 16-value sub-blocks -> lanes 0-3 (values 0-15 of sub-block pair s) scale[2s],
// lanes 4-7 scale[2s + 1]
ALWAYS_INLINE __m256 pair_scales(const float* scale, int s) {
  return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_set1_ps(scale[2 * s])), _mm_set1_ps(scale[2 * s + 1]), 1);
}

struct Q4_1Format {
  using Block = BlockQ4_1;
  static constexpr int kSubBlocks = 1;
  static constexpr int kOffset = 0;
  static constexpr bool kHasMin = true;
  struct Scales {
    __m256 d;   // [8] d
    __m256 m;   // [8] m
  };
  ALWAYS_INLINE static Scales scales_of(uint16_t d, uint16_t m) {
    return Scales{_mm256_set1_ps(_cvtsh_ss(d)), _mm256_set1_ps(_cvtsh_ss(m))};
  }
  ALWAYS_INLINE static Scales scales(const Block& b) { return scales_of(b.d, b.m); }
  ALWAYS_INLINE static __m256i quants(const Block& b, int) { return nibbles_32(b.qs); }
  ALWAYS_INLINE static __m256 scale(const Scales& s, int) { return s.d; }
  ALWAYS_INLINE static __m256 mins(const Scales& s) { return s.m; }
};

struct Q5_0Format {
  using Block = BlockQ5_0;
  static constexpr int kSubBlocks = 1;
  static constexpr int kOffset = 16;
  static constexpr bool kHasMin = false;
  struct Scales {
    __m256 d;
  };
  ALWAYS_INLINE static Scales scales(const Block& b) { return Scales{_mm256_set1_ps(_cvtsh_ss(b.d))}; }
  ALWAYS_INLINE static __m256i quants(const Block& b, int) {
    return _mm256_or_si256(nibbles_32(b.qs), fifth_bits_32(b.qh));
  }
  ALWAYS_INLINE static __m256 scale(const Scales& s, int) { return s.d; }
};

struct Q5_1Format {
  using Block = BlockQ5_1;
  static constexpr int kSubBlocks = 1;
  static constexpr int kOffset = 0;
  static constexpr bool kHasMin = true;
  using Scales = Q4_1Format::Scales;
  ALWAYS_INLINE static Scales scales(const Block& b) { return Q4_1Format::scales_of(b.d, b.m); }
  ALWAYS_INLINE static __m256i quants(const Block& b, int) {
    return _mm256_or_si256(nibbles_32(b.qs), fifth_bits_32(b.qh));
  }
  ALWAYS_INLINE static __m256 scale(const Scales& s, int) { return s.d; }
  ALWAYS_INLINE static __m256 mins(const Scales& s) { return s.m; }
};

// ---- micro-kernel -----------------------------------------------------------------------------

// The act side of one sub-block step: quants, scale, and -kOffset * (sum of each lane's 4 values).
struct SubBlockAct {
  __m256i qs;         // [32] s8
  __m256 d;           // a.d in every lane
  __m256i bias;       // [8] int32
  __m256 lane_sums;   // [8] a.d * (sum of the lane's 4 values); lane-min formats only
};

// a[s].d * a[s].sum in lane s for the kSubBlocks act blocks of one weight block, zeros beyond.
template <int kSubBlocks>
ALWAYS_INLINE __m256 act_sums(const BlockQ8Act* a) {
  alignas(32) float v[8] = {};
#pragma GCC unroll 8
  for (int s = 0; s < kSubBlocks; ++s) v[s] = a[s].d * static_cast<float>(a[s].sum);
  return _mm256_load_ps(v);
}

template <class F, class Dot>
ALWAYS_INLINE SubBlockAct subblock_act(const BlockQ8Act& a) {
  const __m256i qs = load_256(a.qs);
  const __m256 d = _mm256_broadcast_ss(&a.d);
  __m256i bias = _mm256_setzero_si256();
  if constexpr (F::kOffset != 0) {
    bias = _mm256_sub_epi32(bias, Dot::dot(bias, _mm256_set1_epi8(F::kOffset), qs));
  }
  __m256 lane_sums = _mm256_setzero_ps();
  if constexpr (kHasLaneMins<F>) {
    const __m256i sums = Dot::dot(_mm256_setzero_si256(), _mm256_set1_epi8(1), qs);
    lane_sums = _mm256_mul_ps(_mm256_cvtepi32_ps(sums), d);
  }
  return SubBlockAct{qs, d, bias, lane_sums};
}

// Block j of every row of the tile against act blocks j * kSubBlocks + s.
template <class F, class Dot, int R, int C>
ALWAYS_INLINE void subblock_block(const Tile& t, int64_t j, __m256 (&acc)[R][C], __m256 (&min_acc)[R][C]) {
  using Block = typename F::Block;
  const Block* blocks[R];
  typename F::Scales scales[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    blocks[r] = &row_at<Block>(t.w, t.w_stride, r)[j];
    scales[r] = F::scales(*blocks[r]);
  }
#pragma GCC unroll 8
  for (int s = 0; s < F::kSubBlocks; ++s) {
    __m256i q[R];       // [32] u8 quants, or s8 levels for signed formats
    __m256i q_abs[R];   // [32] |q| (signed formats)
    __m256 ws[R];
    __m256 lane_min[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      q[r] = F::quants(*blocks[r], s);
      if constexpr (kSignedQuants<F>) q_abs[r] = _mm256_sign_epi8(q[r], q[r]);
      ws[r] = F::scale(scales[r], s);
      if constexpr (kHasLaneMins<F>) lane_min[r] = F::lane_mins(scales[r], s);
    }
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const SubBlockAct a =
          subblock_act<F, Dot>(row_at<BlockQ8Act>(t.a, t.a_stride, c)[j * F::kSubBlocks + s]);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        __m256i idot;
        if constexpr (kSignedQuants<F>) {
          idot = Dot::dot(a.bias, q_abs[r], _mm256_sign_epi8(a.qs, q[r]));
        } else {
          idot = Dot::dot(a.bias, q[r], a.qs);
        }
        acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(idot), _mm256_mul_ps(ws[r], a.d), acc[r][c]);
        if constexpr (kHasLaneMins<F>) min_acc[r][c] = _mm256_fmadd_ps(lane_min[r], a.lane_sums, min_acc[r][c]);
      }
    }
  }
  if constexpr (F::kHasMin) {
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const __m256 sums = act_sums<F::kSubBlocks>(&row_at<BlockQ8Act>(t.a, t.a_stride, c)[j * F::kSubBlocks]);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) min_acc[r][c] = _mm256_fmadd_ps(F::mins(scales[r]), sums, min_acc[r][c]);
    }
  }
}

// Tile shape per ISA: kGemvRowsT rows for batch 1, kRowsT x kActsT for batches.
template <class F, class Dot, int kGemvRowsT, int kRowsT, int kActsT>
struct SubBlockKernel : UnpackedActs {
  static constexpr int kGemvRows = kGemvRowsT;
  static constexpr int kRows = kRowsT;
  static constexpr int kActs = kActsT;

  template <int R, int C>
  static void tile(const Tile& t) {
    const int64_t blocks = t.n / (32 * F::kSubBlocks);
    __m256 acc[R][C];
    __m256 min_acc[R][C];
    zero_tile(acc);
    zero_tile(min_acc);
    for (int64_t j = 0; j < blocks; ++j) subblock_block<F, Dot, R, C>(t, j, acc, min_acc);
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) t.y[c * t.ld_y + r * t.y_row_stride] = hsum(acc[r][c]) + hsum(min_acc[r][c]);
    }
  }
};

}  // namespace
}  // namespace kvdesk
