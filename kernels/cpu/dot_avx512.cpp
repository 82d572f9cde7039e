// AVX-512 (F/BW/VL/DQ/VNNI) kernels: Q8Act quantization, dots and tiled matmul for every
// computable weight type (the K-quants handed on to dot_kquant_avx512.cpp). Integer blocks go
// four per step through vpdpbusd, floats through FMA.
// Built with AVX-512 flags, reached only through kAvx512Kernels after the CPU check.

#include <cstdlib>
#include <cstring>

#include "kernels/check.h"
#include "kernels/cpu/simd_prelude.h"
#include "kernels/cpu/dot_isa.h"
#include "kernels/cpu/dot_subblock.h"
#include "kernels/cpu/dot_lowbit_avx512.h"
#include "kernels/cpu/level_index_format.h"
#include "kernels/cpu/pack_scratch.h"
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
  // The sums add the stored (saturated) codes: the same as the rounded values for finite x,
  // and no int32 overflow from the INT_MIN a NaN converts to.
  const __m128i q0 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(x0, id)));
  const __m128i q1 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(x1, id)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y.qs), q0);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y.qs + 16), q1);
  y.d = d;
  const int32_t low_sum = _mm512_reduce_add_epi32(_mm512_cvtepi8_epi32(q0));
  y.low_sum = static_cast<int16_t>(low_sum);
  y.sum = static_cast<int16_t>(low_sum + _mm512_reduce_add_epi32(_mm512_cvtepi8_epi32(q1)));
}

void prepare_act_row(GgmlType weight_type, const float* x, void* act, int64_t n) {
  switch (act_format_for(weight_type)) {
    case ActFormat::F32: std::memcpy(act, x, static_cast<size_t>(n) * sizeof(float)); return;
    case ActFormat::Q8K: return kAvx512KQuantKernels.prepare_act_row(weight_type, x, act, n);
    case ActFormat::Q8Act: break;
  }
  KVDESK_ASSERT(n % kQ8ActBlockValues == 0);
  BlockQ8Act* y = static_cast<BlockQ8Act*>(act);
  for (int64_t b = 0; b < n / kQ8ActBlockValues; ++b) quantize_act_block(x + b * kQ8ActBlockValues, y[b]);
}

// ---- integer blocks: Q8_0 / Q4_0 / IQ4_NL weights x Q8Act -----------------------------------
//
// A step covers 4 blocks (fewer at the end of a row; missing blocks read as zeros), one per
// 128-bit lane: bytes 16b..16b+15 of the "lo" vectors hold values 0..15 of block b, the "hi"
// vectors values 16..31. Per 32-bit lane i (block b = i / 4) of the step:
//     dot[i]  = bias[i] + sum_{4 bytes} u8(w_lo) * s8(a_lo) + sum_{4 bytes} u8(w_hi) * s8(a_hi)
//     acc[i] += float(dot[i]) * fp16(w[b].d) * a[b].d
// with u8(w) = w + 128 (Q8_0; IQ4_NL with w its nibble's table level) or the nibble 0..15
// (Q4_0), the offset taken back through bias = -128 * a.sum (Q8_0, IQ4_NL) or -8 * a.sum (Q4_0)
// in the block's first lane.
// Weight blocks interleave a 2-byte scale with the quants, all at even offsets, so vpermt2w
// gathers quants and scales out of plain 64-byte loads that never reach past the 4 blocks.

constexpr int kStepBlocks = 4;

