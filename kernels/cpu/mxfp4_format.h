// Internal, included by the ISA translation units after dot_subblock.h: MXFP4 (ggml_types.h)
// as a SubBlockKernel format. One block is one 32-value act block: the nibbles index the
// doubled E2M1 levels with one byte shuffle, signed (kSigned, so the u8 x s8 dot runs on |level|
// <= 12), and the block's scale is its E8M0 exponent as a float. Both ISAs use the ymm kernel:
// the 17-byte blocks do not line up for the zmm gathers of the 18-byte Q4_0 family.
#pragma once
#include "kernels/cpu/dot_subblock.h"
#include "kernels/ggml_types.h"

namespace kvdesk {
namespace {

struct MXFP4Format {
  using Block = BlockMXFP4;
  static constexpr int kSubBlocks = 1;
  static constexpr int kOffset = 0;
  static constexpr bool kHasMin = false;
  static constexpr bool kSigned = true;
  struct Scales {
    __m256 d;
  };
  ALWAYS_INLINE static Scales scales(const Block& b) { return Scales{_mm256_set1_ps(mxfp4_scale(b.e))}; }
  ALWAYS_INLINE static __m256i quants(const Block& b, int) {
    const __m256i table =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Values)));
    return _mm256_shuffle_epi8(table, nibbles_32(b.qs));
  }
  ALWAYS_INLINE static __m256 scale(const Scales& s, int) { return s.d; }
};

}  // namespace
}  // namespace kvdesk
