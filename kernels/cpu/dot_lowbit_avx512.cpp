// AVX-512 VNNI kernels for the low-bit super-block types Q2_K, Q3_K and IQ4_XS against Q8Act
// rows. A step is 64 values in kParts = 1 zmm (Q2_K, Q3_K: act blocks 2q, 2q + 1 in the two
// 256-bit halves) or 128 values in kParts = 2 zmm (IQ4_XS: act blocks 4q..4q+3, one per
// 128-bit lane, their values 0-15 in the first zmm and 16-31 in the second, the layout of
// IQ4_XS's 64 index bytes as low and high nibbles). Per int32 lane i of step q:
//     dot[i]  = sum_{parts, 4 values} u8(w) * s8(a) - kOffset * sum_{parts, 4 values} s8(a)
//     acc[i] += float(dot[i]) * scale[i] * a.d        (scale of the lane's sub-block)
// and for Q2_K, whose mins change every 16 values, per lane and step:
//     min_acc[i] += min[i] * a.d * sum_{4 values} s8(a)
// u8(w) is the unsigned quant (Q3_K: q + 4, offset 4; Q2_K: q) or, for IQ4_XS, the table level
// plus 128 looked up with one byte shuffle (offset 128; VNNI does not saturate, so the 8-bit
// range is free). The act side is repacked once per matmul into that register image (StepAct).
// Built with AVX-512 flags, reached only through kAvx512Kernels after the CPU check.

#include <cstring>

#include "kernels/check.h"
#include "kernels/cpu/simd_prelude.h"
#include "kernels/cpu/dot_lowbit_avx512.h"
#include "kernels/cpu/pack_scratch.h"
#include "kernels/cpu/tile_driver.h"

namespace kvdesk {
namespace {

constexpr int kMaxSteps = 4;  // steps per 256-value super-block, at 64 values a step

// Lane permutations and per-word shift counts, indexed by step q.
struct StepIndex {
  alignas(64) int32_t quad[kMaxSteps][16];    // lanes 4k..4k+3 <- sub-block 4q + k
  alignas(64) int32_t lane_block[16];         // lanes 4k..4k+3 <- k
  alignas(64) int16_t pair_shift[2][32];      // [q % 2] words 0-15: 4 (q % 2), 16-31: 4 (q % 2) + 2
  // Q3_K: moves bit 2q (words 0-15) and 2q + 1 (words 16-31) of each hmask byte to bit 2: left
  // by 2, 1 for q = 0, right by 2q - 2, 2q - 1 after; bits leaking across bytes land outside
  // bit 2 and are masked off.
  alignas(64) int16_t hmask_shift[kMaxSteps][32];
  alignas(64) uint8_t iq4_u8[64];             // kIq4nlValues + 128 in every 128-bit lane
  // IQ4_XS tile decode, word 8r + s <- a word of the heads (words 4r .. 4r + 3: d, scales_h,
  // scales_l) of row r: its d; its scales_h, then shifted right by 2s; the scales_l word holding
  // the nibble of sub-block s (byte s / 2, nibble s % 2), then shifted right by 4 (s % 4).
  alignas(64) int16_t iq4_d[32];
  alignas(64) int16_t iq4_scales_h[32];
  alignas(64) int16_t iq4_high_shift[32];
  alignas(64) int16_t iq4_scales_l[32];
  alignas(64) int16_t iq4_low_shift[32];
  constexpr StepIndex()
      : quad(), lane_block(), pair_shift(), hmask_shift(), iq4_u8(), iq4_d(), iq4_scales_h(), iq4_high_shift(),
        iq4_scales_l(), iq4_low_shift() {
    for (int i = 0; i < 16; ++i) lane_block[i] = i / 4;
    for (int q = 0; q < kMaxSteps; ++q) {
      for (int i = 0; i < 16; ++i) quad[q][i] = 4 * q + i / 4;
      for (int i = 0; i < 32; ++i) {
        const int bit = 2 * q + i / 16;
        hmask_shift[q][i] = static_cast<int16_t>(q == 0 ? 2 - bit : bit - 2);
      }
    }
    for (int odd = 0; odd < 2; ++odd) {
      for (int i = 0; i < 32; ++i) pair_shift[odd][i] = static_cast<int16_t>(4 * odd + 2 * (i / 16));
    }
    for (int i = 0; i < 64; ++i) iq4_u8[i] = static_cast<uint8_t>(kIq4nlValues[i % 16] + 128);
    for (int i = 0; i < 32; ++i) {
      const int r = i / 8;
      const int sub_block = i % 8;
      iq4_d[i] = static_cast<int16_t>(4 * r);
      iq4_scales_h[i] = static_cast<int16_t>(4 * r + 1);
      iq4_high_shift[i] = static_cast<int16_t>(2 * sub_block);
      iq4_scales_l[i] = static_cast<int16_t>(4 * r + 2 + sub_block / 4);
      iq4_low_shift[i] = static_cast<int16_t>(4 * (sub_block % 4));
    }
  }
};
constexpr StepIndex kIndex;

ALWAYS_INLINE __m512i load_index(const void* p) { return _mm512_load_si512(p); }

// 16 bytes -> 16 floats, mul * byte + add
ALWAYS_INLINE __m512 bytes_to_floats(__m128i bytes, __m512 mul, __m512 add) {
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes)), mul, add);
}

