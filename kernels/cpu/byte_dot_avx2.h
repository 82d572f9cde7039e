// Internal, included by the 256-bit integer kernels that build twice from one source, for AVX2
// and, with KVDESK_AVXVNNI, for AVX-VNNI: the u8 x s8 dot product of 4 bytes into each int32
// lane. AVX2 spends vpmaddubsw (byte pairs into saturating int16), vpmaddwd (int16 pairs into
// int32) and an add where AVX-VNNI's VEX-encoded vpdpbusd does one instruction with no int16
// step. Every kernel bounds its int16 sums below 2^15 (each states its bound), so nothing
// saturates and both tiers give the same integers as the scalar twins.
//
//   dot_u8s8(acc, u8, s8)        acc + the products, int32 lanes
//   ByteSum                      several chunks' products: int16 pairs that AVX2 widens once
//                                (byte_sum_zero, byte_sum or byte_sum_pair, byte_sum_add,
//                                widen), int32 lanes on AVX-VNNI
//   ByteScale                    a per-lane int32 factor of a ByteSum (widen_scaled): AVX2 keeps
//                                it in both int16 halves of the lane for one vpmaddwd, AVX-VNNI
//                                as the int32 vpmulld takes it
#pragma once
#include "kernels/cpu/simd_prelude.h"

namespace kvdesk {
namespace {

// The tier these kernels build for (kernels/dot.h CpuIsa), and KVDESK_TIER_NAME(f), the tier's
// name for an exported function f: f_avx2 or f_avxvnni (kernels/cpu/dot_isa.h declares both).
#if defined(KVDESK_AVXVNNI)
#define KVDESK_TIER_NAME(name) name##_avxvnni
#if !defined(__AVXVNNI__)
#error "KVDESK_AVXVNNI sources need -mavxvnni"
#endif
constexpr bool kByteDotVnni = true;
#else
#define KVDESK_TIER_NAME(name) name##_avx2
constexpr bool kByteDotVnni = false;
#endif

ALWAYS_INLINE __m256i dot_u8s8(__m256i acc, __m256i u8, __m256i s8) {
#if defined(KVDESK_AVXVNNI)
  return _mm256_dpbusd_avx_epi32(acc, u8, s8);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u8, s8), _mm256_set1_epi16(1)));
#endif
}

// int16 pairs on AVX2, int32 lanes on AVX-VNNI.
using ByteSum = __m256i;

ALWAYS_INLINE ByteSum byte_sum_zero() { return _mm256_setzero_si256(); }

ALWAYS_INLINE ByteSum byte_sum(__m256i u8, __m256i s8) {
#if defined(KVDESK_AVXVNNI)
  return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u8, s8);
#else
  return _mm256_maddubs_epi16(u8, s8);
#endif
}

ALWAYS_INLINE ByteSum byte_sum_add(ByteSum sum, __m256i u8, __m256i s8) {
#if defined(KVDESK_AVXVNNI)
  return _mm256_dpbusd_avx_epi32(sum, u8, s8);
#else
  return _mm256_add_epi16(sum, _mm256_maddubs_epi16(u8, s8));
#endif
}

// Two chunks' products: on AVX2 both vpmaddubsw before their add, the order GCC 12 allocates the
// AVX2 Q6_Kx8 kernel's registers best in (chained through byte_sum_add it kept 33 more register
// copies and spills).
ALWAYS_INLINE ByteSum byte_sum_pair(__m256i u0, __m256i s0, __m256i u1, __m256i s1) {
#if defined(KVDESK_AVXVNNI)
  return _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u0, s0), u1, s1);
#else
  return _mm256_add_epi16(_mm256_maddubs_epi16(u0, s0), _mm256_maddubs_epi16(u1, s1));
#endif
}

// The sum in int32 lanes, 4 products each.
ALWAYS_INLINE __m256i widen(ByteSum sum) {
#if defined(KVDESK_AVXVNNI)
  return sum;
#else
  return _mm256_madd_epi16(sum, _mm256_set1_epi16(1));
#endif
}

using ByteScale = __m256i;

// From a factor in both int16 halves of each int32 lane (lanes 2r and 2r + 1 as int16 hold the
// same value).
ALWAYS_INLINE ByteScale byte_scale(__m256i pair_scale) {
#if defined(KVDESK_AVXVNNI)
  return _mm256_srai_epi32(pair_scale, 16);
#else
  return pair_scale;
#endif
}

// widen(sum) * scale per int32 lane.
ALWAYS_INLINE __m256i widen_scaled(ByteSum sum, ByteScale scale) {
#if defined(KVDESK_AVXVNNI)
  return _mm256_mullo_epi32(sum, scale);
#else
  return _mm256_madd_epi16(sum, scale);
#endif
}

}  // namespace
}  // namespace kvdesk
