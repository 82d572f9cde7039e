// AVX-512 VNNI kernels for the K-quants Q4_K, Q5_K and Q6_K against Q8K activation rows: Q8K
// quantization, dots and tiled matmul. A step is 64 values: two 32-value sub-blocks in the two
// 256-bit halves of a zmm; steps 2h and 2h + 1 cover half h (values 128h .. 128h + 127), summed
// in integers. Per 32-bit lane i of step q and 16-bit word k of half h of super-block j:
//     dot_q[i]   = sum_{4 values} u8(q) * s8(a)     (vpdpbusd; |dot| <= 63 * 127 * 4 < 2^15)
//     words      = packs(dot_2h, dot_2h+1)          (exact: every dot fits in int16)
//     iacc[k/2] += words[k] * scale[k] + words[k + 1] * scale[k + 1]   (vpdpwssd, sub-block scales)
// so the multiply units see 1.5 instructions per 64 values and row x act instead of 2 (maddubs +
// vpdpwssd). Once per super-block, with its one act scale a.d:
//     Q6_K:         iacc[k] -= 32 * (bsums[2k] * scales[2k] + bsums[2k + 1] * scales[2k + 1])  (vpdpwssd)
//     acc         += float(iacc) * fp16(d) * a.d
//     Q4_K / Q5_K:  acc[s] -= fp16(dmin) * m[s] * a.d * (bsums[2s] + bsums[2s + 1])
// Which two sub-blocks share a step follows the weight layout (StepPairs); the act side is
// repacked once per matmul into that register image (KActSuper).
// Built with AVX-512 flags, reached only through kAvx512KQuantKernels after the CPU check.

#include <cstddef>
#include <cstring>
#include <utility>

#include "kernels/check.h"
#include "kernels/cpu/simd_prelude.h"
#include "kernels/cpu/dot_isa.h"
#include "kernels/cpu/kquant_scales.h"
#include "kernels/cpu/pack_scratch.h"
#include "kernels/cpu/tile_driver.h"

namespace kvdesk {
namespace {

constexpr int kSteps = 4;  // 64-value steps per 256-value super-block

// The sub-blocks of step q: lo[q] in the low 256-bit half, hi[q] in the high half.
struct StepPairs {
  int lo[kSteps];
  int hi[kSteps];
};
// Q6_K: 64 consecutive values per step.
constexpr StepPairs kConsecutivePairs = {{0, 2, 4, 6}, {1, 3, 5, 7}};
// Q4_K / Q5_K: 64 bytes of nibbles hold sub-blocks 4p, 4p+1 (bytes 0-31, low / high nibbles)
// and 4p+2, 4p+3 (bytes 32-63); one load serves two steps, low nibbles then high nibbles.
constexpr StepPairs kNibblePairs = {{0, 1, 4, 5}, {2, 3, 6, 7}};

// ---- activation quantization ----------------------------------------------------------------

// d = amax / 127 over 256 values, qs[i] = round_half_even(x[i] * (1 / d)), bsums[k] = sum of
// qs[16k .. 16k + 15]: bit-identical to ref.
void quantize_q8k_block(const float* x, BlockQ8K& y) {
  constexpr int kVectors = kQ8KBlockValues / 16;
  __m512 amax = _mm512_setzero_ps();
  for (int k = 0; k < kVectors; ++k) amax = _mm512_max_ps(amax, _mm512_abs_ps(_mm512_loadu_ps(x + 16 * k)));
  const float d = _mm512_reduce_max_ps(amax) / 127.0f;
  const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
  y.d = d;
  for (int k = 0; k < kVectors; ++k) {
    // Sums of the stored (saturated) codes: a NaN's INT_MIN cannot overflow them.
    const __m128i q = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * k), id)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y.qs + 16 * k), q);
    y.bsums[k] = static_cast<int16_t>(_mm512_reduce_add_epi32(_mm512_cvtepi8_epi32(q)));
  }
}

void prepare_act_row(GgmlType weight_type, const float* x, void* act, int64_t n) {
  KVDESK_ASSERT(act_format_for(weight_type) == ActFormat::Q8K && n % kQ8KBlockValues == 0);
  BlockQ8K* y = static_cast<BlockQ8K*>(act);
  for (int64_t b = 0; b < n / kQ8KBlockValues; ++b) quantize_q8k_block(x + b * kQ8KBlockValues, y[b]);
}