// Step q of a Q2_K / Q3_K block: values 64q..64q+63 are quarters k = 2 (q % 2), k + 1 of half
// h = q / 2, whose bit pairs sit at bits 2k of qs[32h + l] (low 256-bit half) and 2k + 2 (high).
ALWAYS_INLINE __m512i step_bit_pairs(const uint8_t* qs, int q) {
  const __m512i shifted = _mm512_srlv_epi16(broadcast_256(qs + 32 * (q / 2)), load_index(kIndex.pair_shift[q % 2]));
  return _mm512_and_si512(shifted, _mm512_set1_epi8(3));
}

// ---- formats ----------------------------------------------------------------------------------
// F::Block, F::kParts, F::kOffset, F::kLaneMins; F::Decoded F::decode(block) once per block and
// row (or F::decode_tile<R>(blocks, decoded) for all R rows of a tile at once); F::quants(block,
// decoded, q) -> Quants<kParts> ([64] u8 per part); F::scale(decoded, q) -> [16] lane scales;
// F::lane_mins(decoded, q) -> [16] lane mins (kLaneMins only).

template <int kParts>
struct Quants {
  __m512i part[kParts];  // [64] u8 each
};

struct Q2_KFormat {
  using Block = BlockQ2_K;
  static constexpr int kParts = 1;
  static constexpr int kOffset = 0;
  static constexpr bool kLaneMins = true;
  struct Decoded {
    __m512 scale;  // [16] d * (scales[i] & 15)
    __m512 min;    // [16] -dmin * (scales[i] >> 4)
  };
  ALWAYS_INLINE static Decoded decode(const Block& b) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    const __m128i low4 = _mm_set1_epi8(15);
    const __m512 zero = _mm512_setzero_ps();
    return Decoded{bytes_to_floats(_mm_and_si128(packed, low4), _mm512_set1_ps(_cvtsh_ss(b.d)), zero),
                   bytes_to_floats(_mm_and_si128(_mm_srli_epi16(packed, 4), low4), _mm512_set1_ps(-_cvtsh_ss(b.dmin)),
                                   zero)};
  }
  ALWAYS_INLINE static Quants<1> quants(const Block& b, const Decoded&, int q) { return {{step_bit_pairs(b.qs, q)}}; }
  ALWAYS_INLINE static __m512 scale(const Decoded& d, int q) {
    return _mm512_permutexvar_ps(load_index(kIndex.quad[q]), d.scale);
  }
  ALWAYS_INLINE static __m512 lane_mins(const Decoded& d, int q) {
    return _mm512_permutexvar_ps(load_index(kIndex.quad[q]), d.min);
  }
};