// vpermt2w word indices into 4 consecutive blocks of kStrideWords words each (d, then quants).
// An index past 63 wraps (only Q8_0's last 4 high words, which are patched from a third load).
template <int kStrideWords>
struct GatherIndex {
  alignas(64) uint16_t quants[32];       // [32] 128-bit lane b <- words 1..8 of block b
  alignas(64) uint16_t high_quants[32];  // [32] 128-bit lane b <- words 9..16 of block b
  alignas(64) uint16_t scales[32];       // [32] words 4b..4b+3 <- word 0 of block b (its fp16 d)
  constexpr GatherIndex() : quants(), high_quants(), scales() {
    for (int b = 0; b < 4; ++b) {
      for (int i = 0; i < 8; ++i) {
        quants[8 * b + i] = static_cast<uint16_t>(kStrideWords * b + 1 + i);
        high_quants[8 * b + i] = static_cast<uint16_t>((kStrideWords * b + 9 + i) % 64);
      }
      for (int i = 0; i < 4; ++i) scales[4 * b + i] = static_cast<uint16_t>(kStrideWords * b);
    }
  }
};
constexpr GatherIndex<sizeof(BlockQ8_0) / 2> kQ8_0Gather;
constexpr GatherIndex<sizeof(BlockQ4_0) / 2> kQ4_0Gather;
// Q8_0 high quant words 28..31 are group words 64..67: words 0..3 of the third load.
constexpr __mmask32 kQ8_0LastWords = 0xF0000000u;
alignas(64) constexpr int32_t kLaneBlock[16] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3};

ALWAYS_INLINE __m512i load_index(const void* table) { return _mm512_load_si512(table); }

// Bytes [kBegin, kEnd) of p as a zmm (zeros past kEnd); a plain load when all 64 are wanted.
template <int kBegin, int kEnd>
ALWAYS_INLINE __m512i load_bytes(const char* p) {
  constexpr int kCount = kEnd - kBegin < 64 ? kEnd - kBegin : 64;
  if constexpr (kCount <= 0) {
    return _mm512_setzero_si512();
  } else if constexpr (kCount == 64) {
    return _mm512_loadu_si512(p + kBegin);
  } else {
    return _mm512_maskz_loadu_epi8((uint64_t{1} << kCount) - 1, p + kBegin);
  }
}

// fp16 scales gathered into 16 words (one per int32 lane) -> 16 floats
ALWAYS_INLINE __m512 lane_scales(__m512i words) { return _mm512_cvtph_ps(_mm512_castsi512_si256(words)); }

struct QuantWeights {
  __m512i lo;      // [64] u8 values 0..15 of each block
  __m512i hi;      // [64] u8 values 16..31
  __m512 d;        // [16] fp16(w.d) of each lane's block
};

struct QuantActs {
  __m512i lo;      // [64] a.qs[0..15] of each block
  __m512i hi;      // [64] a.qs[16..31]
  __m512 d;        // [16] a.d of each lane's block
  __m512i bias;    // [16] -offset * a.sum in each block's first lane
};

struct Q8_0Format {
  using Block = BlockQ8_0;
  static constexpr int kOffset = 128;

  // 34-byte blocks, 136 bytes for four, read front to back as bytes 0..63, 64..127, 128..135
  // (streaming order matters: overlapping or backward loads cost a third of the bandwidth).
  // Every quant word but the last four sits in the first two loads; those four come from the
  // third with a masked word permute.
  template <int kBlocks>
  ALWAYS_INLINE static QuantWeights weights(const char* p) {
    constexpr int kBytes = kBlocks * static_cast<int>(sizeof(BlockQ8_0));
    const __m512i w0 = load_bytes<0, kBytes>(p);
    const __m512i w1 = load_bytes<64, kBytes>(p);
    __m512i w2 = _mm512_setzero_si512();
    if constexpr (kBytes > 128) {
      w2 = _mm512_castsi128_si512(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 128)));
    }
    const __m512i lo = _mm512_permutex2var_epi16(w0, load_index(kQ8_0Gather.quants), w1);
    __m512i hi = _mm512_permutex2var_epi16(w0, load_index(kQ8_0Gather.high_quants), w1);
    hi = _mm512_mask_permutexvar_epi16(hi, kQ8_0LastWords, load_index(kQ8_0Gather.high_quants), w2);
    const __m512i offset = _mm512_set1_epi8(-128);
    return QuantWeights{_mm512_xor_si512(lo, offset), _mm512_xor_si512(hi, offset),
                        lane_scales(_mm512_permutex2var_epi16(w0, load_index(kQ8_0Gather.scales), w1))};
  }
};

struct Q4_0Format {
  using Block = BlockQ4_0;
  static constexpr int kOffset = 8;