// ---- act side ---------------------------------------------------------------------------------

// One act super-block as the micro-kernel loads it.
struct KActSuper {
  __m512i qs[kSteps];  // [q][64] s8: sub-block lo[q] in bytes 0-31, hi[q] in bytes 32-63
  __m512i bsums;       // [32] int16: bsums[0..15], then zeros
  __m512 min_sums;     // [16] lane k_min_byte(s): a.d * (bsums[2s] + bsums[2s + 1]); other lanes zero
  __m512 d;            // [16] a.d
};
static_assert(sizeof(KActSuper) % 64 == 0);

thread_local PackScratch<KActSuper> kact_scratch;

template <class F>
KActSuper pack_super(const BlockQ8K& a) {
  KActSuper out;
  for (int q = 0; q < kSteps; ++q) {
    out.qs[q] = _mm512_inserti64x4(_mm512_castsi256_si512(load_256(a.qs + 32 * F::kPairs.lo[q])),
                                   load_256(a.qs + 32 * F::kPairs.hi[q]), 1);
  }
  const __m256i bsums = load_256(a.bsums);
  out.bsums = _mm512_zextsi256_si512(bsums);
  out.d = _mm512_set1_ps(a.d);
  // pair sums s = 0..7 into lanes k_min_byte(s) = 4..7, 12..15
  const __m256 pair_sums = _mm256_cvtepi32_ps(_mm256_madd_epi16(bsums, _mm256_set1_epi16(1)));
  static_assert(k_min_byte(0) == 4 && k_min_byte(3) == 7 && k_min_byte(4) == 12 && k_min_byte(7) == 15);
  out.min_sums = _mm512_maskz_expand_ps(0xF0F0, _mm512_castps256_ps512(_mm256_mul_ps(pair_sums, _mm256_set1_ps(a.d))));
  return out;
}

// Q8K rows [first, first + count) -> [count][super-blocks] KActSuper in F's step order.
template <class F>
ActPanel pack_kquant_acts(const MatmulArgs& args, size_t a_stride, int64_t first, int count) {
  const int64_t supers = args.n / kQK_K;
  KActSuper* out = kact_scratch.get(static_cast<size_t>(supers * count));
  const char* acts = static_cast<const char*>(args.acts) + static_cast<size_t>(first) * a_stride;
  for (int c = 0; c < count; ++c) {
    const BlockQ8K* a = row_at<BlockQ8K>(acts, a_stride, c);
    for (int64_t j = 0; j < supers; ++j) out[c * supers + j] = pack_super<F>(a[j]);
  }
  return ActPanel{reinterpret_cast<const char*>(out), static_cast<size_t>(supers) * sizeof(KActSuper)};
}

// The panel is re-read for every weight tile; non-temporal-hint loads keep the hardware
// prefetchers on the weight streams (see dot_avx512.cpp's load_packed).
ALWAYS_INLINE __m512i stream_load(const void* p) { return _mm512_stream_load_si512(const_cast<void*>(p)); }

// ---- weight side ------------------------------------------------------------------------------

constexpr int kHalves = kSteps / 2;  // 128-value halves per super-block

