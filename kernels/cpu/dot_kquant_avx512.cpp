// AVX-512 VNNI kernels for the K-quants Q4_K, Q5_K and Q6_K against Q8Act rows. A step is 64
// values: two 32-value sub-blocks in the two 256-bit halves of a zmm, so one vpdpbusd, one
// convert and one FMA cover both. Per int32 lane i of step q of super-block j:
//     dot[i]  = sum_{4 values} u8(q) * s8(a)  + bias[i]      (Q6_K: bias = -32 * sum_{4} s8(a))
//     acc[i] += float(dot[i]) * scale[i] * a.d                (scale of the lane's sub-block)
// and once per super-block, Q4_K / Q5_K, lanes 8 + s:  acc[8 + s] -= dmin * m[s] * a.d * a.sum.
// Which two sub-blocks share a step follows the weight layout (StepPairs); the act side is
// repacked once per matmul into that register image (KActSuper).
// Built with AVX-512 flags, reached only through kAvx512Kernels after the CPU check.

// GCC 12's AVX-512 intrinsics trip -Wuninitialized once inlined (GCC PR 105593), as in
// dot_avx512.cpp.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstddef>
#include <cstring>

#include "kernels/check.h"
#include "kernels/cpu/dot_kquant_avx512.h"
#include "kernels/cpu/pack_scratch.h"
#include "kernels/cpu/tile_driver.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

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

// ---- act side ---------------------------------------------------------------------------------

// One step: act blocks 8j + lo[q] (bytes / lanes 0-31 / 0-7) and 8j + hi[q] (32-63 / 8-15).
struct KActStep {
  __m512i qs;    // [64] s8
  __m512 d;      // [16] a.d of the lane's block
  __m512i bias;  // [16] -32 * (sum of the lane's 4 values), for Q6_K's offset
};

struct KActSuper {
  KActStep step[kSteps];
  __m512 sums;   // [16] lane 8 + s: a.d * a.sum of act block 8j + s; lanes 0-7 zero
};
static_assert(sizeof(KActSuper) % 64 == 0);

thread_local PackScratch<KActSuper> kact_scratch;

ALWAYS_INLINE __m256i load_256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

template <class F>
KActSuper pack_super(const BlockQ8Act* a) {
  KActSuper out;
  for (int q = 0; q < kSteps; ++q) {
    const BlockQ8Act& lo = a[F::kPairs.lo[q]];
    const BlockQ8Act& hi = a[F::kPairs.hi[q]];
    const __m512i qs = _mm512_inserti64x4(_mm512_castsi256_si512(load_256(lo.qs)), load_256(hi.qs), 1);
    const __m512 d = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(lo.d)), _mm256_set1_ps(hi.d), 1);
    const __m512i sum32 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(32), qs);
    out.step[q] = KActStep{qs, d, _mm512_sub_epi32(_mm512_setzero_si512(), sum32)};
  }
  alignas(64) float sums[16] = {};
  for (int s = 0; s < 8; ++s) sums[8 + s] = a[s].d * static_cast<float>(a[s].sum);
  out.sums = _mm512_load_ps(sums);
  return out;
}

// Q8Act rows [first, first + count) -> [count][super-blocks] KActSuper in F's step order.
template <class F>
ActPanel pack_kquant_acts(const MatmulArgs& args, size_t a_stride, int64_t first, int count) {
  const int64_t supers = args.n / kQK_K;
  KActSuper* out = kact_scratch.get(static_cast<size_t>(supers * count));
  const char* acts = static_cast<const char*>(args.acts) + static_cast<size_t>(first) * a_stride;
  for (int c = 0; c < count; ++c) {
    const BlockQ8Act* a = row_at<BlockQ8Act>(acts, a_stride, c);
    for (int64_t j = 0; j < supers; ++j) out[c * supers + j] = pack_super<F>(a + 8 * j);
  }
  return ActPanel{reinterpret_cast<const char*>(out), static_cast<size_t>(supers) * sizeof(KActSuper)};
}