  // 18-byte blocks: all four fit in bytes 0..71; low nibbles are values 0..15, high 16..31.
  template <int kBlocks>
  ALWAYS_INLINE static QuantWeights weights(const char* p) {
    constexpr int kBytes = kBlocks * static_cast<int>(sizeof(BlockQ4_0));
    const __m512i w0 = load_bytes<0, kBytes>(p);
    __m512i w1 = _mm512_setzero_si512();
    if constexpr (kBytes > 64) {
      w1 = _mm512_castsi128_si512(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 64)));
    }
    const __m512i q = _mm512_permutex2var_epi16(w0, load_index(kQ4_0Gather.quants), w1);
    const __m512i mask = _mm512_set1_epi8(15);
    return QuantWeights{_mm512_and_si512(q, mask), _mm512_and_si512(_mm512_srli_epi16(q, 4), mask),
                        lane_scales(_mm512_permutexvar_epi16(load_index(kQ4_0Gather.scales), w0))};
  }
};

// IQ4_NL blocks have Q4_0's layout with nibbles indexing the level table: the nibbles become
// u8 levels + 128 with one byte shuffle each, the offset taken back through the bias.
struct IQ4_NLFormat {
  using Block = BlockIQ4_NL;
  static constexpr int kOffset = 128;
  static_assert(sizeof(BlockIQ4_NL) == sizeof(BlockQ4_0));

  template <int kBlocks>
  ALWAYS_INLINE static QuantWeights weights(const char* p) {
    const QuantWeights nibbles = Q4_0Format::weights<kBlocks>(p);
    const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
    const __m512i offset = _mm512_set1_epi8(-128);
    return QuantWeights{_mm512_xor_si512(_mm512_shuffle_epi8(table, nibbles.lo), offset),
                        _mm512_xor_si512(_mm512_shuffle_epi8(table, nibbles.hi), offset), nibbles.d};
  }
};

// 16 bytes at p into 128-bit lane kLane of v
template <int kLane>
ALWAYS_INLINE __m512i insert_lane(__m512i v, const int8_t* p) {
  return _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), kLane);
}

// The act side of a step over blocks a[0..kBlocks), in register layout.
template <class F, int kBlocks>
ALWAYS_INLINE QuantActs quant_acts(const BlockQ8Act* a) {
  __m512i lo = insert_lane<0>(_mm512_setzero_si512(), a[0].qs);
  __m512i hi = insert_lane<0>(_mm512_setzero_si512(), a[0].qs + 16);
  if constexpr (kBlocks > 1) lo = insert_lane<1>(lo, a[1].qs), hi = insert_lane<1>(hi, a[1].qs + 16);
  if constexpr (kBlocks > 2) lo = insert_lane<2>(lo, a[2].qs), hi = insert_lane<2>(hi, a[2].qs + 16);
  if constexpr (kBlocks > 3) lo = insert_lane<3>(lo, a[3].qs), hi = insert_lane<3>(hi, a[3].qs + 16);
  const auto d = [a](int b) { return b < kBlocks ? a[b].d : 0.0f; };
  const auto bias = [a](int b) { return b < kBlocks ? -F::kOffset * a[b].sum : 0; };
  const __m512i lanes = load_index(kLaneBlock);
  const __m512 dv = _mm512_permutexvar_ps(lanes, _mm512_castps128_ps512(_mm_setr_ps(d(0), d(1), d(2), d(3))));
  const __m512i bv = _mm512_maskz_permutexvar_epi32(
      0x1111, lanes, _mm512_castsi128_si512(_mm_setr_epi32(bias(0), bias(1), bias(2), bias(3))));
  return QuantActs{lo, hi, dv, bv};
}

// The panel is re-read from its start for every weight tile. Plain loads of it let the
// hardware prefetchers chase the panel instead of the weight streams (measured: a third of the
// GEMV bandwidth lost); loads with the non-temporal hint (vmovntdqa, an ordinary load on
// write-back memory) leave the prefetchers alone.
ALWAYS_INLINE QuantActs load_packed(const QuantActs& p) {
  auto load = [](const void* v) { return _mm512_stream_load_si512(const_cast<void*>(v)); };
  return QuantActs{load(&p.lo), load(&p.hi), _mm512_castsi512_ps(load(&p.d)), load(&p.bias)};
}

