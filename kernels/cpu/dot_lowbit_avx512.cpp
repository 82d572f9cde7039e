// AVX-512 VNNI kernels for the low-bit super-block types Q2_K, Q3_K and IQ4_XS against Q8Act
// rows. A step is 64 consecutive values: act blocks 2q and 2q + 1 of the super-block in the
// two 256-bit halves of a zmm, so one vpdpbusd, one convert and one FMA cover both. Per int32
// lane i of step q of super-block j:
//     dot[i]  = sum_{4 values} u8(w) * s8(a) - kOffset * sum_{4 values} s8(a)
//     acc[i] += float(dot[i]) * scale[i] * a.d        (scale of the lane's sub-block)
// and for Q2_K, whose mins change every 16 values, per lane and step:
//     min_acc[i] += min[i] * a.d * sum_{4 values} s8(a)
// u8(w) is the unsigned quant (Q3_K: q + 4, offset 4; Q2_K: q) or, for IQ4_XS, the table level
// plus 128 looked up with one byte shuffle (offset 128; VNNI does not saturate, so the 8-bit
// range is free). IQ4_XS keeps each 16 index bytes' low nibbles (values 0-15) and high nibbles
// (16-31) in separate 128-bit lanes, [2q low, 2q + 1 low, 2q high, 2q + 1 high], and its act
// step is permuted to match (kInterleavedHalves). The act side is repacked once per matmul into that register image (StepAct).
// Built with AVX-512 flags, reached only through kAvx512Kernels after the CPU check.

// GCC 12's AVX-512 intrinsics trip -Wuninitialized once inlined (GCC PR 105593), as in
// dot_avx512.cpp.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstring>

#include "kernels/check.h"
#include "kernels/cpu/dot_lowbit_avx512.h"
#include "kernels/cpu/pack_scratch.h"
#include "kernels/cpu/tile_driver.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

