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