// The panel is re-read for every weight tile; non-temporal-hint loads keep the hardware
// prefetchers on the weight streams (see dot_avx512.cpp's load_packed).
ALWAYS_INLINE __m512i stream_load(const void* p) { return _mm512_stream_load_si512(const_cast<void*>(p)); }

// ---- weight side ------------------------------------------------------------------------------

// Lane permutations picking a step's scales out of a per-super-block scale vector.
struct StepIndex {
  alignas(64) int32_t pair[kSteps][16];  // [q] lanes 0-7 <- kNibblePairs.lo[q], 8-15 <- .hi[q]
  alignas(64) int32_t quad[kSteps][16];  // [q] lanes 4k..4k+3 <- 4q + k
  // Q5_K: moves bit s of each qh byte to bit 4, words 0-15 for s = lo[q], 16-31 for hi[q]: left
  // by 4 - s for steps 0, 1 (s <= 4), right by s - 4 for steps 2, 3; bits leaking across bytes
  // land outside bit 4 and are masked off.
  alignas(64) int16_t q5_shift[kSteps][32];
  // Q6_K: moves bits 2k, 2k+1 of each qh byte to bits 4, 5: even q (k = 0 | 1) left by 4 | 2,
  // odd q (k = 2 | 3) right by 0 | 2 (low | high half); bits leaking across bytes land outside
  // bits 4, 5 and are masked off.
  alignas(64) int16_t q6_left[32];    // words 0-15 shift 4, 16-31 shift 2
  alignas(64) int16_t q6_right[32];   // words 0-15 shift 0, 16-31 shift 2
  constexpr StepIndex() : pair(), quad(), q5_shift(), q6_left(), q6_right() {
    for (int q = 0; q < kSteps; ++q) {
      for (int i = 0; i < 16; ++i) {
        pair[q][i] = i < 8 ? kNibblePairs.lo[q] : kNibblePairs.hi[q];
        quad[q][i] = 4 * q + i / 4;
      }
      for (int i = 0; i < 32; ++i) {
        const int s = i < 16 ? kNibblePairs.lo[q] : kNibblePairs.hi[q];
        q5_shift[q][i] = static_cast<int16_t>(q < 2 ? 4 - s : s - 4);
      }
    }
    for (int i = 0; i < 32; ++i) {
      q6_left[i] = static_cast<int16_t>(i < 16 ? 4 : 2);
      q6_right[i] = static_cast<int16_t>(i < 16 ? 0 : 2);
    }
  }
};
constexpr StepIndex kIndex;

ALWAYS_INLINE __m512i load_index(const void* p) { return _mm512_load_si512(p); }

// 32 bytes at p into both 256-bit halves
ALWAYS_INLINE __m512i broadcast_256(const uint8_t* p) { return _mm512_broadcast_i64x4(load_256(p)); }

// Sub-block scales d * sc[s] (lanes 0-7) and mins dmin * m[s] (lanes 8-15) of a Q4_K / Q5_K
// super-block, in one vector: the act sums sit in lanes 8-15 only, so the scales in lanes 0-7
// meet zeros there. The 12 packed bytes unpack (k_scale_min for all eight at once) in one
// xmm: bytes 0-3 hold sc[0..3], 4-7 m[0..3] in their low 6 bits and the high 2 bits of
// sc[4..7], m[4..7] on top; bytes 8-11 the low 4 bits of sc[4..7] | m[4..7] << 4.
struct KAffine {
  __m512 scale_min;  // [16] d * sc[0..7], dmin * m[0..7]
};

