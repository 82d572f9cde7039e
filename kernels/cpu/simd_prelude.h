// Internal, included by the ISA translation units (dot/matmul, attention): the intrinsics, the
// ALWAYS_INLINE marker and the small register helpers every ISA's micro-kernels use. Each
// translation unit is built with its own ISA flags, so everything here has internal linkage
// and each ISA keeps its own copy; the AVX-512 helpers exist only where __AVX512F__ is on.
#pragma once
#include <cstddef>
#include <cstdint>

// GCC 12's AVX-512 intrinsics self-initialize their undefined operands (`__Y = __Y`) and
// trip -Wuninitialized once inlined (GCC PR 105593); silence that inside the header only
// (clang, the fuzz build's compiler, has no -Wmaybe-uninitialized).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#pragma GCC diagnostic pop

// Micro-kernel pieces pass vector structs around; they must inline to stay in registers.
#define ALWAYS_INLINE inline __attribute__((always_inline))

namespace kvdesk {
namespace {

ALWAYS_INLINE __m256i load_256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Sum, max and integer sum of the lanes of a vector.
ALWAYS_INLINE float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

ALWAYS_INLINE float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

ALWAYS_INLINE int hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 1)));
}

ALWAYS_INLINE void set_zero(__m256& v) { v = _mm256_setzero_ps(); }

// The cache lines `ahead` bytes past block b, as many as the block has: block after block of a
// stream, they cover it without gaps (a prefetch past the matrix's end reads nothing and cannot
// fault). The address is computed as an integer: a pointer may not point that far past its array.
template <class Block>
ALWAYS_INLINE void prefetch_block_ahead(const Block* b, uintptr_t ahead) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(b) + ahead;
#pragma GCC unroll 32
  for (size_t line = 0; line < sizeof(Block); line += 64) _mm_prefetch(reinterpret_cast<const char*>(at + line), _MM_HINT_T0);
}

#if defined(__AVX512F__)
// 32 bytes at p into both 256-bit halves
ALWAYS_INLINE __m512i broadcast_256(const uint8_t* p) { return _mm512_broadcast_i64x4(load_256(p)); }

ALWAYS_INLINE float hsum(__m512 v) { return _mm512_reduce_add_ps(v); }

ALWAYS_INLINE void set_zero(__m512& v) { v = _mm512_setzero_ps(); }
#endif

}  // namespace
}  // namespace kvdesk
