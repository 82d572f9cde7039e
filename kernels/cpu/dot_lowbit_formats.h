// Internal, included only by dot_avx2.cpp after dot_subblock.h: the formats of the low-bit
// types Q2_K, Q3_K, IQ4_NL and IQ4_XS for its SubBlockKernel (the format contract is described
// there; AVX-512 has zmm kernels for these in dot_avx512.cpp and dot_lowbit_avx512.cpp). One
// step is one 32-value act block:
//   Q2_K, Q3_K: two 16-value sub-blocks, lanes 0-3 and 4-7 with their own scales (pair_scales);
//     Q2_K's mins differ per half too, so they are lane mins.
//   IQ4_NL, IQ4_XS: 4-bit indices looked up in the 16-entry level table with one byte shuffle
//     per 32 values; the levels are signed, so the dot runs on |level| (kSigned). IQ4_NL's
//     format is level_index_format.h's, which MXFP4 shares.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/cpu/level_index_format.h"
#include "kernels/cpu/simd_prelude.h"
#include "kernels/ggml_types.h"

namespace kvdesk {
namespace {

// Sub-block pair s = 4h + k of a Q2_K / Q3_K block: its 32 bit pairs, (qs[32h + l] >> 2k) & 3
ALWAYS_INLINE __m256i low_bit_pairs(const uint8_t* qs, int s) {
  const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * (s / 4)));
  return _mm256_and_si256(_mm256_srl_epi16(bytes, _mm_cvtsi32_si128(2 * (s % 4))), _mm256_set1_epi8(3));
}

// bytes[16] -> 16 floats times `mul` (two 8-lane halves)
struct Floats16 {
  alignas(32) float v[16];
};
ALWAYS_INLINE Floats16 bytes_to_floats(__m128i bytes, __m256 mul, __m256 add) {
  Floats16 out;
  _mm256_store_ps(out.v, _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)), mul, add));
  _mm256_store_ps(out.v + 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(bytes, 8))), mul, add));
  return out;
}

struct Q2_KFormat {
  using Block = BlockQ2_K;
  static constexpr int kSubBlocks = 8;
  static constexpr int kOffset = 0;
  static constexpr bool kHasMin = false;
  static constexpr bool kLaneMins = true;
  struct Scales {
    Floats16 scale;  // [16] d * (scales[i] & 15)
    Floats16 min;    // [16] -dmin * (scales[i] >> 4)
  };
  ALWAYS_INLINE static Scales scales(const Block& b) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    const __m128i low4 = _mm_set1_epi8(15);
    const __m256 zero = _mm256_setzero_ps();
    return Scales{bytes_to_floats(_mm_and_si128(packed, low4), _mm256_set1_ps(_cvtsh_ss(b.d)), zero),
                  bytes_to_floats(_mm_and_si128(_mm_srli_epi16(packed, 4), low4),
                                  _mm256_set1_ps(-_cvtsh_ss(b.dmin)), zero)};
  }
  ALWAYS_INLINE static __m256i quants(const Block& b, int s) { return low_bit_pairs(b.qs, s); }
  ALWAYS_INLINE static __m256 scale(const Scales& sc, int s) { return pair_scales(sc.scale.v, s); }
  ALWAYS_INLINE static __m256 lane_mins(const Scales& sc, int s) { return pair_scales(sc.min.v, s); }
};

struct Q3_KFormat {
  using Block = BlockQ3_K;
  static constexpr int kSubBlocks = 8;
  static constexpr int kOffset = 4;
  static constexpr bool kHasMin = false;
  using Scales = Floats16;  // [16] d * (sc[i] - 32)
  // The 12 packed bytes -> sc[16] with 32-bit word operations (q3_k_scale for all sixteen):
  // words 0, 1 hold the low nibbles of sc[0..7] and (>> 4) of sc[8..15]; word 2 the high 2 bits,
  // sc[4g + i] taking bits 2g of byte 8 + i.
  ALWAYS_INLINE static Scales scales(const Block& b) {
    uint32_t w[3];
    std::memcpy(w, b.scales, sizeof(w));
    constexpr uint32_t kLow4 = 0x0F0F0F0F, kTop2 = 0x03030303;
    const uint32_t sc0 = (w[0] & kLow4) | (w[2] & kTop2) << 4;
    const uint32_t sc1 = (w[1] & kLow4) | ((w[2] >> 2) & kTop2) << 4;
    const uint32_t sc2 = ((w[0] >> 4) & kLow4) | ((w[2] >> 4) & kTop2) << 4;
    const uint32_t sc3 = ((w[1] >> 4) & kLow4) | ((w[2] >> 6) & kTop2) << 4;
    const __m128i bytes = _mm_setr_epi32(static_cast<int>(sc0), static_cast<int>(sc1), static_cast<int>(sc2),
                                         static_cast<int>(sc3));
    const float d = _cvtsh_ss(b.d);
    return bytes_to_floats(bytes, _mm256_set1_ps(d), _mm256_set1_ps(-32.0f * d));
  }
  // q + 4 in 0..7: the bit pair, plus 4 * bit s of hmask[l]
  ALWAYS_INLINE static __m256i quants(const Block& b, int s) {
    const __m256i hmask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.hmask));
    const __m256i high = _mm256_and_si256(_mm256_srl_epi16(hmask, _mm_cvtsi32_si128(s)), _mm256_set1_epi8(1));
    return _mm256_or_si256(low_bit_pairs(b.qs, s), _mm256_slli_epi16(high, 2));
  }
  ALWAYS_INLINE static __m256 scale(const Scales& sc, int s) { return pair_scales(sc.v, s); }
};

inline float iq4_nl_block_scale(const BlockIQ4_NL& b) { return _cvtsh_ss(b.d); }
using IQ4_NLFormat = LevelIndexFormat<BlockIQ4_NL, kIq4nlValues, iq4_nl_block_scale>;


struct IQ4_XSFormat {
  using Block = BlockIQ4_XS;
  static constexpr int kSubBlocks = 8;
  static constexpr int kOffset = 0;
  static constexpr bool kHasMin = false;
  static constexpr bool kSigned = true;
  struct Scales {
    float scale[8];  // [8] d * (ls[s] - 32)
  };
  ALWAYS_INLINE static Scales scales(const Block& b) {
    Scales out;
    const float d = _cvtsh_ss(b.d);
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) out.scale[s] = d * static_cast<float>(iq4_xs_scale(b, s) - 32);
    return out;
  }
  ALWAYS_INLINE static __m256i quants(const Block& b, int s) { return levels_of(kIq4nlValues, b.qs + 16 * s); }
  ALWAYS_INLINE static __m256 scale(const Scales& sc, int s) { return _mm256_set1_ps(sc.scale[s]); }
};

}  // namespace
}  // namespace kvdesk