// Byte shuffles (within 128-bit lanes) building a half's int16 scales from a super-block's scale
// bytes repeated in every lane: the scale byte goes to one byte of each word, 0x80 zeroes the
// other. packs puts words 0-3 of 128-bit lane L from dot_2h's int32 lanes 4L..4L+3 and words 4-7
// from dot_2h+1's, so each word takes the scale of the sub-block those values belong to.
struct StepIndex {
  // Q4_K / Q5_K, from KScaleMinBytes: low bytes <- sc[lo[q]] (lanes 0, 1) or sc[hi[q]] (lanes
  // 2, 3) of the word's step q (kNibblePairs); high bytes zero.
  alignas(64) int8_t affine_scale[kHalves][64];
  // Q6_K, from s8 scales[0..15]: high bytes <- scales[4q + L] of the word's step q and lane L (a
  // step is 64 consecutive values, lane L of it 16); low bytes zero (an arithmetic shift right
  // by 8 then sign-extends).
  alignas(64) int8_t q6_scale[kHalves][64];
  // Q5_K: moves bit s of each qh byte to bit 4, words 0-15 for s = lo[q], 16-31 for hi[q]: left
  // by 4 - s for steps 0, 1 (s <= 4), right by s - 4 for steps 2, 3; bits leaking across bytes
  // land outside bit 4 and are masked off.
  alignas(64) int16_t q5_shift[kSteps][32];
  // Q6_K: moves bits 2k, 2k+1 of each qh byte to bits 4, 5: even q (k = 0 | 1) left by 4 | 2,
  // odd q (k = 2 | 3) right by 0 | 2 (low | high half); bits leaking across bytes land outside
  // bits 4, 5 and are masked off.
  alignas(64) int16_t q6_left[32];    // words 0-15 shift 4, 16-31 shift 2
  alignas(64) int16_t q6_right[32];   // words 0-15 shift 0, 16-31 shift 2
  // Q4_K / Q5_K tile decode (k_affine_scales_tile), per 128-bit lane = one row's first 16 bytes
  // (d, dmin, the 12 packed bytes x[0..11] at bytes 4-15): byte i of the unpacked 16 (see
  // KScaleMinBytes) gathers x[i] for i < 8 and x[8 + i % 4] after (packed_low), x[i - 8] for
  // i >= 8 and zero before (packed_top); words 6, 7 then shift right by 4 (low_shift), the high
  // nibbles of x[8..11]; low_mask keeps 6 bits of x[0..7], 4 of the others.
  alignas(64) int8_t packed_low[64];
  alignas(64) int8_t packed_top[64];
  alignas(64) int16_t low_shift[32];
  alignas(64) int8_t low_mask[64];
  constexpr StepIndex()
      : affine_scale(), q6_scale(), q5_shift(), q6_left(), q6_right(), packed_low(), packed_top(), low_shift(),
        low_mask() {
    constexpr int8_t kZero = -128;  // pshufb: zero this byte
    for (int h = 0; h < kHalves; ++h) {
      for (int i = 0; i < 64; ++i) {
        const bool low_byte = i % 2 == 0;
        const int lane = i / 16;
        const int q = 2 * h + (i % 16 >= 8 ? 1 : 0);
        const int sub_block = lane < 2 ? kNibblePairs.lo[q] : kNibblePairs.hi[q];
        affine_scale[h][i] = low_byte ? static_cast<int8_t>(k_scale_byte(sub_block)) : kZero;
        q6_scale[h][i] = low_byte ? kZero : static_cast<int8_t>(4 * q + lane);
      }
    }
    for (int q = 0; q < kSteps; ++q) {
      for (int i = 0; i < 32; ++i) {
        const int s = i < 16 ? kNibblePairs.lo[q] : kNibblePairs.hi[q];
        q5_shift[q][i] = static_cast<int16_t>(q < 2 ? 4 - s : s - 4);
      }
    }
    for (int i = 0; i < 32; ++i) {
      q6_left[i] = static_cast<int16_t>(i < 16 ? 4 : 2);
      q6_right[i] = static_cast<int16_t>(i < 16 ? 0 : 2);
      low_shift[i] = static_cast<int16_t>(i % 8 >= 6 ? 4 : 0);
    }
    constexpr int kPacked = 4;  // byte of x[0] in a row's first 16
    for (int i = 0; i < 64; ++i) {
      const int byte = i % 16;
      packed_low[i] = static_cast<int8_t>(kPacked + (byte < 8 ? byte : 8 + byte % 4));
      packed_top[i] = byte < 8 ? kZero : static_cast<int8_t>(kPacked + byte - 8);
      low_mask[i] = static_cast<int8_t>(byte < 8 ? 0x3F : 0x0F);
    }
  }
};
constexpr StepIndex kIndex;

ALWAYS_INLINE __m512i load_index(const void* p) { return _mm512_load_si512(p); }