struct Q3_KFormat {
  using Block = BlockQ3_K;
  static constexpr int kParts = 1;
  static constexpr int kOffset = 4;
  static constexpr bool kLaneMins = false;
  struct Decoded {
    __m512 scale;   // [16] d * (sc[i] - 32)
    __m512i hmask;  // [64] hmask[0..31] in both halves
  };
  // The 12 packed bytes x -> sc[16] (q3_k_scale for all sixteen in one xmm): low 4 bits
  // x[0..7] & 15, then x[0..7] >> 4; high 2 bits of sc[i] are bits 2 (i / 4) of x[8 + i % 4]:
  // x[8..11] repeated 4 times, words shifted right by 0, 0, 2, 2, 4, 4, 6, 6.
  ALWAYS_INLINE static Decoded decode(const Block& b) {
    const __m128i x = _mm_maskz_loadu_epi8(0x0FFF, b.scales);  // 12 bytes, no read past them
    const __m128i low = _mm_and_si128(_mm_unpacklo_epi64(x, _mm_srli_epi16(x, 4)), _mm_set1_epi8(15));
    const __m128i top_src = _mm_shuffle_epi8(x, _mm_setr_epi8(8, 9, 10, 11, 8, 9, 10, 11, 8, 9, 10, 11, 8, 9, 10, 11));
    const __m128i top = _mm_srlv_epi16(top_src, _mm_setr_epi16(0, 0, 2, 2, 4, 4, 6, 6));
    const __m128i sc = _mm_ternarylogic_epi32(low, _mm_slli_epi16(top, 4), _mm_set1_epi8(0x30), 0xF8);  // a | (b & 0x30)
    const float d = _cvtsh_ss(b.d);
    return Decoded{bytes_to_floats(sc, _mm512_set1_ps(d), _mm512_set1_ps(-32.0f * d)), broadcast_256(b.hmask)};
  }
  // q + 4 in 0..7: the bit pair | 4 * (bit 2q of hmask[l] in the low half, 2q + 1 in the high)
  ALWAYS_INLINE static Quants<1> quants(const Block& b, const Decoded& d, int q) {
    const __m512i shift = load_index(kIndex.hmask_shift[q]);
    const __m512i high = q == 0 ? _mm512_sllv_epi16(d.hmask, shift) : _mm512_srlv_epi16(d.hmask, shift);
    return {{_mm512_ternarylogic_epi32(step_bit_pairs(b.qs, q), high, _mm512_set1_epi8(4), 0xF8)}};  // a | (b & 4)
  }
  ALWAYS_INLINE static __m512 scale(const Decoded& d, int q) {
    return _mm512_permutexvar_ps(load_index(kIndex.quad[q]), d.scale);
  }
};

struct IQ4_XSFormat {
  using Block = BlockIQ4_XS;
  static constexpr int kParts = 2;
  static constexpr int kOffset = 128;
  static constexpr bool kLaneMins = false;
  struct Decoded {
    __m512 scale;  // [16] lanes 0-7: d * (ls[s] - 32)
  };
  // ls[s] = (nibble s of scales_l) | (bits 2s, 2s + 1 of scales_h) << 4 for the tile's R <= 4
  // rows at once: the rows' 8-byte heads (d, scales_h, scales_l) in one register, word 8r + s of
  // the result sub-block s of row r; then d * (ls - 32) as floats, two rows a zmm (lanes 8-15
  // moved down for the odd row).
  template <int R>
  ALWAYS_INLINE static void decode_tile(const Block* (&blocks)[R], Decoded (&dec)[R]) {
    static_assert(R <= 4);
    int64_t head[4] = {};
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) std::memcpy(&head[r], blocks[r], sizeof(head[r]));
    const __m512i heads = _mm512_zextsi256_si512(_mm256_set_epi64x(head[3], head[2], head[1], head[0]));
    const __m512i low = _mm512_srlv_epi16(_mm512_permutexvar_epi16(load_index(kIndex.iq4_scales_l), heads),
                                          load_index(kIndex.iq4_low_shift));
    const __m512i high = _mm512_srlv_epi16(_mm512_permutexvar_epi16(load_index(kIndex.iq4_scales_h), heads),
                                           load_index(kIndex.iq4_high_shift));
    // c ? a : b: the low 4 bits from the scales_l nibble, the rest from scales_h
    const __m512i merged = _mm512_ternarylogic_epi32(low, _mm512_slli_epi16(high, 4), _mm512_set1_epi16(15), 0xE4);
    const __m512i ls = _mm512_sub_epi16(_mm512_and_si512(merged, _mm512_set1_epi16(63)), _mm512_set1_epi16(32));
    const __m512i d = _mm512_permutexvar_epi16(load_index(kIndex.iq4_d), heads);
#pragma GCC unroll 2
    for (int pair = 0; pair < (R + 1) / 2; ++pair) {
      const __m256i pair_ls = pair == 0 ? _mm512_castsi512_si256(ls) : _mm512_extracti64x4_epi64(ls, 1);
      const __m256i pair_d = pair == 0 ? _mm512_castsi512_si256(d) : _mm512_extracti64x4_epi64(d, 1);
      const __m512 scales = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(pair_ls)), _mm512_cvtph_ps(pair_d));
      dec[2 * pair].scale = scales;
      if (2 * pair + 1 < R) dec[2 * pair + 1].scale = _mm512_shuffle_f32x4(scales, scales, 0xEE);
    }
  }
  // Sub-blocks 4q..4q+3 are qs bytes 64q..64q+63, 16 per 128-bit lane: low nibbles (values
  // 0-15) make part 0, high nibbles (16-31) part 1, each through the table.
  ALWAYS_INLINE static Quants<2> quants(const Block& b, const Decoded&, int q) {
    const __m512i bytes = _mm512_loadu_si512(b.qs + 64 * q);
    const __m512i low4 = _mm512_set1_epi8(15);
    const __m512i table = load_index(kIndex.iq4_u8);
    return {{_mm512_shuffle_epi8(table, _mm512_and_si512(bytes, low4)),
             _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(bytes, 4), low4))}};
  }
  ALWAYS_INLINE static __m512 scale(const Decoded& d, int q) {
    return _mm512_permutexvar_ps(load_index(kIndex.quad[q]), d.scale);
  }
};

