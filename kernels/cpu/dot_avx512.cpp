// AVX-512 (F/BW/VL/DQ/VNNI) kernels: Q8Act quantization, dots and tiled matmul for every
// computable weight type. Integer blocks go two per zmm through vpdpbusd; float types use FMA.
// Built with AVX-512 flags, reached only through kAvx512Kernels after the CPU check.
// GCC 12's AVX-512 intrinsics self-initialize their undefined operands (`__Y = __Y`) and
// trip -Wuninitialized once inlined (GCC PR 105593); silence that inside the header only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstring>

#include "kernels/check.h"
#include "kernels/cpu/dot_isa.h"
#include "kernels/cpu/tile_driver.h"

namespace kvdesk {
namespace {

// ---- activation quantization ----------------------------------------------------------------

// d = amax / 127, qs[i] = round_half_even(x[i] * (1 / d)), sum = sum(qs): bit-identical to ref.
void quantize_act_block(const float* x, BlockQ8Act& y) {
  const __m512 x0 = _mm512_loadu_ps(x);
  const __m512 x1 = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
  const float d = amax / 127.0f;
  const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
  const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(x0, id));
  const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(x1, id));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y.qs), _mm512_cvtsepi32_epi8(q0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y.qs + 16), _mm512_cvtsepi32_epi8(q1));
  y.d = d;
  y.sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
}

void prepare_act_row(GgmlType weight_type, const float* x, void* act, int64_t n) {
  if (act_format_for(weight_type) == ActFormat::F32) {
    std::memcpy(act, x, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  KVDESK_ASSERT(n % kQ8ActBlockValues == 0);
  BlockQ8Act* y = static_cast<BlockQ8Act*>(act);
  for (int64_t b = 0; b < n / kQ8ActBlockValues; ++b) quantize_act_block(x + b * kQ8ActBlockValues, y[b]);
}

// ---- integer blocks: Q8_0 / Q4_0 weights x Q8Act --------------------------------------------
//
// A step covers a group of blocks (Q8_0: 2, Q4_0: 4; fewer at the end of a row, the missing
// blocks read as zeros). Per 32-bit lane i of the step:
//     dot[i]  = bias[i] + sum_{4 bytes} u8(w) * s8(a)               (vpdpbusd)
//     acc[i] += float(dot[i]) * fp16(w.d) * a.d                      (of the lane's block)
// with u8(w) = w + 128 (Q8_0) or the nibble 0..15 (Q4_0), and the offset taken back through
// bias = -128 * a.sum (Q8_0) or -8 * a.sum (Q4_0) in the block's first lane.
// Weight groups are read with one 64-byte load plus the few bytes past it (never beyond the
// group), and vpermt2w gathers the quants and the scales out of the interleaved blocks.

alignas(64) constexpr uint16_t kQ8_0PairQs[32] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,
                                                  12, 13, 14, 15, 16, 18, 19, 20, 21, 22, 23,
                                                  24, 25, 26, 27, 28, 29, 30, 31, 32, 33};
alignas(64) constexpr uint16_t kQ8_0PairD[32] = {0, 17};
alignas(64) constexpr uint16_t kQ4_0QuadQs[32] = {1,  2,  3,  4,  5,  6,  7,  8,  10, 11, 12,
                                                  13, 14, 15, 16, 17, 19, 20, 21, 22, 23, 24,
                                                  25, 26, 28, 29, 30, 31, 32, 33, 34, 35};
alignas(64) constexpr uint16_t kQ4_0QuadD[32] = {0, 9, 18, 27};
alignas(64) constexpr int32_t kLaneOfPair[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
alignas(64) constexpr int32_t kLaneOfQuad[16] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3};

inline __m512i load_index(const void* table) { return _mm512_load_si512(table); }

// v[idx[0..15]] for the low four floats of v
inline __m512 spread(__m128 v, __m512i idx) { return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(v)); }

// [v[idx[0..15]] in the lanes of `first`, zero elsewhere] for the low four ints of v
inline __m512i spread_first(__m128i v, __m512i idx, __mmask16 first) {
  return _mm512_maskz_permutexvar_epi32(first, idx, _mm512_castsi128_si512(v));
}

