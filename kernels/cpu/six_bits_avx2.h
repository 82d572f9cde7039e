// Internal, included only by the AVX2 GEMMs whose blocks keep 128 six-bit values packed as
// kernels/weight_repack_six_bits.h lays them out (Q4_Kx8's scales and mins, Q3_Kx8's scales):
// all of them unpacked to bytes with a few vector shifts.
#pragma once
#include <cstdint>

#include "kernels/cpu/simd_prelude.h"

namespace kvdesk {
namespace {

// The 128 values as u8, value 32k + i in byte i of v[k]: low 4 bits from the 64 bytes at `low`
// (values 0..63 the low nibbles, 64..127 the high ones), high 2 bits k at bits 2k, 2k + 1 of
// the 32 bytes at `high`.
ALWAYS_INLINE void unpack_six_bits(const uint8_t* low, const uint8_t* high, __m256i (&v)[4]) {
  const __m256i low4 = _mm256_set1_epi8(15);
  const __m256i two = _mm256_set1_epi8(3);
  const __m256i lows[2] = {load_256(low), load_256(low + 32)};
  const __m256i highs = load_256(high);
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    const __m256i l = _mm256_and_si256(k < 2 ? lows[k] : _mm256_srli_epi16(lows[k - 2], 4), low4);
    const __m256i h = _mm256_and_si256(_mm256_srl_epi16(highs, _mm_cvtsi32_si128(2 * k)), two);
    v[k] = _mm256_or_si256(l, _mm256_slli_epi16(h, 4));
  }
}

}  // namespace
}  // namespace kvdesk
