// Q6_K rows into Q6_Kx8 groups (layout in kernels/weight_repack.h), and the scalar truth of
// products over that layout: it reads every quant and scale back out of the interleaved bytes
// and sums them exactly as ref::vec_dot does for Q6_K, so the two agree bit for bit.
#include "kernels/check.h"
#include "kernels/dot.h"
#include "kernels/fp16.h"
#include "kernels/weight_repack.h"
#include "kernels/weight_repack_runs.h"
#include "kernels/weight_repack_twin.h"

namespace kvdesk {
namespace {

constexpr int kSubBlocks = 16;    // 16-value sub-blocks of a super-block

void interleave_block(const BlockQ6_K* in, int64_t stride, BlockQ6_Kx8& out) {
  for (int r = 0; r < kInterleavedRows; ++r) {
    const BlockQ6_K& row = in[r * stride];
    out.d[r] = row.d;
    for (int i = 0; i < kSubBlocks; ++i) out.scales[kInterleavedRows * i + r] = row.scales[i];
    for (int run = 0; run < 4; ++run) interleave_run(row.ql, run, r, out.ql);
    for (int run = 0; run < 2; ++run) interleave_run(row.qh, run, r, out.qh);
  }
}

// q (0..63) of value v = 128h + 32k + l of row r.
int q6_kx8_value(const BlockQ6_Kx8& b, int r, int v) {
  const int h = v / 128;
  const int k = v % 128 / 32;
  const int l = v % 32;
  const uint8_t low = run_byte(b.ql, 2 * h + (k & 1), r, l);
  const uint8_t high = run_byte(b.qh, h, r, l);
  return ((k < 2 ? low : low >> 4) & 15) | ((high >> (2 * k)) & 3) << 4;
}

// Row r of the group against one act row, as ref's dot_q6_k.
float dot_q6_kx8_row(const BlockQ6_Kx8* group, int r, const BlockQ8K* a, int64_t blocks) {
  double sum = 0.0;
  for (int64_t j = 0; j < blocks; ++j) {
    const BlockQ6_Kx8& b = group[j];
    int32_t scaled = 0;
    for (int i = 0; i < kSubBlocks; ++i) {
      int32_t dot = 0;
      for (int v = 16 * i; v < 16 * (i + 1); ++v) dot += (q6_kx8_value(b, r, v) - 32) * a[j].qs[v];
      scaled += b.scales[kInterleavedRows * i + r] * dot;
    }
    sum += static_cast<double>(fp16_to_fp32(b.d[r]) * a[j].d) * scaled;
  }
  return static_cast<float>(sum);
}

}  // namespace

void interleave_q6_k_group(const BlockQ6_K* rows, int64_t blocks, BlockQ6_Kx8* group) {
  for (int64_t j = 0; j < blocks; ++j) interleave_block(rows + j, blocks, group[j]);
}

namespace ref {

void matmul_q6_kx8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  matmul_x8_rows<BlockQ6_Kx8, BlockQ8K>(GgmlType::Q6_Kx8, kQK_K, args, row_begin, row_end, dot_q6_kx8_row);
}

}  // namespace ref
}  // namespace kvdesk
