// AVX-512 paged attention: the shared driver (attention_driver.h) over 16-float vectors, with
// every KV type widened to f32 in registers (fp8 through vcvtph2ps). Built with AVX-512 flags,
// reached only through cpu::paged_attention after the CPU check.
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
  static Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
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
  using KeyChunk = __m512i;
  static constexpr int kIntHeadTile = 8;
  static IVec izero() { return _mm512_setzero_si512(); }
  static IVec iload(const uint32_t* p) { return _mm512_loadu_si512(p); }
  static void istore(uint32_t* p, IVec v) { _mm512_storeu_si512(p, v); }
  static IVec low_nibbles(IVec w) { return _mm512_and_si512(w, _mm512_set1_epi8(15)); }
  static IVec high_nibbles(IVec w) { return _mm512_and_si512(_mm512_srli_epi32(w, 4), _mm512_set1_epi8(15)); }
  static KeyChunk key_chunk(const uint32_t* p) { return iload(p); }
  // 16 words of (f16 s, f16 m) -> s and m as f32.
  static void f16_pairs(const uint32_t* p, Vec& s, Vec& m) {
    const __m512i w = iload(p);
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
  // A chunk's query codes c = 128 * hi + lo as two words of 4 signed bytes: hi, then lo.
  static void pack_query_chunk(const int16_t* c, uint32_t* out) {
    uint8_t hi[4], lo[4];
    for (int j = 0; j < 4; ++j) {
      const int32_t h = (c[j] + 64) >> 7;
      hi[j] = uint8_t(int8_t(h));
      lo[j] = uint8_t(int8_t(c[j] - 128 * h));
    }
    std::memcpy(out, hi, 4);
    std::memcpy(out + 1, lo, 4);
  }
  // a0 += codes . hi, a1 += codes . lo per lane (vpdpbusd, u8 x s8 into int32).
  static void dot_chunk(IVec& a0, IVec& a1, KeyChunk t, const uint32_t* q) {
    a0 = _mm512_dpbusd_epi32(a0, t, _mm512_set1_epi32(int32_t(q[0])));
    a1 = _mm512_dpbusd_epi32(a1, t, _mm512_set1_epi32(int32_t(q[1])));
  }
  static IVec combine(IVec a0, IVec a1) { return _mm512_add_epi32(_mm512_slli_epi32(a0, 7), a1); }
  static Vec to_float(IVec v) { return _mm512_cvtepi32_ps(v); }

  // 16 unsigned int8 codes -> f32.
  static Vec load_u8(const uint8_t* p) { return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(load16(p))); }
  // 8 bytes of nibble pairs -> 16 codes: each byte twice, odd lanes shifted by 4, masked.
  static Vec load_u4(const uint8_t* p) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    const __m512i w = _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(b, b));
    const __m512i shifts = _mm512_set_epi32(4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0);
    return _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srlv_epi32(w, shifts), _mm512_set1_epi32(15)));
  }
};

}  // namespace

void paged_attention_avx512(const PagedKvLayer& layer, const PagedSeq& seq, const AttentionArgs& args) {
  paged_attention_simd<Avx512>(layer, seq, args);
}

}  // namespace kvdesk