template <class Block>
ALWAYS_INLINE KAffine k_affine(const Block& b) {
  // 16 bytes from `scales`: the 12 scale bytes and 4 bytes of what follows in the block (unused)
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
  constexpr char kZero = static_cast<char>(0x80);  // pshufb: zero this byte
  // low parts: sc[0..3] = x[0..3] & 63, sc[4..7] = x[8..11] & 15, m[0..3] = x[4..7] & 63,
  // m[4..7] = x[8..11] >> 4
  const __m128i low_src = _mm_shuffle_epi8(x, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
  const __m128i low = _mm_and_si128(low_src, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0));
  const __m128i low_hi_nibble = _mm_and_si128(_mm_srli_epi16(low_src, 4),
                                              _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15));
  // high 2 bits of sc[4..7], m[4..7]: bits 6-7 of x[0..3], x[4..7] moved to bits 4-5
  const __m128i top_src = _mm_shuffle_epi8(
      x, _mm_setr_epi8(kZero, kZero, kZero, kZero, 0, 1, 2, 3, kZero, kZero, kZero, kZero, 4, 5, 6, 7));
  const __m128i top = _mm_and_si128(_mm_srli_epi16(top_src, 2), _mm_set1_epi8(0x30));
  const __m128i bytes = _mm_ternarylogic_epi32(low, low_hi_nibble, top, 0xFE);  // a | b | c
  // bytes sc[0..7], m[0..7] -> 16 floats
  const __m512 values = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes));
  // d and dmin are adjacent halves: one conversion, then d into lanes 0-7, dmin into 8-15
  uint32_t d_dmin;
  static_assert(offsetof(Block, dmin) == offsetof(Block, d) + 2);
  std::memcpy(&d_dmin, &b.d, sizeof(d_dmin));
  const __m128 both = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(d_dmin)));
  const __m512 factors = _mm512_permutexvar_ps(_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
                                               _mm512_castps128_ps512(both));
  return KAffine{_mm512_mul_ps(values, factors)};
}

// Q4_K / Q5_K step q (kNibblePairs): qs bytes 64 (q / 2) .. +63, low nibbles for even q, high
// nibbles for odd q.
ALWAYS_INLINE __m512i k_nibbles(const uint8_t* qs, int q) {
  const __m512i bytes = _mm512_loadu_si512(qs + 64 * (q / 2));
  return _mm512_and_si512(q % 2 == 0 ? bytes : _mm512_srli_epi16(bytes, 4), _mm512_set1_epi8(15));
}

struct Q4_KFormat {
  using Block = BlockQ4_K;
  static constexpr StepPairs kPairs = kNibblePairs;
  static constexpr bool kHasMin = true;
  static constexpr bool kHasOffset = false;
  using Decoded = KAffine;
  ALWAYS_INLINE static Decoded decode(const Block& b) { return k_affine(b); }
  ALWAYS_INLINE static __m512i quants(const Block& b, const Decoded&, int q) { return k_nibbles(b.qs, q); }
  ALWAYS_INLINE static __m512 scale(const Decoded& d, int q) {
    return _mm512_permutexvar_ps(load_index(kIndex.pair[q]), d.scale_min);
  }
  ALWAYS_INLINE static __m512 mins(const Decoded& d) { return d.scale_min; }
};

struct Q5_KFormat {
  using Block = BlockQ5_K;
  static constexpr StepPairs kPairs = kNibblePairs;
  static constexpr bool kHasMin = true;
  static constexpr bool kHasOffset = false;
  struct Decoded {
    KAffine affine;
    __m512i qh;  // [64] qh[0..31] in both halves
  };
  ALWAYS_INLINE static Decoded decode(const Block& b) { return Decoded{k_affine(b), broadcast_256(b.qh)}; }
  // 5th bit of value 32s + l is bit s of qh[l]: bit lo[q] in the low half, hi[q] in the high half
  ALWAYS_INLINE static __m512i quants(const Block& b, const Decoded& d, int q) {
    const __m512i shift = load_index(kIndex.q5_shift[q]);
    const __m512i high = q < 2 ? _mm512_sllv_epi16(d.qh, shift) : _mm512_srlv_epi16(d.qh, shift);
    return _mm512_ternarylogic_epi32(k_nibbles(b.qs, q), high, _mm512_set1_epi8(0x10), 0xF8);  // a | (b & 0x10)
  }
  ALWAYS_INLINE static __m512 scale(const Decoded& d, int q) {
    return _mm512_permutexvar_ps(load_index(kIndex.pair[q]), d.affine.scale_min);
  }
  ALWAYS_INLINE static __m512 mins(const Decoded& d) { return d.affine.scale_min; }
};

