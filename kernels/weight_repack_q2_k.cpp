// Q2_K rows into Q2_Kx8 groups (layout in kernels/weight_repack.h), and the scalar truth of
// products over that layout: it reads every quant, scale and min back out of the interleaved
// bytes and sums them exactly as ref::vec_dot does for Q2_K, so the two agree bit for bit.
#include "kernels/check.h"
#include "kernels/dot.h"
#include "kernels/fp16.h"
#include "kernels/weight_repack.h"
#include "kernels/weight_repack_runs.h"
#include "kernels/weight_repack_twin.h"

namespace kvdesk {
namespace {

constexpr int kSubBlocks = 16;                          // 16-value sub-blocks of a super-block
constexpr int kActBlocks = kQK_K / kQ8ActBlockValues;   // act blocks a super-block meets

void interleave_block(const BlockQ2_K* in, int64_t stride, BlockQ2_Kx8& out) {
  for (int r = 0; r < kInterleavedRows; ++r) {
    const BlockQ2_K& row = in[r * stride];
    out.d[r] = row.d;
    out.dmin[r] = row.dmin;
    for (int i = 0; i < kSubBlocks; ++i) out.scales[kInterleavedRows * i + r] = row.scales[i];
    for (int run = 0; run < 2; ++run) interleave_run(row.qs, run, r, out.qs);
  }
}

// q (0..3) of value v = 128h + 32k + l of row r.
int q2_kx8_value(const BlockQ2_Kx8& b, int r, int v) {
  return (run_byte(b.qs, v / 128, r, v % 32) >> (2 * (v % 128 / 32))) & 3;
}

// Row r of the group against one act row, as ref's dot_q2_k: act block 8j + s meets sub-blocks
// 2s and 2s + 1 of super-block j.
float dot_q2_kx8_row(const BlockQ2_Kx8* group, int r, const BlockQ8Act* a, int64_t blocks) {
  double sum = 0.0;
  for (int64_t j = 0; j < blocks; ++j) {
    const BlockQ2_Kx8& b = group[j];
    const float d = fp16_to_fp32(b.d[r]);
    const float dmin = fp16_to_fp32(b.dmin[r]);
    for (int s = 0; s < kActBlocks; ++s) {
      const BlockQ8Act& as = a[kActBlocks * j + s];
      for (int h = 0; h < 2; ++h) {
        const int i = 2 * s + h;
        const uint8_t sm = b.scales[kInterleavedRows * i + r];
        int32_t dot = 0, act_sum = 0;
        for (int l = 0; l < 16; ++l) {
          dot += q2_kx8_value(b, r, 16 * i + l) * as.qs[16 * h + l];
          act_sum += as.qs[16 * h + l];
        }
        sum += static_cast<double>(d * (sm & 15) * as.d) * dot - static_cast<double>(dmin * (sm >> 4) * as.d) * act_sum;
      }
    }
  }
  return static_cast<float>(sum);
}

}  // namespace

void interleave_q2_k_group(const BlockQ2_K* rows, int64_t blocks, BlockQ2_Kx8* group) {
  for (int64_t j = 0; j < blocks; ++j) interleave_block(rows + j, blocks, group[j]);
}

namespace ref {

void matmul_q2_kx8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  matmul_x8_rows<BlockQ2_Kx8, BlockQ8Act>(GgmlType::Q2_Kx8, kQK_K, args, row_begin, row_end, dot_q2_kx8_row);
}

}  // namespace ref
}  // namespace kvdesk