// Q4_K / Q5_K super-block scales of a tile's R <= 4 rows: per row [64] its 16 KScaleMinBytes in
// every 128-bit lane (step scales are picked from there, the mins at the end). The rows' first
// 16 bytes go one to a lane and are unpacked together (the shuffles of StepIndex, for
// k_scale_min_bytes's arithmetic), then each row's lane is broadcast. Only these live through
// the super-block's steps; d and dmin are read after them (k_affine_terms), which keeps a 4-row
// decode tile in registers.
template <class Block, int R>
ALWAYS_INLINE void k_affine_scales_tile(const Block* (&blocks)[R], __m512i (&scales)[R]) {
  static_assert(R <= 4 && offsetof(Block, scales) == 4);
  __m512i heads = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    heads = _mm512_mask_broadcast_i32x4(heads, static_cast<__mmask16>(0xF << (4 * r)),
                                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks[r])));
  }
  const __m512i low = _mm512_srlv_epi16(_mm512_shuffle_epi8(heads, load_index(kIndex.packed_low)),
                                        load_index(kIndex.low_shift));
  // bits 6, 7 of x[i - 8] at bits 4, 5 of byte i (the bits above them are masked off)
  const __m512i top = _mm512_srli_epi16(_mm512_shuffle_epi8(heads, load_index(kIndex.packed_top)), 2);
  const __m512i merged = _mm512_ternarylogic_epi32(low, top, load_index(kIndex.low_mask), 0xE4);  // c ? a : b
  const __m512i unpacked = _mm512_and_si512(merged, _mm512_set1_epi8(0x3F));
  // the lane shuffle takes an immediate, so the rows are expanded at compile time
  [&]<int... r>(std::integer_sequence<int, r...>) {
    ((scales[r] = _mm512_shuffle_i32x4(unpacked, unpacked, 0x55 * r)), ...);
  }(std::make_integer_sequence<int, R>{});
}

ALWAYS_INLINE __m512i k_affine_scale(__m512i scales, int h) {
  return _mm512_shuffle_epi8(scales, load_index(kIndex.affine_scale[h]));
}

// The act side of the once-per-super-block part, loaded once per act.
struct KActTerms {
  __m512 d;         // [16] a.d
  __m512 min_sums;  // as KActSuper
  __m512i bsums;    // as KActSuper
};

ALWAYS_INLINE KActTerms act_terms(const KActSuper& a) {
  return KActTerms{_mm512_castsi512_ps(stream_load(&a.d)), _mm512_castsi512_ps(stream_load(&a.min_sums)),
                   stream_load(&a.bsums)};
}

// Q4_K / Q5_K factors of the once-per-super-block part, read after the steps.
struct KAffineTerms {
  __m512 d;     // [16] fp16(d)
  __m512 mins;  // [16] lane k_min_byte(s): fp16(dmin) * m[s]; the sc lanes meet zero min_sums
};

template <class Block>
ALWAYS_INLINE KAffineTerms k_affine_terms(const Block& b, __m512i scales) {
  // d and dmin are adjacent halves: one conversion for both
  uint32_t d_dmin;
  static_assert(offsetof(Block, dmin) == offsetof(Block, d) + 2);
  std::memcpy(&d_dmin, &b.d, sizeof(d_dmin));
  const __m128 both = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(d_dmin)));
  const __m512 m = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm512_castsi512_si128(scales)));
  return KAffineTerms{_mm512_broadcastss_ps(both), _mm512_mul_ps(m, _mm512_broadcastss_ps(_mm_movehdup_ps(both)))};
}

ALWAYS_INLINE void k_affine_finish(const KAffineTerms& k, __m512i iacc, const KActTerms& a, __m512& acc) {
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(iacc), _mm512_mul_ps(k.d, a.d), acc);
  acc = _mm512_fnmadd_ps(k.mins, a.min_sums, acc);
}

// Q4_K / Q5_K step q (kNibblePairs): qs bytes 64 (q / 2) .. +63, low nibbles for even q, high
// nibbles for odd q.
ALWAYS_INLINE __m512i k_nibbles(const uint8_t* qs, int q) {
  const __m512i bytes = _mm512_loadu_si512(qs + 64 * (q / 2));
  return _mm512_and_si512(q % 2 == 0 ? bytes : _mm512_srli_epi16(bytes, 4), _mm512_set1_epi8(15));
}

