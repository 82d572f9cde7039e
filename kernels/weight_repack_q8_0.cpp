// Q8_0 rows into Q8_0x8 groups (layout in kernels/weight_repack.h), and the scalar truth of
// products over that layout: it reads every quant back out of the interleaved bytes and sums
// them exactly as ref::vec_dot does for Q8_0, so the two agree bit for bit.
#include <cstring>

#include "kernels/check.h"
#include "kernels/dot.h"
#include "kernels/fp16.h"
#include "kernels/weight_repack.h"

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
  KVDESK_ASSERT(args.weight_type == GgmlType::Q8_0x8 && row_begin % kInterleavedRows == 0);
  const int64_t blocks = args.n / kQ8_0BlockValues;
  const size_t a_stride = act_row_bytes(args.weight_type, args.n);
  const auto* groups = static_cast<const BlockQ8_0x8*>(args.weights);
  for (int64_t b = 0; b < args.batch; ++b) {
    const auto* a = reinterpret_cast<const BlockQ8Act*>(static_cast<const char*>(args.acts) + b * a_stride);
    for (int64_t r = row_begin; r < row_end; ++r) {
      const BlockQ8_0x8* group = groups + (r / kInterleavedRows) * blocks;
      args.y[b * args.ld_y + r] = dot_q8_0x8_row(group, static_cast<int>(r % kInterleavedRows), a, blocks);
    }
  }
}

}  // namespace ref
}  // namespace kvdesk