// ---- act side ---------------------------------------------------------------------------------

// The act side of one step, as F::kParts says (see the top of the file).
template <int kParts>
struct StepAct {
  __m512i qs[kParts];  // [64] s8 each
  __m512 d;            // [16] a.d of the lane's block
  __m512i bias;        // [16] -kOffset * (sum of the lane's 4 values over the parts)
  __m512 lane_sums;    // [16] a.d * (sum of the lane's 4 values); kLaneMins only
};
static_assert(sizeof(StepAct<1>) % 64 == 0 && sizeof(StepAct<2>) % 64 == 0);

// A function-local thread_local rather than a thread_local variable template: GCC 12 does not
// run the destructors of a variable template's thread_local instances at thread exit (ASan saw
// every worker thread's panel leak).
template <int kParts>
PackScratch<StepAct<kParts>>& step_scratch() {
  thread_local PackScratch<StepAct<kParts>> scratch;
  return scratch;
}

// 16 bytes at p into 128-bit lane kLane of v
template <int kLane>
ALWAYS_INLINE __m512i insert_lane(__m512i v, const int8_t* p) {
  return _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), kLane);
}

// The step starting at act block a[0]: 2 blocks (kParts 1) or 4 (kParts 2).
template <class F>
ALWAYS_INLINE StepAct<F::kParts> step_act(const BlockQ8Act* a) {
  StepAct<F::kParts> out;
  if constexpr (F::kParts == 1) {
    out.qs[0] = _mm512_inserti64x4(_mm512_castsi256_si512(load_256(a[0].qs)), load_256(a[1].qs), 1);
    out.d = _mm512_insertf32x8(_mm512_set1_ps(a[0].d), _mm256_set1_ps(a[1].d), 1);
  } else {
    for (int part = 0; part < 2; ++part) {
      __m512i v = insert_lane<0>(_mm512_setzero_si512(), a[0].qs + 16 * part);
      v = insert_lane<1>(v, a[1].qs + 16 * part);
      v = insert_lane<2>(v, a[2].qs + 16 * part);
      out.qs[part] = insert_lane<3>(v, a[3].qs + 16 * part);
    }
    out.d = _mm512_permutexvar_ps(load_index(kIndex.lane_block), _mm512_castps128_ps512(_mm_setr_ps(a[0].d, a[1].d, a[2].d, a[3].d)));
  }
  __m512i sums = _mm512_setzero_si512();  // [16] sum of the lane's values
  for (int part = 0; part < F::kParts; ++part) sums = _mm512_dpbusd_epi32(sums, _mm512_set1_epi8(1), out.qs[part]);
  out.bias = _mm512_mullo_epi32(sums, _mm512_set1_epi32(-F::kOffset));
  out.lane_sums = _mm512_mul_ps(_mm512_cvtepi32_ps(sums), out.d);
  return out;
}

// Q8Act rows [first, first + count) -> [count][steps] StepAct.
template <class F>
ActPanel pack_step_acts(const MatmulArgs& args, size_t a_stride, int64_t first, int count) {
  constexpr int kStepBlocks = 2 * F::kParts;
  const int64_t steps = args.n / (32 * kStepBlocks);
  StepAct<F::kParts>* out = step_scratch<F::kParts>().get(static_cast<size_t>(steps * count));
  const char* acts = static_cast<const char*>(args.acts) + static_cast<size_t>(first) * a_stride;
  for (int c = 0; c < count; ++c) {
    const BlockQ8Act* a = row_at<BlockQ8Act>(acts, a_stride, c);
    for (int64_t i = 0; i < steps; ++i) out[c * steps + i] = step_act<F>(a + kStepBlocks * i);
  }
  return ActPanel{reinterpret_cast<const char*>(out), static_cast<size_t>(steps) * sizeof(StepAct<F::kParts>)};
}