// F::Block, F::kPairs; F::Decoded F::decode(const Block&) once per super-block and row (or
// F::decode_tile<R>(blocks, decoded) for the tile's R rows at once), live through the steps;
// F::quants(block, decoded, q) -> [64] u8 of step q; F::scale(decoded, h) -> [32] int16 scale
// of each word of half h; then F::Terms F::terms(block, decoded) once per row and
// F::finish(terms, iacc, act terms, acc) the once-per-super-block part.
struct Q4_KFormat {
  using Block = BlockQ4_K;
  static constexpr StepPairs kPairs = kNibblePairs;
  using Decoded = __m512i;  // k_affine_scales_tile
  template <int R>
  ALWAYS_INLINE static void decode_tile(const Block* (&blocks)[R], Decoded (&dec)[R]) {
    k_affine_scales_tile(blocks, dec);
  }
  ALWAYS_INLINE static __m512i quants(const Block& b, const Decoded&, int q) { return k_nibbles(b.qs, q); }
  ALWAYS_INLINE static __m512i scale(const Decoded& d, int h) { return k_affine_scale(d, h); }
  using Terms = KAffineTerms;
  ALWAYS_INLINE static Terms terms(const Block& b, const Decoded& d) { return k_affine_terms(b, d); }
  ALWAYS_INLINE static void finish(const Terms& k, __m512i iacc, const KActTerms& a, __m512& acc) {
    k_affine_finish(k, iacc, a, acc);
  }
};

struct Q5_KFormat {
  using Block = BlockQ5_K;
  static constexpr StepPairs kPairs = kNibblePairs;
  struct Decoded {
    __m512i scales;  // k_affine_scales_tile
    __m512i qh;      // [64] qh[0..31] in both halves
  };
  template <int R>
  ALWAYS_INLINE static void decode_tile(const Block* (&blocks)[R], Decoded (&dec)[R]) {
    __m512i scales[R];
    k_affine_scales_tile(blocks, scales);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) dec[r] = Decoded{scales[r], broadcast_256(blocks[r]->qh)};
  }
  // 5th bit of value 32s + l is bit s of qh[l]: bit lo[q] in the low half, hi[q] in the high half
  ALWAYS_INLINE static __m512i quants(const Block& b, const Decoded& d, int q) {
    const __m512i shift = load_index(kIndex.q5_shift[q]);
    const __m512i high = q < 2 ? _mm512_sllv_epi16(d.qh, shift) : _mm512_srlv_epi16(d.qh, shift);
    return _mm512_ternarylogic_epi32(k_nibbles(b.qs, q), high, _mm512_set1_epi8(0x10), 0xF8);  // a | (b & 0x10)
  }
  ALWAYS_INLINE static __m512i scale(const Decoded& d, int h) { return k_affine_scale(d.scales, h); }
  using Terms = KAffineTerms;
  ALWAYS_INLINE static Terms terms(const Block& b, const Decoded& d) { return k_affine_terms(b, d.scales); }
  ALWAYS_INLINE static void finish(const Terms& k, __m512i iacc, const KActTerms& a, __m512& acc) {
    k_affine_finish(k, iacc, a, acc);
  }
};

struct Q6_KFormat {
  using Block = BlockQ6_K;
  static constexpr StepPairs kPairs = kConsecutivePairs;
  // Only the scales live through the steps; the offset and d are read after them (terms).
  using Decoded = __m512i;  // [64] s8 scales[0..15] in every 128-bit lane
  ALWAYS_INLINE static Decoded decode(const Block& b) {
    return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
  }
  // Step q = values 64q..64q+63 = half h = q / 2, quarters k = 2 (q % 2) and k + 1: low 4 bits
  // from ql[64h .. 64h + 63] (low nibbles for even q, high for odd), high 2 bits from
  // qh[32h + l] >> 2k (low half) and >> 2k + 2 (high half).
  ALWAYS_INLINE static __m512i quants(const Block& b, const Decoded&, int q) {
    const int h = q / 2;
    const __m512i ql = _mm512_loadu_si512(b.ql + 64 * h);
    const __m512i low = _mm512_and_si512(q % 2 == 0 ? ql : _mm512_srli_epi16(ql, 4), _mm512_set1_epi8(15));
    const __m512i qh = broadcast_256(b.qh + 32 * h);
    const __m512i high = q % 2 == 0 ? _mm512_sllv_epi16(qh, load_index(kIndex.q6_left))
                                    : _mm512_srlv_epi16(qh, load_index(kIndex.q6_right));
    return _mm512_ternarylogic_epi32(low, high, _mm512_set1_epi8(0x30), 0xF8);  // low | (high & 0x30)
  }
  ALWAYS_INLINE static __m512i scale(const Decoded& d, int h) {
    return _mm512_srai_epi16(_mm512_shuffle_epi8(d, load_index(kIndex.q6_scale[h])), 8);
  }
  struct Terms {
    __m512i offset;  // [32] int16 -32 * scales[0..15], then zeros
    __m512 d;        // [16] fp16(d)
  };
  ALWAYS_INLINE static Terms terms(const Block& b, const Decoded& d) {
    const __m256i offset = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm512_castsi512_si128(d)), _mm256_set1_epi16(-32));
    return Terms{_mm512_zextsi256_si512(offset), _mm512_set1_ps(_cvtsh_ss(b.d))};
  }
  ALWAYS_INLINE static void finish(const Terms& k, __m512i iacc, const KActTerms& a, __m512& acc) {
    const __m512i unbiased = _mm512_dpwssd_epi32(iacc, a.bsums, k.offset);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(unbiased), _mm512_mul_ps(k.d, a.d), acc);
  }
};

