// Q8_0 rows into Q8_0x8 groups (layout in kernels/weight_repack.h), and the scalar truth of
// products over that layout: it reads every quant back out of the interleaved bytes and sums
// them exactly as ref::vec_dot does for Q8_0, so the two agree bit for bit.
#include <cstring>

#include "kernels/check.h"
#include "kernels/dot.h"
#include "kernels/fp16.h"
#include "kernels/weight_repack.h"
#include "kernels/weight_repack_twin.h"

namespace kvdesk {
namespace {

constexpr int kChunks = 8;        // 32-byte chunks of a BlockQ8_0x8's qs
constexpr int kChunkBytes = 4;    // bytes of one row in a chunk

// Value i (0..31) of row r in an interleaved block.
int q8_0x8_value(const BlockQ8_0x8& b, int r, int i) {
  return b.qs[(i / kChunkBytes) * kInterleavedRows * kChunkBytes + r * kChunkBytes + i % kChunkBytes];
}

// sum_b fp16(d[r]) * a[b].d * sum_i q[i] * a[b].qs[i], as ref::vec_dot for Q8_0.
float dot_q8_0x8_row(const BlockQ8_0x8* group, int r, const BlockQ8Act* a, int64_t blocks) {
  double sum = 0.0;
  for (int64_t j = 0; j < blocks; ++j) {
    int32_t isum = 0;
    for (int i = 0; i < kQ8_0BlockValues; ++i) isum += q8_0x8_value(group[j], r, i) * a[j].qs[i];
    sum += static_cast<double>(fp16_to_fp32(group[j].d[r]) * a[j].d) * isum;
  }
  return static_cast<float>(sum);
}

}  // namespace

void interleave_q8_0_group(const BlockQ8_0* rows, int64_t blocks, BlockQ8_0x8* group) {
  for (int64_t j = 0; j < blocks; ++j) {
    BlockQ8_0x8& out = group[j];
    for (int r = 0; r < kInterleavedRows; ++r) {
      const BlockQ8_0& in = rows[r * blocks + j];
      out.d[r] = in.d;
      for (int c = 0; c < kChunks; ++c) {
        std::memcpy(&out.qs[c * kInterleavedRows * kChunkBytes + r * kChunkBytes], &in.qs[c * kChunkBytes], kChunkBytes);
      }
    }
  }
}

namespace ref {

void matmul_q8_0x8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  matmul_x8_rows<BlockQ8_0x8, BlockQ8Act>(GgmlType::Q8_0x8, kQ8_0BlockValues, args, row_begin, row_end, dot_q8_0x8_row);
}

}  // namespace ref
}  // namespace kvdesk