// The `bytes` bytes at p as words 0.. of (lo, hi): lo holds bytes 0..63, hi bytes 64.. (at most
// `tail` of them, always whole 4- or 8-byte reads inside the group).
template <int kBytes>
inline void load_group(const char* p, __m512i& lo, __m512i& hi) {
  if constexpr (kBytes >= 64) {
    lo = _mm512_loadu_si512(p);
    if constexpr (kBytes == 68) {
      hi = _mm512_castsi128_si512(_mm_cvtsi32_si128(*reinterpret_cast<const int*>(p + 64)));
    } else {
      static_assert(kBytes == 72);
      hi = _mm512_castsi128_si512(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 64)));
    }
  } else {
    lo = _mm512_maskz_loadu_epi8((uint64_t{1} << kBytes) - 1, p);
    hi = _mm512_setzero_si512();
  }
}

struct Q8_0Format {
  static constexpr int kGroup = 2;
  struct Weights {
    __m512i qs;     // [64] w + 128 of blocks j, j+1
    __m128 d;       // [4] fp16(w.d) of blocks j, j+1
  };
  struct Acts {
    __m512i qs;     // [64] a.qs of blocks j, j+1
    __m512 d;       // [16] a.d of each lane's block
    __m512i bias;   // [16] -128 * a.sum in lanes 0 and 8
  };

  template <int kBlocks>
  static Weights weights(const char* p) {
    __m512i lo, hi;
    load_group<kBlocks * 34>(p, lo, hi);
    const __m512i qs = _mm512_permutex2var_epi16(lo, load_index(kQ8_0PairQs), hi);
    const __m128i d = _mm512_castsi512_si128(_mm512_permutexvar_epi16(load_index(kQ8_0PairD), lo));
    return Weights{_mm512_xor_si512(qs, _mm512_set1_epi8(-128)), _mm_cvtph_ps(d)};
  }

  template <int kBlocks>
  static Acts acts(const BlockQ8Act* a) {
    const __m512i lanes = load_index(kLaneOfPair);
    const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[0].qs));
    if constexpr (kBlocks == 2) {
      const __m512i qs = _mm512_inserti64x4(_mm512_castsi256_si512(q0), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[1].qs)), 1);
      return Acts{qs, spread(_mm_setr_ps(a[0].d, a[1].d, 0.0f, 0.0f), lanes),
                  spread_first(_mm_setr_epi32(-128 * a[0].sum, -128 * a[1].sum, 0, 0), lanes, 0x0101)};
    } else {
      return Acts{_mm512_zextsi256_si512(q0), _mm512_set1_ps(a[0].d),
                  spread_first(_mm_setr_epi32(-128 * a[0].sum, 0, 0, 0), lanes, 0x0001)};
    }
  }

  static __m512 lane_scales(__m128 d) { return spread(d, load_index(kLaneOfPair)); }

  static __m512i dot(const Weights& w, const Acts& a) { return _mm512_dpbusd_epi32(a.bias, w.qs, a.qs); }
};

struct Q4_0Format {
  static constexpr int kGroup = 4;
  struct Weights {
    __m512i lo;     // [64] values 0..15 of blocks j..j+3 (16 each), as nibbles 0..15
    __m512i hi;     // [64] values 16..31 of the same blocks
    __m128 d;       // [4] fp16(w.d) of blocks j..j+3
  };
  struct Acts {
    __m512i lo;     // [64] a.qs[0..15] of blocks j..j+3
    __m512i hi;     // [64] a.qs[16..31]
    __m512 d;       // [16] a.d of each lane's block
    __m512i bias;   // [16] -8 * a.sum in lanes 0, 4, 8, 12
  };

