// Internal, included by the ISA translation units after dot_subblock.h: the SubBlockKernel
// format of the block types with one scale and 32 4-bit level indices, IQ4_NL (kIq4nlValues,
// an fp16 scale) and MXFP4 (the doubled E2M1 levels, an E8M0 exponent, ggml_types.h). One block
// is one 32-value act block: the nibbles become signed levels with one byte shuffle (kSigned, so
// the u8 x s8 dot runs on |level| <= 127) and the block's scale is one float. AVX2 uses both;
// AVX-512 uses MXFP4's (its IQ4_NL rows take a zmm kernel, the 17-byte MXFP4 blocks do not line
// up for its gathers).
#pragma once
#include "kernels/cpu/dot_subblock.h"
#include "kernels/ggml_types.h"

namespace kvdesk {
namespace {

// 16 index bytes -> [32] s8 levels[index]: low nibbles (values 0..15), then high nibbles (16..31)
ALWAYS_INLINE __m256i levels_of(const int8_t* levels, const uint8_t* qs) {
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(levels)));
  return _mm256_shuffle_epi8(table, nibbles_32(qs));
}

// Block: qs[16] of indices into kLevels; scale_of(block) its scale.
template <class B, const int8_t* kLevels, float (*scale_of)(const B&)>
struct LevelIndexFormat {
  using Block = B;
  static constexpr int kSubBlocks = 1;
  static constexpr int kOffset = 0;
  static constexpr bool kHasMin = false;
  static constexpr bool kSigned = true;
  struct Scales {
    __m256 d;
  };
  ALWAYS_INLINE static Scales scales(const Block& b) { return Scales{_mm256_set1_ps(scale_of(b))}; }
  ALWAYS_INLINE static __m256i quants(const Block& b, int) { return levels_of(kLevels, b.qs); }
  ALWAYS_INLINE static __m256 scale(const Scales& s, int) { return s.d; }
};

inline float mxfp4_block_scale(const BlockMXFP4& b) { return mxfp4_scale(b.e); }
using MXFP4Format = LevelIndexFormat<BlockMXFP4, kMxfp4Values, mxfp4_block_scale>;

}  // namespace
}  // namespace kvdesk
