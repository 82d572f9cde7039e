// AVX2 paged attention: the shared driver (attention_driver.h) over 8-float vectors, with
// every KV type widened to f32 in registers (fp8 through vcvtph2ps). Built with AVX2/FMA/F16C
// flags, reached only through cpu::paged_attention after the CPU check; it also serves head
// dims that are a multiple of 8 but not of 16 on AVX-512 machines.
#include "kernels/cpu/simd_prelude.h"

#include "kernels/cpu/attention_driver.h"
#include "kernels/cpu/attention_isa.h"

namespace kvdesk {
namespace {

struct Avx2 {
  using Vec = __m256;
  static constexpr int kLanes = 8;

  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec set1(float x) { return _mm256_set1_ps(x); }
  static Vec load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
  static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static Vec round(Vec x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // y * 2^n for integral n in [-126, 127]: n goes straight into the exponent field.
  static Vec ldexp(Vec y, Vec n) {
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
  }
  static Vec zero_below(Vec x, float limit, Vec y) { return _mm256_and_ps(_mm256_cmp_ps(x, set1(limit), _CMP_GE_OQ), y); }
  static Vec first_lanes(Vec v, int32_t n, float fill) {
    const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_blendv_ps(set1(fill), v, _mm256_castsi256_ps(keep));
  }
  static float reduce_add(Vec v) { return hsum(v); }
  static float reduce_max(Vec v) { return hmax(v); }

  // parts[8][8] -> lane r = sum of parts[r][0..8): pairs, quads, then the two 128-bit halves.
  static Vec transpose_sum(const float* parts) {
    Vec x[4], z[2];
    for (int k = 0; k < 4; ++k) {
      const Vec a = load(parts + 16 * k);
      const Vec b = load(parts + 16 * k + 8);
      x[k] = add(_mm256_unpacklo_ps(a, b), _mm256_unpackhi_ps(a, b));
    }
    for (int k = 0; k < 2; ++k) {
      z[k] = add(_mm256_shuffle_ps(x[2 * k], x[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                 _mm256_shuffle_ps(x[2 * k], x[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    }
    return add(_mm256_permute2f128_ps(z[0], z[1], 0x20), _mm256_permute2f128_ps(z[0], z[1], 0x31));
  }

  // 8 stored values at p -> f32.
  static Vec load_f32(const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
  static __m128i load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
  static __m128i load8(const uint8_t* p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)); }
  static Vec load_f16(const uint8_t* p) { return _mm256_cvtph_ps(load16(p)); }
  static Vec load_bf16(const uint8_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load16(p)), 16));
  }
  // e5m2 is the high byte of an f16.
  static Vec load_e5m2(const uint8_t* p) { return _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(load8(p)), 8)); }
  // e4m3 S.EEEE.MMM -> f16 S.0EEEE.MMM0000000 = value * 2^-8: sign-extend, shift by 7, clear bit 14.
  static Vec load_e4m3(const uint8_t* p) {
    const __m128i h = _mm_slli_epi16(_mm_cvtepi8_epi16(load8(p)), 7);
    return _mm256_cvtph_ps(_mm_and_si128(h, _mm_set1_epi16(short(0xBF80))));
  }
  // 8 unsigned int8 codes -> f32.
  static Vec load_u8(const uint8_t* p) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(load8(p))); }
  // 4 bytes of nibble pairs -> 8 codes: each byte twice, then odd lanes shifted by 4.
  static Vec load_u4(const uint8_t* p) {
    int32_t bytes;
    std::memcpy(&bytes, p, sizeof(bytes));
    const __m128i b = _mm_cvtsi32_si128(bytes);
    const __m256i w = _mm256_cvtepu8_epi32(_mm_unpacklo_epi8(b, b));
    const __m256i shifts = _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4);
    return _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srlv_epi32(w, shifts), _mm256_set1_epi32(15)));
  }
};

}  // namespace

void paged_attention_avx2(const PagedKvLayer& layer, const PagedSeq& seq, const AttentionArgs& args) {
  paged_attention_simd<Avx2>(layer, seq, args);
}

}  // namespace kvdesk
