// Q3_K rows into Q3_Kx8 groups (layout in kernels/weight_repack.h), and the scalar truth of
// products over that layout: it reads every quant and scale back out of the interleaved bytes
// and sums them exactly as ref::vec_dot does for Q3_K, so the two agree bit for bit.
#include <cstring>

#include "kernels/check.h"
#include "kernels/dot.h"
#include "kernels/fp16.h"
#include "kernels/weight_repack.h"
#include "kernels/weight_repack_runs.h"
#include "kernels/weight_repack_six_bits.h"
#include "kernels/weight_repack_twin.h"

namespace kvdesk {
namespace {

constexpr int kSubBlocks = 16;     // 16-value sub-blocks of a super-block
constexpr int kActBlocks = kQK_K / kQ8ActBlockValues;   // act blocks a super-block meets

// Number of the six-bit scale sc[i] of row r (weight_repack.h).
int scale_number(int i, int r) { return kInterleavedRows * i + r; }

void interleave_block(const BlockQ3_K* in, int64_t stride, BlockQ3_Kx8& out) {
  std::memset(&out, 0, sizeof(out));
  for (int r = 0; r < kInterleavedRows; ++r) {
    const BlockQ3_K& row = in[r * stride];
    out.d[r] = row.d;
    for (int i = 0; i < kSubBlocks; ++i) {
      put_six_bit_value<kQ3_KScaleValues>(out.scale_low, out.scale_high, scale_number(i, r), q3_k_scale(row.scales, i));
    }
    for (int run = 0; run < 2; ++run) interleave_run(row.qs, run, r, out.qs);
    interleave_run(row.hmask, 0, r, out.hmask);
  }
}

// q (-4..3) of value v = 128h + 32k + l of row r.
int q3_kx8_value(const BlockQ3_Kx8& b, int r, int v) {
  const int h = v / 128;
  const int k = v % 128 / 32;
  const int l = v % 32;
  const int pair = (run_byte(b.qs, h, r, l) >> (2 * k)) & 3;
  const int third = (run_byte(b.hmask, 0, r, l) >> (v / 32)) & 1;
  return pair + 4 * third - 4;
}

// Row r of the group against one act row, as ref's dot_q3_k: act block 8j + s meets sub-blocks
// 2s and 2s + 1 of super-block j.
float dot_q3_kx8_row(const BlockQ3_Kx8* group, int r, const BlockQ8Act* a, int64_t blocks) {
  double sum = 0.0;
  for (int64_t j = 0; j < blocks; ++j) {
    const BlockQ3_Kx8& b = group[j];
    const float d = fp16_to_fp32(b.d[r]);
    for (int s = 0; s < kActBlocks; ++s) {
      const BlockQ8Act& as = a[kActBlocks * j + s];
      for (int h = 0; h < 2; ++h) {
        const int i = 2 * s + h;
        const int sc = six_bit_value<kQ3_KScaleValues>(b.scale_low, b.scale_high, scale_number(i, r)) - 32;
        int32_t dot = 0;
        for (int l = 0; l < 16; ++l) dot += q3_kx8_value(b, r, 16 * i + l) * as.qs[16 * h + l];
        sum += static_cast<double>(d * sc * as.d) * dot;
      }
    }
  }
  return static_cast<float>(sum);
}

}  // namespace

void interleave_q3_k_group(const BlockQ3_K* rows, int64_t blocks, BlockQ3_Kx8* group) {
  for (int64_t j = 0; j < blocks; ++j) interleave_block(rows + j, blocks, group[j]);
}

namespace ref {

void matmul_q3_kx8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  matmul_x8_rows<BlockQ3_Kx8, BlockQ8Act>(GgmlType::Q3_Kx8, kQK_K, args, row_begin, row_end, dot_q3_kx8_row);
}

}  // namespace ref
}  // namespace kvdesk