// Blocks [j, j + kBlocks) of every row of the tile against the packed acts of that step.
template <class F, int R, int C, int kBlocks>
ALWAYS_INLINE void quant_step(const Tile& t, int64_t j, __m512 (&acc)[R][C]) {
  constexpr size_t kBlockBytes = sizeof(typename F::Block);
  QuantWeights w[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) w[r] = F::template weights<kBlocks>(t.w + r * t.w_stride + j * kBlockBytes);
  if constexpr (C == 1) prefetch_streams<R>(t, j * kBlockBytes, kBlocks * kBlockBytes);
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) {
    const QuantActs a = load_packed(row_at<QuantActs>(t.a, t.a_stride, c)[j / kStepBlocks]);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512i dot = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(a.bias, w[r].lo, a.lo), w[r].hi, a.hi);
      acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(w[r].d, a.d), acc[r][c]);
    }
  }
}

template <class F, int R, int C>
ALWAYS_INLINE void quant_tail(const Tile& t, int64_t j, int64_t blocks, __m512 (&acc)[R][C]) {
  switch (blocks - j) {
    case 1: return quant_step<F, R, C, 1>(t, j, acc);
    case 2: return quant_step<F, R, C, 2>(t, j, acc);
    case 3: return quant_step<F, R, C, 3>(t, j, acc);
    default: return;
  }
}

thread_local PackScratch<QuantActs> pack_scratch;

// Q8Act rows [first, first + count) -> [count][steps] QuantActs, the register image each step
// loads, so the lane shuffles are paid once per act instead of once per weight row tile.
template <class F>
ActPanel pack_quant_acts(const MatmulArgs& args, size_t a_stride, int64_t first, int count) {
  const int64_t blocks = args.n / 32;
  const int64_t steps = (blocks + kStepBlocks - 1) / kStepBlocks;
  QuantActs* out = pack_scratch.get(static_cast<size_t>(steps * count));
  const char* acts = static_cast<const char*>(args.acts) + static_cast<size_t>(first) * a_stride;
  for (int c = 0; c < count; ++c) {
    const BlockQ8Act* a = row_at<BlockQ8Act>(acts, a_stride, c);
    QuantActs* row = out + c * steps;
    int64_t j = 0;
    for (; j + kStepBlocks <= blocks; j += kStepBlocks) row[j / kStepBlocks] = quant_acts<F, kStepBlocks>(a + j);
    switch (blocks - j) {
      case 1: row[j / kStepBlocks] = quant_acts<F, 1>(a + j); break;
      case 2: row[j / kStepBlocks] = quant_acts<F, 2>(a + j); break;
      case 3: row[j / kStepBlocks] = quant_acts<F, 3>(a + j); break;
      default: break;
    }
  }
  return ActPanel{reinterpret_cast<const char*>(out), static_cast<size_t>(steps) * sizeof(QuantActs)};
}

template <class F>
struct QuantKernel {
  static constexpr int kGemvRows = 4;
  static constexpr int kRows = 4;
  static constexpr int kActs = 4;

  static ActPanel pack_acts(const MatmulArgs& args, size_t a_stride, int64_t first, int count) {
    return pack_quant_acts<F>(args, a_stride, first, count);
  }

  template <int R, int C>
  static void tile(const Tile& t) {
    const int64_t blocks = t.n / 32;
    __m512 acc[R][C];
    zero_tile(acc);
    int64_t j = 0;
    for (; j + kStepBlocks <= blocks; j += kStepBlocks) quant_step<F, R, C, kStepBlocks>(t, j, acc);
    quant_tail<F>(t, j, blocks, acc);
    store_tile(t, acc);
  }
};

// ---- float weights (F32 / F16 / BF16) x float activations ------------------------------------
//     acc[r][c] += float(w[r][k..k+15]) * a[c][k..k+15];  the last partial vector is masked.