  template <int kBlocks>
  static Weights weights(const char* p) {
    __m512i lo, hi;
    load_group<kBlocks * 18>(p, lo, hi);
    const __m512i q = _mm512_permutex2var_epi16(lo, load_index(kQ4_0QuadQs), hi);
    const __m128i d = _mm512_castsi512_si128(_mm512_permutexvar_epi16(load_index(kQ4_0QuadD), lo));
    const __m512i mask = _mm512_set1_epi8(15);
    return Weights{_mm512_and_si512(q, mask), _mm512_and_si512(_mm512_srli_epi16(q, 4), mask), _mm_cvtph_ps(d)};
  }

  template <int kBlocks>
  static Acts acts(const BlockQ8Act* a) {
    __m512i lo = _mm512_setzero_si512();
    __m512i hi = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int b = 0; b < kBlocks; ++b) {
      lo = insert_lane(lo, a[b].qs, b);
      hi = insert_lane(hi, a[b].qs + 16, b);
    }
    const __m128 d = _mm_setr_ps(a[0].d, kBlocks > 1 ? a[1].d : 0.0f, kBlocks > 2 ? a[2].d : 0.0f,
                                 kBlocks > 3 ? a[3].d : 0.0f);
    const __m128i sums = _mm_setr_epi32(a[0].sum, kBlocks > 1 ? a[1].sum : 0, kBlocks > 2 ? a[2].sum : 0,
                                        kBlocks > 3 ? a[3].sum : 0);
    const __m512i lanes = load_index(kLaneOfQuad);
    return Acts{lo, hi, spread(d, lanes), spread_first(_mm_slli_epi32(_mm_sub_epi32(_mm_setzero_si128(), sums), 3), lanes, 0x1111)};
  }

  static __m512 lane_scales(__m128 d) { return spread(d, load_index(kLaneOfQuad)); }

  static __m512i dot(const Weights& w, const Acts& a) {
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(a.bias, w.lo, a.lo), w.hi, a.hi);
  }

 private:
  static __m512i insert_lane(__m512i v, const int8_t* p, int lane) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    switch (lane) {
      case 0: return _mm512_inserti32x4(v, x, 0);
      case 1: return _mm512_inserti32x4(v, x, 1);
      case 2: return _mm512_inserti32x4(v, x, 2);
      default: return _mm512_inserti32x4(v, x, 3);
    }
  }
};

template <int R, int C>
inline __attribute__((always_inline)) void zero_tile(__m512 (&acc)[R][C]) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  }
}

template <int R, int C>
inline __attribute__((always_inline)) void store_tile(const Tile& t, __m512 (&acc)[R][C]) {
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) t.y[c * t.ld_y + r] = _mm512_reduce_add_ps(acc[r][c]);
  }
}

// Blocks [j, j + kBlocks) of every row and act of the tile.
template <class F, int R, int C, int kBlocks>
inline __attribute__((always_inline)) void quant_step(const Tile& t, int64_t j, __m512 (&acc)[R][C]) {
  constexpr size_t kBlockBytes = F::kGroup == 2 ? sizeof(BlockQ8_0) : sizeof(BlockQ4_0);
  typename F::Weights w[R];
  __m512 dw[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    w[r] = F::template weights<kBlocks>(t.w + r * t.w_stride + j * kBlockBytes);
    dw[r] = F::lane_scales(w[r].d);
  }
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) {
    const typename F::Acts a = F::template acts<kBlocks>(row_at<BlockQ8Act>(t.a, t.a_stride, c) + j);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 dot = _mm512_cvtepi32_ps(F::dot(w[r], a));
      acc[r][c] = _mm512_fmadd_ps(dot, _mm512_mul_ps(dw[r], a.d), acc[r][c]);
    }
  }
}

template <class F, int R, int C>
inline __attribute__((always_inline)) void quant_tail(const Tile& t, int64_t j, int64_t blocks,
                                                      __m512 (&acc)[R][C]) {
  switch (blocks - j) {
    case 1: return quant_step<F, R, C, 1>(t, j, acc);
    case 2: if constexpr (F::kGroup > 2) return quant_step<F, R, C, 2>(t, j, acc); break;
    case 3: if constexpr (F::kGroup > 3) return quant_step<F, R, C, 3>(t, j, acc); break;
    default: break;
  }
}