struct Q6_KFormat {
  using Block = BlockQ6_K;
  static constexpr StepPairs kPairs = kConsecutivePairs;
  static constexpr bool kHasMin = false;
  static constexpr bool kHasOffset = true;
  struct Decoded {
    __m512 scale;  // [16] d * scales[i]
  };
  ALWAYS_INLINE static Decoded decode(const Block& b) {
    const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
    return Decoded{_mm512_mul_ps(_mm512_cvtepi32_ps(sc), _mm512_set1_ps(_cvtsh_ss(b.d)))};
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
  ALWAYS_INLINE static __m512 scale(const Decoded& d, int q) {
    return _mm512_permutexvar_ps(load_index(kIndex.quad[q]), d.scale);
  }
  ALWAYS_INLINE static __m512 mins(const Decoded&) { return _mm512_setzero_ps(); }
};

// ---- micro-kernel -----------------------------------------------------------------------------

// Super-block j of every row of the tile against the packed acts of super-block j.
template <class F, int R, int C>
ALWAYS_INLINE void kquant_super(const Tile& t, int64_t j, __m512 (&acc)[R][C]) {
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
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      w[r] = F::quants(*blocks[r], dec[r], q);
      ws[r] = F::scale(dec[r], q);
    }
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const KActStep& step = row_at<KActSuper>(t.a, t.a_stride, c)[j].step[q];
      const __m512i qs = stream_load(&step.qs);
      const __m512 d = _mm512_castsi512_ps(stream_load(&step.d));
      const __m512i bias = F::kHasOffset ? stream_load(&step.bias) : _mm512_setzero_si512();
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512 dot = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(bias, w[r], qs));
        acc[r][c] = _mm512_fmadd_ps(dot, _mm512_mul_ps(ws[r], d), acc[r][c]);
      }
    }
  }
  if constexpr (F::kHasMin) {
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const __m512 sums = _mm512_castsi512_ps(stream_load(&row_at<KActSuper>(t.a, t.a_stride, c)[j].sums));
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r][c] = _mm512_fnmadd_ps(F::mins(dec[r]), sums, acc[r][c]);
    }
  }
}

template <class F>
struct KQuantKernel {
  static constexpr int kGemvRows = 4;
  static constexpr int kRows = 4;
  static constexpr int kActs = 3;

  static ActPanel pack_acts(const MatmulArgs& args, size_t a_stride, int64_t first, int count) {
    return pack_kquant_acts<F>(args, a_stride, first, count);
  }

  template <int R, int C>
  static void tile(const Tile& t) {
    __m512 acc[R][C];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
    }
    for (int64_t j = 0; j < t.n / kQK_K; ++j) kquant_super<F, R, C>(t, j, acc);
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) t.y[c * t.ld_y + r * t.y_row_stride] = _mm512_reduce_add_ps(acc[r][c]);
    }
  }
};

}  // namespace

float kquant_vec_dot_avx512(GgmlType weight_type, const void* w_row, const void* act_row, int64_t n) {
  switch (weight_type) {
    case GgmlType::Q4_K: return dot_one<KQuantKernel<Q4_KFormat>>(weight_type, w_row, act_row, n);
    case GgmlType::Q5_K: return dot_one<KQuantKernel<Q5_KFormat>>(weight_type, w_row, act_row, n);
    case GgmlType::Q6_K: return dot_one<KQuantKernel<Q6_KFormat>>(weight_type, w_row, act_row, n);
    default: KVDESK_ASSERT(!"kquant_vec_dot_avx512: not a K-quant");
  }
  return 0.0f;
}

void kquant_matmul_rows_avx512(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  switch (args.weight_type) {
    case GgmlType::Q4_K: return matmul_tiled<KQuantKernel<Q4_KFormat>>(args, row_begin, row_end);
    case GgmlType::Q5_K: return matmul_tiled<KQuantKernel<Q5_KFormat>>(args, row_begin, row_end);
    case GgmlType::Q6_K: return matmul_tiled<KQuantKernel<Q6_KFormat>>(args, row_begin, row_end);
    default: KVDESK_ASSERT(!"kquant_matmul_rows_avx512: not a K-quant");
  }
}

}  // namespace kvdesk
