// IQ4_XS rows into IQ4_XSx8 groups (layout in kernels/weight_repack.h), and the scalar truth of
// products over that layout: it reads every index and sub-block scale back out of the
// interleaved bytes and sums them exactly as ref::vec_dot does for IQ4_XS, so the two agree bit
// for bit.
#include <cstring>

#include "kernels/check.h"
#include "kernels/dot.h"
#include "kernels/fp16.h"
#include "kernels/weight_repack.h"
#include "kernels/weight_repack_six_bits.h"
#include "kernels/weight_repack_twin.h"

namespace kvdesk {
namespace {

constexpr int kSubBlocks = 8;     // 32-value sub-blocks of a super-block
constexpr int kChunks = 4;        // chunks of 4 bytes per row in a sub-block
constexpr int kChunkBytes = 4;    // bytes of one row in a chunk
constexpr int kSubBlockValues = 32;

// Number of the six-bit scale ls[s] of row r (weight_repack.h).
int scale_number(int s, int r) { return kInterleavedRows * s + r; }

void put_scale(BlockIQ4_XSx8& b, int v, int value) {
  put_six_bit_value<kIQ4_XSScaleValues>(b.scale_low, b.scale_high, v, value);
}

int scale(const BlockIQ4_XSx8& b, int v) { return six_bit_value<kIQ4_XSScaleValues>(b.scale_low, b.scale_high, v); }

// Super-block j of 8 IQ4_XS rows (in[0], in[stride], ...) into `out`.
void interleave_block(const BlockIQ4_XS* in, int64_t stride, BlockIQ4_XSx8& out) {
  std::memset(&out, 0, sizeof(out));
  for (int r = 0; r < kInterleavedRows; ++r) {
    const BlockIQ4_XS& row = in[r * stride];
    out.d[r] = row.d;
    for (int s = 0; s < kSubBlocks; ++s) {
      put_scale(out, scale_number(s, r), iq4_xs_scale(row, s));
      for (int c = 0; c < kChunks; ++c) {
        std::memcpy(&out.qs[32 * (kChunks * s + c) + kChunkBytes * r], &row.qs[16 * s + kChunkBytes * c], kChunkBytes);
      }
    }
  }
}

// Level (kIq4nlValues) of value l (0..31) of sub-block s of row r.
int level(const BlockIQ4_XSx8& b, int r, int s, int l) {
  const int low_index = l % 16;
  const uint8_t byte = b.qs[32 * (kChunks * s + low_index / kChunkBytes) + kChunkBytes * r + low_index % kChunkBytes];
  return kIq4nlValues[l < 16 ? byte & 15 : byte >> 4];
}

// Row r of the group against one act row, as ref's dot_iq4_xs: act block 8j + s meets
// sub-block s of super-block j.
float dot_iq4_xsx8_row(const BlockIQ4_XSx8* group, int r, const BlockQ8Act* a, int64_t blocks) {
  double sum = 0.0;
  for (int64_t j = 0; j < blocks; ++j) {
    const float d = fp16_to_fp32(group[j].d[r]);
    for (int s = 0; s < kSubBlocks; ++s) {
      const BlockQ8Act& as = a[kSubBlocks * j + s];
      int32_t isum = 0;
      for (int l = 0; l < kSubBlockValues; ++l) isum += level(group[j], r, s, l) * as.qs[l];
      sum += static_cast<double>(d * (scale(group[j], scale_number(s, r)) - 32) * as.d) * isum;
    }
  }
  return static_cast<float>(sum);
}

}  // namespace

void interleave_iq4_xs_group(const BlockIQ4_XS* rows, int64_t blocks, BlockIQ4_XSx8* group) {
  for (int64_t j = 0; j < blocks; ++j) interleave_block(rows + j, blocks, group[j]);
}

namespace ref {

void matmul_iq4_xsx8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  matmul_x8_rows<BlockIQ4_XSx8, BlockQ8Act>(GgmlType::IQ4_XSx8, kQK_K, args, row_begin, row_end, dot_iq4_xsx8_row);
}

}  // namespace ref
}  // namespace kvdesk