// ---- micro-kernel -----------------------------------------------------------------------------

// Super-block j of every row of the tile against the packed acts of super-block j.
template <class F, int R, int C>
ALWAYS_INLINE void kquant_super(const Tile& t, int64_t j, __m512 (&acc)[R][C]) {
  const typename F::Block* blocks[R];
  typename F::Decoded dec[R];
  decode_rows<F>(t, j, blocks, dec);
  if constexpr (C == 1) prefetch_streams<R>(t, j * sizeof(typename F::Block), sizeof(typename F::Block));
  __m512i iacc[R][C];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) iacc[r][c] = _mm512_setzero_si512();
  }
#pragma GCC unroll 2
  for (int h = 0; h < kHalves; ++h) {
    __m512i w0[R];
    __m512i w1[R];
    __m512i sc[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      w0[r] = F::quants(*blocks[r], dec[r], 2 * h);
      w1[r] = F::quants(*blocks[r], dec[r], 2 * h + 1);
      sc[r] = F::scale(dec[r], h);
    }
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const KActSuper& a = row_at<KActSuper>(t.a, t.a_stride, c)[j];
      const __m512i a0 = stream_load(&a.qs[2 * h]);
      const __m512i a1 = stream_load(&a.qs[2 * h + 1]);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512i dot0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w0[r], a0);
        const __m512i dot1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w1[r], a1);
        iacc[r][c] = _mm512_dpwssd_epi32(iacc[r][c], _mm512_packs_epi32(dot0, dot1), sc[r]);
      }
    }
  }
  typename F::Terms terms[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) terms[r] = F::terms(*blocks[r], dec[r]);
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) {
    const KActTerms a = act_terms(row_at<KActSuper>(t.a, t.a_stride, c)[j]);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) F::finish(terms[r], iacc[r][c], a, acc[r][c]);
  }
}

template <class F>
struct KQuantKernel {
  static constexpr int kGemvRows = 4;
  // Wide in acts: each row's scale unpack and quant extraction serve 8 acts (2 x 8 beat 4 x 3,
  // 4 x 4 and 3 x 6 in prefill-shaped matmuls on Zen 4).
  static constexpr int kRows = 2;
  static constexpr int kActs = 8;

  static ActPanel pack_acts(const MatmulArgs& args, size_t a_stride, int64_t first, int count) {
    return pack_kquant_acts<F>(args, a_stride, first, count);
  }

  template <int R, int C>
  static void tile(const Tile& t) {
    __m512 acc[R][C];
    zero_tile(acc);
    for (int64_t j = 0; j < t.n / kQK_K; ++j) kquant_super<F, R, C>(t, j, acc);
    store_tile(t, acc);
  }
};

// ---- entry points ------------------------------------------------------------------------------

using KQuantTable = KernelTable<Serves<GgmlType::Q4_K, KQuantKernel<Q4_KFormat>>,
                                Serves<GgmlType::Q5_K, KQuantKernel<Q5_KFormat>>,
                                Serves<GgmlType::Q6_K, KQuantKernel<Q6_KFormat>>>;

}  // namespace

const IsaKernels kAvx512KQuantKernels = {&prepare_act_row, &KQuantTable::vec_dot, &KQuantTable::matmul_rows};

}  // namespace kvdesk