// The panel is re-read for every weight tile; non-temporal-hint loads keep the hardware
// prefetchers on the weight streams (see dot_avx512.cpp's load_packed). Parts F does not use
// stay unread.
template <class F>
ALWAYS_INLINE StepAct<F::kParts> load_step(const StepAct<F::kParts>& p) {
  auto load = [](const void* v) { return _mm512_stream_load_si512(const_cast<void*>(v)); };
  StepAct<F::kParts> a;
  for (int part = 0; part < F::kParts; ++part) a.qs[part] = load(&p.qs[part]);
  a.d = _mm512_castsi512_ps(load(&p.d));
  a.bias = F::kOffset != 0 ? load(&p.bias) : _mm512_setzero_si512();
  a.lane_sums = F::kLaneMins ? _mm512_castsi512_ps(load(&p.lane_sums)) : _mm512_setzero_ps();
  return a;
}

// ---- micro-kernel -----------------------------------------------------------------------------

// Super-block j of every row of the tile against its packed act steps.
template <class F, int R, int C>
ALWAYS_INLINE void lowbit_super(const Tile& t, int64_t j, __m512 (&acc)[R][C], __m512 (&min_acc)[R][C]) {
  constexpr int kSteps = kMaxSteps / F::kParts;
  const typename F::Block* blocks[R];
  typename F::Decoded dec[R];
  decode_rows<F>(t, j, blocks, dec);
  if constexpr (C == 1) prefetch_streams<R>(t, j * sizeof(typename F::Block), sizeof(typename F::Block));
#pragma GCC unroll 4
  for (int q = 0; q < kSteps; ++q) {
    Quants<F::kParts> w[R];
    __m512 ws[R];
    __m512 mins[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      w[r] = F::quants(*blocks[r], dec[r], q);
      ws[r] = F::scale(dec[r], q);
      if constexpr (F::kLaneMins) mins[r] = F::lane_mins(dec[r], q);
    }
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const StepAct<F::kParts> a = load_step<F>(row_at<StepAct<F::kParts>>(t.a, t.a_stride, c)[kSteps * j + q]);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        __m512i idot = a.bias;
#pragma GCC unroll 2
        for (int part = 0; part < F::kParts; ++part) idot = _mm512_dpbusd_epi32(idot, w[r].part[part], a.qs[part]);
        acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(idot), _mm512_mul_ps(ws[r], a.d), acc[r][c]);
        if constexpr (F::kLaneMins) min_acc[r][c] = _mm512_fmadd_ps(mins[r], a.lane_sums, min_acc[r][c]);
      }
    }
  }
}

template <class F>
struct LowbitKernel {
  static constexpr int kGemvRows = 4;
  static constexpr int kRows = 4;
  // As many acts as keep the accumulators, quants and scales in the 32 zmm registers (lane-min
  // formats carry a second accumulator per row and act).
  static constexpr int kActs = F::kLaneMins ? 2 : 4;

  static ActPanel pack_acts(const MatmulArgs& args, size_t a_stride, int64_t first, int count) {
    return pack_step_acts<F>(args, a_stride, first, count);
  }

  template <int R, int C>
  static void tile(const Tile& t) {
    __m512 acc[R][C];
    __m512 min_acc[R][C];
    zero_tile(acc);
    zero_tile(min_acc);
    for (int64_t j = 0; j < t.n / kQK_K; ++j) lowbit_super<F, R, C>(t, j, acc, min_acc);
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        t.y[c * t.ld_y + r * t.y_row_stride] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][c], min_acc[r][c]));
      }
    }
  }
};

using LowbitTable = KernelTable<Serves<GgmlType::Q2_K, LowbitKernel<Q2_KFormat>>,
                                Serves<GgmlType::Q3_K, LowbitKernel<Q3_KFormat>>,
                                Serves<GgmlType::IQ4_XS, LowbitKernel<IQ4_XSFormat>>>;

}  // namespace

const LowbitKernels kAvx512LowbitKernels = {&LowbitTable::vec_dot, &LowbitTable::matmul_rows};

}  // namespace kvdesk