template <class F>
struct QuantKernel {
  static constexpr int kGemvRows = 4;
  static constexpr int kRows = 4;
  static constexpr int kActs = 4;

  template <int R, int C>
  static void tile(const Tile& t) {
    const int64_t blocks = t.n / 32;
    __m512 acc[R][C];
    zero_tile(acc);
    int64_t j = 0;
    for (; j + F::kGroup <= blocks; j += F::kGroup) quant_step<F, R, C, F::kGroup>(t, j, acc);
    quant_tail<F>(t, j, blocks, acc);
    store_tile(t, acc);
  }
};

// ---- float weights (F32 / F16 / BF16) x float activations ------------------------------------
//     acc[r][c] += float(w[r][k..k+15]) * a[c][k..k+15];  the last partial vector is masked.

struct F32Format {
  using Elem = float;
  static __m512 load(const Elem* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct F16Format {
  using Elem = uint16_t;
  static __m512 load(const Elem* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
};
struct Bf16Format {
  using Elem = uint16_t;
  static __m512 load(const Elem* p, __mmask16 m) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
  }
};

template <class F, int R, int C>
inline __attribute__((always_inline)) void float_step(const Tile& t, int64_t k, __mmask16 m,
                                                      __m512 (&acc)[R][C]) {
  __m512 w[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) w[r] = F::load(row_at<typename F::Elem>(t.w, t.w_stride, r) + k, m);
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) {
    const __m512 a = _mm512_maskz_loadu_ps(m, row_at<float>(t.a, t.a_stride, c) + k);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc[r][c] = _mm512_fmadd_ps(w[r], a, acc[r][c]);
  }
}

template <class F>
struct FloatKernel {
  static constexpr int kGemvRows = 4;
  static constexpr int kRows = 4;
  static constexpr int kActs = 6;

  template <int R, int C>
  static void tile(const Tile& t) {
    __m512 acc[R][C];
    zero_tile(acc);
    int64_t k = 0;
    for (; k + 16 <= t.n; k += 16) float_step<F, R, C>(t, k, 0xFFFF, acc);
    if (k < t.n) float_step<F, R, C>(t, k, static_cast<__mmask16>((1u << (t.n - k)) - 1), acc);
    store_tile(t, acc);
  }
};

// ---- entry points ------------------------------------------------------------------------------

float vec_dot(GgmlType weight_type, const void* w_row, const void* act_row, int64_t n) {
  switch (weight_type) {
    case GgmlType::F32: return dot_one<FloatKernel<F32Format>>(w_row, act_row, n);
    case GgmlType::F16: return dot_one<FloatKernel<F16Format>>(w_row, act_row, n);
    case GgmlType::BF16: return dot_one<FloatKernel<Bf16Format>>(w_row, act_row, n);
    case GgmlType::Q8_0: return dot_one<QuantKernel<Q8_0Format>>(w_row, act_row, n);
    case GgmlType::Q4_0: return dot_one<QuantKernel<Q4_0Format>>(w_row, act_row, n);
    default: KVDESK_ASSERT(!"vec_dot: type is not computable");
  }
  return 0.0f;
}

void matmul_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  switch (args.weight_type) {
    case GgmlType::F32: return matmul_tiled<FloatKernel<F32Format>>(args, row_begin, row_end);
    case GgmlType::F16: return matmul_tiled<FloatKernel<F16Format>>(args, row_begin, row_end);
    case GgmlType::BF16: return matmul_tiled<FloatKernel<Bf16Format>>(args, row_begin, row_end);
    case GgmlType::Q8_0: return matmul_tiled<QuantKernel<Q8_0Format>>(args, row_begin, row_end);
    case GgmlType::Q4_0: return matmul_tiled<QuantKernel<Q4_0Format>>(args, row_begin, row_end);
    default: KVDESK_ASSERT(!"matmul_rows: type is not computable");
  }
}

}  // namespace

const IsaKernels kAvx512Kernels = {&prepare_act_row, &vec_dot, &matmul_rows};

}  // namespace kvdesk