namespace kvdesk {
namespace {

constexpr int kSteps = 4;  // 64-value steps per 256-value super-block

// Lane permutations and per-word shift counts, indexed by step q.
struct StepIndex {
  alignas(64) int32_t quad[kSteps][16];       // lanes 4k..4k+3 <- 16-value sub-block 4q + k
  alignas(64) int32_t halves[kSteps][16];     // lanes 0-3, 8-11 <- sub-block 2q; 4-7, 12-15 <- 2q + 1
  alignas(64) int16_t pair_shift[2][32];      // [q % 2] words 0-15: 4 (q % 2), 16-31: 4 (q % 2) + 2
  // Q3_K: moves bit 2q (words 0-15) and 2q + 1 (words 16-31) of each hmask byte to bit 2: left
  // by 2, 1 for q = 0, right by 2q - 2, 2q - 1 after; bits leaking across bytes land outside
  // bit 2 and are masked off.
  alignas(64) int16_t hmask_shift[kSteps][32];
  alignas(64) uint8_t iq4_u8[64];             // kIq4nlValues + 128 in every 128-bit lane
  constexpr StepIndex() : quad(), halves(), pair_shift(), hmask_shift(), iq4_u8() {
    for (int q = 0; q < kSteps; ++q) {
      for (int i = 0; i < 16; ++i) {
        quad[q][i] = 4 * q + i / 4;
        halves[q][i] = 2 * q + (i / 4) % 2;
      }
      for (int i = 0; i < 32; ++i) {
        const int bit = 2 * q + i / 16;
        hmask_shift[q][i] = static_cast<int16_t>(q == 0 ? 2 - bit : bit - 2);
      }
    }
    for (int odd = 0; odd < 2; ++odd) {
      for (int i = 0; i < 32; ++i) pair_shift[odd][i] = static_cast<int16_t>(4 * odd + 2 * (i / 16));
    }
    for (int i = 0; i < 64; ++i) iq4_u8[i] = static_cast<uint8_t>(kIq4nlValues[i % 16] + 128);
  }
};
constexpr StepIndex kIndex;

ALWAYS_INLINE __m512i load_index(const void* p) { return _mm512_load_si512(p); }
ALWAYS_INLINE __m256i load_256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
// 32 bytes at p into both 256-bit halves
ALWAYS_INLINE __m512i broadcast_256(const uint8_t* p) { return _mm512_broadcast_i64x4(load_256(p)); }

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
// F::Block, F::kOffset, F::kLaneMins, F::kInterleavedHalves; F::Decoded F::decode(block) once
// per block and row;
// F::quants(block, decoded, q) -> [64] u8; F::scale(decoded, q) -> [16] lane scales;
// F::lane_mins(decoded, q) -> [16] lane mins (kLaneMins only).

struct Q2_KFormat {
  using Block = BlockQ2_K;
  static constexpr int kOffset = 0;
  static constexpr bool kLaneMins = true;
  static constexpr bool kInterleavedHalves = false;
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
  ALWAYS_INLINE static __m512i quants(const Block& b, const Decoded&, int q) { return step_bit_pairs(b.qs, q); }
  ALWAYS_INLINE static __m512 scale(const Decoded& d, int q) {
    return _mm512_permutexvar_ps(load_index(kIndex.quad[q]), d.scale);
  }
  ALWAYS_INLINE static __m512 lane_mins(const Decoded& d, int q) {
    return _mm512_permutexvar_ps(load_index(kIndex.quad[q]), d.min);
  }
};

struct Q3_KFormat {
  using Block = BlockQ3_K;
  static constexpr int kOffset = 4;
  static constexpr bool kLaneMins = false;
  static constexpr bool kInterleavedHalves = false;
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
  ALWAYS_INLINE static __m512i quants(const Block& b, const Decoded& d, int q) {
    const __m512i shift = load_index(kIndex.hmask_shift[q]);
    const __m512i high = q == 0 ? _mm512_sllv_epi16(d.hmask, shift) : _mm512_srlv_epi16(d.hmask, shift);
    return _mm512_ternarylogic_epi32(step_bit_pairs(b.qs, q), high, _mm512_set1_epi8(4), 0xF8);  // a | (b & 4)
  }
  ALWAYS_INLINE static __m512 scale(const Decoded& d, int q) {
    return _mm512_permutexvar_ps(load_index(kIndex.quad[q]), d.scale);
  }
};

struct IQ4_XSFormat {
  using Block = BlockIQ4_XS;
  static constexpr int kOffset = 128;
  static constexpr bool kLaneMins = false;
  static constexpr bool kInterleavedHalves = true;
  struct Decoded {
    __m512 scale;  // [16] lanes 0-7: d * (ls[s] - 32)
  };
  // ls[s] = (nibble s of scales_l) | (bits 2s, 2s + 1 of scales_h) << 4, eight at once.
  ALWAYS_INLINE static Decoded decode(const Block& b) {
    uint32_t low_bits;
    std::memcpy(&low_bits, b.scales_l, sizeof(low_bits));
    const __m128i l = _mm_cvtsi32_si128(static_cast<int>(low_bits));
    const __m128i low4 = _mm_set1_epi8(15);
    const __m128i low = _mm_unpacklo_epi8(_mm_and_si128(l, low4), _mm_and_si128(_mm_srli_epi16(l, 4), low4));
    const __m128i high_words = _mm_and_si128(
        _mm_srlv_epi16(_mm_set1_epi16(static_cast<int16_t>(b.scales_h)), _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14)),
        _mm_set1_epi16(3));
    const __m128i ls = _mm_or_si128(low, _mm_slli_epi16(_mm_packus_epi16(high_words, _mm_setzero_si128()), 4));
    const float d = _cvtsh_ss(b.d);
    return Decoded{bytes_to_floats(ls, _mm512_set1_ps(d), _mm512_set1_ps(-32.0f * d))};
  }
  // Sub-blocks 2q, 2q + 1 are qs bytes 32q..32q+31, in both 256-bit halves; the high half
  // shifted down by 4 gives the high nibbles, then the table.
  ALWAYS_INLINE static __m512i quants(const Block& b, const Decoded&, int q) {
    const __m512i bytes = broadcast_256(b.qs + 32 * q);
    const __m512i nibbles = _mm512_and_si512(_mm512_mask_srli_epi16(bytes, 0xFFFF0000u, bytes, 4), _mm512_set1_epi8(15));
    return _mm512_shuffle_epi8(load_index(kIndex.iq4_u8), nibbles);
  }
  ALWAYS_INLINE static __m512 scale(const Decoded& d, int q) {
    return _mm512_permutexvar_ps(load_index(kIndex.halves[q]), d.scale);
  }
};

// ---- act side ---------------------------------------------------------------------------------

// The act side of one step: act blocks a[0] (low half) and a[1] (high half).
struct StepAct {
  __m512i qs;         // [64] s8
  __m512 d;           // [16] a.d of the lane's block
  __m512i bias;       // [16] -kOffset * (sum of the lane's 4 values)
  __m512 lane_sums;   // [16] a.d * (sum of the lane's 4 values); kLaneMins only
};
static_assert(sizeof(StepAct) % 64 == 0);

thread_local PackScratch<StepAct> step_scratch;

template <class F>
ALWAYS_INLINE StepAct step_act(const BlockQ8Act* a) {
  __m512i qs = _mm512_inserti64x4(_mm512_castsi256_si512(load_256(a[0].qs)), load_256(a[1].qs), 1);
  __m512 d = _mm512_insertf32x8(_mm512_set1_ps(a[0].d), _mm256_set1_ps(a[1].d), 1);
  if constexpr (F::kInterleavedHalves) {  // 128-bit lanes [a0 0-15, a0 16-31, a1 0-15, a1 16-31] -> 0, 2, 1, 3
    qs = _mm512_shuffle_i64x2(qs, qs, 0xD8);
    d = _mm512_shuffle_f32x4(d, d, 0xD8);
  }
  StepAct out{qs, d, _mm512_setzero_si512(), _mm512_setzero_ps()};
  if constexpr (F::kOffset != 0) {
    const __m512i offset = _mm512_set1_epi8(static_cast<char>(static_cast<uint8_t>(F::kOffset)));  // as u8
    out.bias = _mm512_sub_epi32(out.bias, _mm512_dpbusd_epi32(out.bias, offset, qs));
  }
  if constexpr (F::kLaneMins) {
    const __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), qs);
    out.lane_sums = _mm512_mul_ps(_mm512_cvtepi32_ps(sums), d);
  }
  return out;
}

