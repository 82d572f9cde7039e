// AVX-512 paged attention: the shared driver (attention_driver.h) over 16-float vectors, float
// and fp8 KV widened to f32 in registers (fp8 through vcvtph2ps), int8 / int4 codes multiplied
// as bytes by vpdpbusd (attention_int_phases.h, attention_weighted_codes.h). Built with AVX-512
// flags, reached only through cpu::paged_attention after the CPU check.
#include "kernels/cpu/simd_prelude.h"

#include "kernels/cpu/attention_driver.h"
#include "kernels/cpu/attention_isa.h"

namespace kvdesk {
namespace {

struct Avx512 {
  using Vec = __m512;
  static constexpr int kLanes = 16;

  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec set1(float x) { return _mm512_set1_ps(x); }
  static Vec load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
  static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  static Vec max(Vec a, Vec b) { return _mm512_max_ps(a, b); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static Vec div(Vec a, Vec b) { return _mm512_div_ps(a, b); }
  static Vec div_or_zero(Vec a, Vec x) { return _mm512_maskz_div_ps(_mm512_cmp_ps_mask(x, zero(), _CMP_GT_OQ), a, x); }
  static Vec round(Vec x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static Vec ldexp(Vec y, Vec n) { return _mm512_scalef_ps(y, n); }
  static Vec zero_below(Vec x, float limit, Vec y) {
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, set1(limit), _CMP_GE_OQ), y);
  }
  static Vec first_lanes(Vec v, int32_t n, float fill) {
    return _mm512_mask_blend_ps(__mmask16((1u << n) - 1), set1(fill), v);
  }
  static float reduce_add(Vec v) { return _mm512_reduce_add_ps(v); }
  static float reduce_max(Vec v) { return _mm512_reduce_max_ps(v); }
  // The largest lane in every lane.
  static Vec max_all(Vec v) {
    v = max(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
    v = max(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
    v = max(v, _mm512_shuffle_ps(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
    return max(v, _mm512_shuffle_ps(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
  }
  static float first(Vec v) { return _mm512_cvtss_f32(v); }
  static bool any_above(Vec v, float x) { return _mm512_cmp_ps_mask(v, set1(x), _CMP_GT_OQ) != 0; }

  // parts[16][16] -> lane r = sum of parts[r][0..16): pairs, quads, then 128-bit lanes.
  static Vec transpose_sum(const float* parts) {
    Vec x[8], z[4];
    for (int k = 0; k < 8; ++k) {
      const Vec a = load(parts + 32 * k);
      const Vec b = load(parts + 32 * k + 16);
      x[k] = add(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
    }
    for (int k = 0; k < 4; ++k) {
      z[k] = add(_mm512_shuffle_ps(x[2 * k], x[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                 _mm512_shuffle_ps(x[2 * k], x[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    }
    const Vec u0 = add(_mm512_shuffle_f32x4(z[0], z[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(z[0], z[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const Vec u1 = add(_mm512_shuffle_f32x4(z[2], z[3], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(z[2], z[3], _MM_SHUFFLE(3, 1, 3, 1)));
    return add(_mm512_shuffle_f32x4(u0, u1, _MM_SHUFFLE(2, 0, 2, 0)),
               _mm512_shuffle_f32x4(u0, u1, _MM_SHUFFLE(3, 1, 3, 1)));
  }

  // 16 stored values at p -> f32.
  static Vec load_f32(const uint8_t* p) { return _mm512_loadu_ps(p); }
  static Vec load_f16(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static Vec load_bf16(const uint8_t* p) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  }
  static __m128i load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
  // e5m2 is the high byte of an f16.
  static Vec load_e5m2(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(load16(p)), 8)); }
  // e4m3 S.EEEE.MMM -> f16 S.0EEEE.MMM0000000 = value * 2^-8: sign-extend, shift by 7, clear bit 14.
  static Vec load_e4m3(const uint8_t* p) {
    const __m256i h = _mm256_slli_epi16(_mm256_cvtepi8_epi16(load16(p)), 7);
    return _mm512_cvtph_ps(_mm256_and_si256(h, _mm256_set1_epi16(short(0xBF80))));
  }
  // Integer key scores (attention_int_phases.h): 16 lanes of 4 u8 codes each, one per row.
  using IVec = __m512i;
  static constexpr CpuIsa kIsa = CpuIsa::Avx512;
  static constexpr int kIntHeadTile = 8;
  static IVec izero() { return _mm512_setzero_si512(); }
  static IVec iload(const uint32_t* p) { return _mm512_loadu_si512(p); }
  static void istore(uint32_t* p, IVec v) { _mm512_storeu_si512(p, v); }
  static IVec low_nibbles(IVec w) { return _mm512_and_si512(w, _mm512_set1_epi8(15)); }
  static IVec high_nibbles(IVec w) { return _mm512_and_si512(_mm512_srli_epi32(w, 4), _mm512_set1_epi8(15)); }
  // The 32-bit word at rows[r] + offset of each of the 16 rows: two gathers of 8, by each
  // row's distance from row 0.
  static IVec gather_words(const uint8_t* const* rows, size_t offset) {
    const __m512i base = _mm512_set1_epi64(int64_t(rows[0]));
    const __m512i lo = _mm512_sub_epi64(_mm512_loadu_si512(rows), base);
    const __m512i hi = _mm512_sub_epi64(_mm512_loadu_si512(rows + 8), base);
    const uint8_t* at = rows[0] + offset;
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_i64gather_epi32(lo, at, 1)), _mm512_i64gather_epi32(hi, at, 1), 1);
  }
  // 16 words of (f16 s, f16 m) -> s and m as f32.
  static void f16_pairs(IVec w, Vec& s, Vec& m) {
    s = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(w));
    m = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(w, 16)));
  }
  // out[k][r] = 32-bit word k of rows[r] + offset, k in 0..3: 128-bit lane i of z[a] is row
  // a + 4i, and a 4 x 4 transpose of words inside the lanes puts row a + 4i at lane 4i + a.
  static void transpose_words4(const uint8_t* const* rows, size_t offset, uint32_t* out) {
    __m512i z[4];
    for (int a = 0; a < 4; ++a) {
      // The lane index must be an immediate, so no loop over i (unoptimized builds keep loops).
      z[a] = _mm512_castsi128_si512(load16(rows[a] + offset));
      z[a] = _mm512_inserti32x4(z[a], load16(rows[a + 4] + offset), 1);
      z[a] = _mm512_inserti32x4(z[a], load16(rows[a + 8] + offset), 2);
      z[a] = _mm512_inserti32x4(z[a], load16(rows[a + 12] + offset), 3);
    }
    const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
    istore(out, _mm512_unpacklo_epi64(t0, t2));
    istore(out + 16, _mm512_unpackhi_epi64(t0, t2));
    istore(out + 32, _mm512_unpacklo_epi64(t1, t3));
    istore(out + 48, _mm512_unpackhi_epi64(t1, t3));
  }
  // a0 += codes . c per lane (vpdpbusd, u8 x s8 into int32, so no span ever needs widening).
  template <KvType>
  static void dot_chunk(IVec& a0, IVec t, uint32_t q) {
    a0 = _mm512_dpbusd_epi32(a0, t, _mm512_set1_epi32(int32_t(q)));
  }
  template <KvType>
  static constexpr int32_t span_chunks() { return 1 << 20; }
  template <KvType>
  static void end_span(IVec&, IVec&) {}
  template <KvType>
  static IVec combine(IVec a0, IVec) { return a0; }
  static Vec to_float(IVec v) { return _mm512_cvtepi32_ps(v); }

  // Values weighted by codes (attention_weighted_codes.h). A unit's 64 codes of a row as one
  // vector of centred s8: int8 in dim order, int4 as the low nibbles (even dims) then the high
  // ones (odd dims). Masked loads stop at the row's end.
  template <KvType Type>
  static __m512i unit_codes(const uint8_t* values, int32_t u, int32_t d) {
    if constexpr (Type == KvType::INT8) {
      const int32_t n = d - 64 * u < 64 ? d - 64 * u : 64;
      const __mmask64 mask = n == 64 ? ~__mmask64(0) : (__mmask64(1) << n) - 1;
      return _mm512_xor_si512(_mm512_maskz_loadu_epi8(mask, values + 64 * u), _mm512_set1_epi8(char(0x80)));
    } else {
      const int32_t n = (d - 64 * u) / 2 < 32 ? (d - 64 * u) / 2 : 32;
      const __mmask32 mask = n == 32 ? ~__mmask32(0) : (__mmask32(1) << n) - 1;
      const __m256i raw = _mm256_maskz_loadu_epi8(mask, values + 32 * u);
      const __m256i lo = _mm256_and_si256(raw, _mm256_set1_epi8(15));
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), _mm256_set1_epi8(15));
      return _mm512_sub_epi8(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), _mm512_set1_epi8(8));
    }
  }
  // Unit u of 4 rows -> 4 vectors; vector k, 32-bit lane 4L + i holds the 4 rows' codes at
  // position 16L + 4k + i of unit_codes (bytes, then words, interleaved within 128-bit lanes).
  template <KvType Type>
  static void interleave_values(const uint8_t* const* rows, int32_t u, int32_t d, uint8_t* out) {
    __m512i r[4];
    for (int a = 0; a < 4; ++a) r[a] = unit_codes<Type>(rows[a], u, d);
    const __m512i a = _mm512_unpacklo_epi8(r[0], r[1]), b = _mm512_unpackhi_epi8(r[0], r[1]);
    const __m512i c = _mm512_unpacklo_epi8(r[2], r[3]), e = _mm512_unpackhi_epi8(r[2], r[3]);
    _mm512_storeu_si512(out, _mm512_unpacklo_epi16(a, c));
    _mm512_storeu_si512(out + 64, _mm512_unpackhi_epi16(a, c));
    _mm512_storeu_si512(out + 128, _mm512_unpacklo_epi16(b, e));
    _mm512_storeu_si512(out + 192, _mm512_unpackhi_epi16(b, e));
  }
  // The dim (within its unit) of float f of a unit's accumulator: vector f / 16, lane f % 16.
  template <KvType Type>
  static constexpr int32_t value_dim(int32_t f) {
    const int32_t position = 16 * (f % 16 / 4) + 4 * (f / 16) + f % 4;
    return Type == KvType::INT8 ? position : 2 * (position % 32) + position / 32;
  }
  // 2 x W weights scaled to [0, 255] -> their nearest codes as 2W bytes (low bytes of the words).
  static void store_weight_codes(Vec w0, Vec w1, uint8_t* out) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(w0)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(w1)));
  }
  // Group slots: the first float of each 128-bit lane of
  // vector 0 (every vector's lane L holds dims of the same group).
  static constexpr int kGroupSlots = 4;
  static constexpr int32_t group_slot(int32_t i) { return 4 * i; }
  // Weight codes of 4 quads (16 bytes of each lane's group, from byte `at` of its 32) with lane
  // L's from group lane_group[L] of codes [groups][32].
  static __m512i weight_lanes(const uint8_t* weight_codes, const int32_t* lane_group, int32_t at) {
    if (lane_group[0] == lane_group[3]) return _mm512_broadcast_i32x4(load16(weight_codes + 32 * lane_group[0] + at));
    __m512i lanes = _mm512_castsi128_si512(load16(weight_codes + 32 * lane_group[0] + at));
    lanes = _mm512_inserti32x4(lanes, load16(weight_codes + 32 * lane_group[1] + at), 1);
    lanes = _mm512_inserti32x4(lanes, load16(weight_codes + 32 * lane_group[2] + at), 2);
    return _mm512_inserti32x4(lanes, load16(weight_codes + 32 * lane_group[3] + at), 3);
  }
  // acc[f] += step * sum over the run's 8 quads (a pair of tiles, 32 rows) of the weight codes .
  // the centred codes (vpdpbusd), lane L's weights and step those of group lane_group[L] (one
  // group in every int4 unit).
  template <KvType, int Quads>
  static void accumulate_unit(const uint8_t* codes, const uint8_t* weight_codes, const float* steps,
                              const int32_t* lane_group, float* acc) {
    static_assert(Quads == 8, "a pair of 16-row tiles");
    Vec step;
    if (lane_group[0] == lane_group[3]) {
      step = set1(steps[lane_group[0]]);
    } else {
      const __m128 lane_steps = _mm_setr_ps(steps[lane_group[0]], steps[lane_group[1]], steps[lane_group[2]], steps[lane_group[3]]);
      step = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3), _mm512_castps128_ps512(lane_steps));
    }
    __m512i w[8];
    for (int half = 0; half < 2; ++half) {
      const __m512i lanes = weight_lanes(weight_codes, lane_group, 16 * half);
      w[4 * half] = _mm512_shuffle_epi32(lanes, _MM_PERM_AAAA);
      w[4 * half + 1] = _mm512_shuffle_epi32(lanes, _MM_PERM_BBBB);
      w[4 * half + 2] = _mm512_shuffle_epi32(lanes, _MM_PERM_CCCC);
      w[4 * half + 3] = _mm512_shuffle_epi32(lanes, _MM_PERM_DDDD);
    }
    for (int k = 0; k < 4; ++k) {
      __m512i sum = izero();
      for (int q = 0; q < 8; ++q) sum = _mm512_dpbusd_epi32(sum, w[q], _mm512_loadu_si512(codes + q * kValueQuadBytes + k * 64));
      store(acc + 16 * k, fma(step, _mm512_cvtepi32_ps(sum), load(acc + 16 * k)));
    }
  }
};

}  // namespace

void paged_attention_avx512(const PagedKvLayer& layer, const PagedSeq& seq, const AttentionArgs& args) {
  paged_attention_simd<Avx512>(layer, seq, args);
}

}  // namespace kvdesk