struct F32Format {
  using Elem = float;
  ALWAYS_INLINE static __m512 load(const Elem* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct F16Format {
  using Elem = uint16_t;
  ALWAYS_INLINE static __m512 load(const Elem* p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  }
};
struct Bf16Format {
  using Elem = uint16_t;
  ALWAYS_INLINE static __m512 load(const Elem* p, __mmask16 m) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
  }
};

template <class F, int R, int C>
ALWAYS_INLINE void float_step(const Tile& t, int64_t k, __mmask16 m, __m512 (&acc)[R][C]) {
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
struct FloatKernel : UnpackedActs {
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

// ---- sub-block formats Q4_1, Q5_0, Q5_1 and MXFP4 x Q8Act: kernels/cpu/dot_subblock.h (the super-block
// types take full zmm steps: Q4_K, Q5_K and Q6_K in kernels/cpu/dot_kquant_avx512.cpp, Q2_K,
// Q3_K and IQ4_XS in dot_lowbit_avx512.cpp)

// u8 x s8 -> int32 lanes of 4 products in one VNNI instruction (ymm form, AVX512-VL).
struct VnniDot {
  ALWAYS_INLINE static __m256i dot(__m256i acc, __m256i u8, __m256i s8) { return _mm256_dpbusd_epi32(acc, u8, s8); }
};

template <class F>
using SubBlock = SubBlockKernel<F, VnniDot, 4, 4, 4>;

// ---- entry points ------------------------------------------------------------------------------

// The 256-value low-bit types go to dot_lowbit_avx512.cpp, the K-quants to dot_kquant_avx512.cpp.
using Avx512Table = KernelTable<
    Serves<GgmlType::F32, FloatKernel<F32Format>>, Serves<GgmlType::F16, FloatKernel<F16Format>>,
    Serves<GgmlType::BF16, FloatKernel<Bf16Format>>, Serves<GgmlType::Q8_0, QuantKernel<Q8_0Format>>,
    Serves<GgmlType::Q4_0, QuantKernel<Q4_0Format>>, Serves<GgmlType::Q4_1, SubBlock<Q4_1Format>>,
    Interleaved<GgmlType::Q4_1x8, &matmul_q4_1x8_avx2>,
    Serves<GgmlType::Q5_0, SubBlock<Q5_0Format>>, Interleaved<GgmlType::Q5_0x8, &matmul_q5_0x8_avx2>,
    Serves<GgmlType::Q5_1, SubBlock<Q5_1Format>>, Interleaved<GgmlType::Q5_1x8, &matmul_q5_1x8_avx2>,
    Interleaved<GgmlType::Q4_0x8, &matmul_q4_0x8_avx512>, Interleaved<GgmlType::Q4_Kx8, &matmul_q4_kx8_avx2>,
    Serves<GgmlType::IQ4_NL, QuantKernel<IQ4_NLFormat>>, Interleaved<GgmlType::IQ4_NLx8, &matmul_iq4_nlx8_avx2>,
    HandsOff<GgmlType::Q2_K, kAvx512LowbitKernels>, Interleaved<GgmlType::Q2_Kx8, &matmul_q2_kx8_avx2>,
    HandsOff<GgmlType::Q3_K, kAvx512LowbitKernels>, Interleaved<GgmlType::Q3_Kx8, &matmul_q3_kx8_avx2>,
    HandsOff<GgmlType::IQ4_XS, kAvx512LowbitKernels>,
    HandsOff<GgmlType::Q4_K, kAvx512KQuantKernels>, HandsOff<GgmlType::Q5_K, kAvx512KQuantKernels>,
    Interleaved<GgmlType::Q5_Kx8, &matmul_q5_kx8_avx2>,
    HandsOff<GgmlType::Q6_K, kAvx512KQuantKernels>, Interleaved<GgmlType::Q6_Kx8, &matmul_q6_kx8_avx2>,
    Interleaved<GgmlType::Q8_0x8, &matmul_q8_0x8_avx512>, Interleaved<GgmlType::IQ4_XSx8, &matmul_iq4_xsx8_avx2>,
    Serves<GgmlType::MXFP4, SubBlock<MXFP4Format>>, Interleaved<GgmlType::MXFP4x8, &matmul_mxfp4x8_avx2>>;

}  // namespace

const IsaKernels kAvx512Kernels = {&prepare_act_row, &Avx512Table::vec_dot, &Avx512Table::matmul_rows};

}  // namespace kvdesk