// Q8Act rows [first, first + count) -> [count][n / 64] StepAct.
template <class F>
ActPanel pack_step_acts(const MatmulArgs& args, size_t a_stride, int64_t first, int count) {
  const int64_t steps = args.n / 64;
  StepAct* out = step_scratch.get(static_cast<size_t>(steps * count));
  const char* acts = static_cast<const char*>(args.acts) + static_cast<size_t>(first) * a_stride;
  for (int c = 0; c < count; ++c) {
    const BlockQ8Act* a = row_at<BlockQ8Act>(acts, a_stride, c);
    for (int64_t i = 0; i < steps; ++i) out[c * steps + i] = step_act<F>(a + 2 * i);
  }
  return ActPanel{reinterpret_cast<const char*>(out), static_cast<size_t>(steps) * sizeof(StepAct)};
}

// The panel is re-read for every weight tile; non-temporal-hint loads keep the hardware
// prefetchers on the weight streams (see dot_avx512.cpp's load_packed). Parts F does not use
// stay unread.
template <class F>
ALWAYS_INLINE StepAct load_step(const StepAct& p) {
  auto load = [](const void* v) { return _mm512_stream_load_si512(const_cast<void*>(v)); };
  StepAct a{load(&p.qs), _mm512_castsi512_ps(load(&p.d)), _mm512_setzero_si512(), _mm512_setzero_ps()};
  if constexpr (F::kOffset != 0) a.bias = load(&p.bias);
  if constexpr (F::kLaneMins) a.lane_sums = _mm512_castsi512_ps(load(&p.lane_sums));
  return a;
}

// ---- micro-kernel -----------------------------------------------------------------------------

// Super-block j of every row of the tile against its 4 packed act steps.
template <class F, int R, int C>
ALWAYS_INLINE void lowbit_super(const Tile& t, int64_t j, __m512 (&acc)[R][C], __m512 (&min_acc)[R][C]) {
  using Block = typename F::Block;
  const Block* blocks[R];
  typename F::Decoded dec[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    blocks[r] = &row_at<Block>(t.w, t.w_stride, r)[j];
    dec[r] = F::decode(*blocks[r]);
  }
#pragma GCC unroll 4
  for (int q = 0; q < kSteps; ++q) {
    __m512i w[R];
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
      const StepAct a = load_step<F>(row_at<StepAct>(t.a, t.a_stride, c)[kSteps * j + q]);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512 dot = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(a.bias, w[r], a.qs));
        acc[r][c] = _mm512_fmadd_ps(dot, _mm512_mul_ps(ws[r], a.d), acc[r][c]);
        if constexpr (F::kLaneMins) min_acc[r][c] = _mm512_fmadd_ps(mins[r], a.lane_sums, min_acc[r][c]);
      }
    }
  }
}

template <class F>
struct LowbitKernel {
  static constexpr int kGemvRows = 4;
  static constexpr int kRows = 4;
  static constexpr int kActs = 3;

  static ActPanel pack_acts(const MatmulArgs& args, size_t a_stride, int64_t first, int count) {
    return pack_step_acts<F>(args, a_stride, first, count);
  }

  template <int R, int C>
  static void tile(const Tile& t) {
    __m512 acc[R][C];
    __m512 min_acc[R][C];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps(), min_acc[r][c] = _mm512_setzero_ps();
    }
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

}  // namespace

float lowbit_vec_dot_avx512(GgmlType weight_type, const void* w_row, const void* act_row, int64_t n) {
  switch (weight_type) {
    case GgmlType::Q2_K: return dot_one<LowbitKernel<Q2_KFormat>>(weight_type, w_row, act_row, n);
    case GgmlType::Q3_K: return dot_one<LowbitKernel<Q3_KFormat>>(weight_type, w_row, act_row, n);
    case GgmlType::IQ4_XS: return dot_one<LowbitKernel<IQ4_XSFormat>>(weight_type, w_row, act_row, n);
    default: KVDESK_ASSERT(!"lowbit_vec_dot_avx512: not a low-bit super-block type");
  }
  return 0.0f;
}

void lowbit_matmul_rows_avx512(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  switch (args.weight_type) {
    case GgmlType::Q2_K: return matmul_tiled<LowbitKernel<Q2_KFormat>>(args, row_begin, row_end);
    case GgmlType::Q3_K: return matmul_tiled<LowbitKernel<Q3_KFormat>>(args, row_begin, row_end);
    case GgmlType::IQ4_XS: return matmul_tiled<LowbitKernel<IQ4_XSFormat>>(args, row_begin, row_end);
    default: KVDESK_ASSERT(!"lowbit_matmul_rows_avx512: not a low-bit super-block type");
  }
}

}  // namespace kvdesk
