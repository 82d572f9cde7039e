// Q4_K rows into Q4_Kx8 groups (layout in kernels/weight_repack.h), and the scalar truth of
// products over that layout: it reads every quant, scale and min back out of the interleaved
// bytes and sums them exactly as ref::vec_dot does for Q4_K, so the two agree bit for bit.
#include <cstring>

#include "kernels/check.h"
#include "kernels/dot.h"
#include "kernels/fp16.h"
#include "kernels/weight_repack.h"

namespace kvdesk {
namespace {

constexpr int kPairs = 4;         // sub-block pairs sharing one 32-byte run of a row's qs
constexpr int kChunks = 8;        // chunks of 4 bytes per row in a pair
constexpr int kChunkBytes = 4;    // bytes of one row in a chunk
constexpr int kSubBlocks = 8;     // 32-value sub-blocks of a super-block

// Numbers of the six-bit values (weight_repack.h): sc[s] of row r, and m[s].
int scale_number(int s, int r) { return kInterleavedRows * s + r; }
int min_number(int s, int r) { return kQ4_KScaleValues / 2 + kInterleavedRows * s + r; }

void put_six_bits(BlockQ4_Kx8& b, int v, uint8_t value) {
  const int low_byte = v % (kQ4_KScaleValues / 2);
  const int low_shift = v < kQ4_KScaleValues / 2 ? 0 : 4;
  b.scale_low[low_byte] = static_cast<uint8_t>(b.scale_low[low_byte] | (value & 15) << low_shift);
  const int high_byte = v % (kQ4_KScaleValues / 4);
  const int high_shift = 2 * (v / (kQ4_KScaleValues / 4));
  b.scale_high[high_byte] = static_cast<uint8_t>(b.scale_high[high_byte] | (value >> 4) << high_shift);
}

int six_bits(const BlockQ4_Kx8& b, int v) {
  const int low = b.scale_low[v % (kQ4_KScaleValues / 2)] >> (v < kQ4_KScaleValues / 2 ? 0 : 4) & 15;
  const int high = b.scale_high[v % (kQ4_KScaleValues / 4)] >> (2 * (v / (kQ4_KScaleValues / 4))) & 3;
  return low | high << 4;
}

void interleave_block(const BlockQ4_K* in, int64_t stride, BlockQ4_Kx8& out) {
  std::memset(&out, 0, sizeof(out));
  for (int r = 0; r < kInterleavedRows; ++r) {
    const BlockQ4_K& row = in[r * stride];
    out.d[r] = row.d;
    out.dmin[r] = row.dmin;
    for (int s = 0; s < kSubBlocks; ++s) {
      const KScaleMin sm = k_scale_min(row.scales, s);
      put_six_bits(out, scale_number(s, r), sm.scale);
      put_six_bits(out, min_number(s, r), sm.min);
    }
    for (int p = 0; p < kPairs; ++p) {
      for (int c = 0; c < kChunks; ++c) {
        std::memcpy(&out.qs[32 * (kChunks * p + c) + kChunkBytes * r], &row.qs[32 * p + kChunkBytes * c], kChunkBytes);
      }
    }
  }
}

// Nibble q (0..15) of value i (0..255) of row r.
int q4_kx8_value(const BlockQ4_Kx8& b, int r, int i) {
  const int s = i / 32;
  const int l = i % 32;
  const uint8_t byte = b.qs[32 * (kChunks * (s / 2) + l / kChunkBytes) + kChunkBytes * r + l % kChunkBytes];
  return s % 2 == 0 ? byte & 15 : byte >> 4;
}

// Row r of the group against one act row, as ref's dot_k_affine for Q4_K.
float dot_q4_kx8_row(const BlockQ4_Kx8* group, int r, const BlockQ8K* a, int64_t blocks) {
  double sum = 0.0;
  for (int64_t j = 0; j < blocks; ++j) {
    const BlockQ4_Kx8& b = group[j];
    int32_t scaled = 0;
    int32_t mins = 0;
    for (int s = 0; s < kSubBlocks; ++s) {
      int32_t dot = 0;
      for (int l = 0; l < 32; ++l) dot += q4_kx8_value(b, r, 32 * s + l) * a[j].qs[32 * s + l];
      scaled += six_bits(b, scale_number(s, r)) * dot;
      mins += six_bits(b, min_number(s, r)) * (a[j].bsums[2 * s] + a[j].bsums[2 * s + 1]);
    }
    sum += static_cast<double>(fp16_to_fp32(b.d[r]) * a[j].d) * scaled -
           static_cast<double>(fp16_to_fp32(b.dmin[r]) * a[j].d) * mins;
  }
  return static_cast<float>(sum);
}

}  // namespace

void interleave_q4_k_group(const BlockQ4_K* rows, int64_t blocks, BlockQ4_Kx8* group) {
  for (int64_t j = 0; j < blocks; ++j) interleave_block(rows + j, blocks, group[j]);
}

namespace ref {

void matmul_q4_kx8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  KVDESK_ASSERT(args.weight_type == GgmlType::Q4_Kx8 && row_begin % kInterleavedRows == 0);
  const int64_t blocks = args.n / kQK_K;
  const size_t a_stride = act_row_bytes(args.weight_type, args.n);
  const auto* groups = static_cast<const BlockQ4_Kx8*>(args.weights);
  for (int64_t b = 0; b < args.batch; ++b) {
    const auto* a = reinterpret_cast<const BlockQ8K*>(static_cast<const char*>(args.acts) + b * a_stride);
    for (int64_t r = row_begin; r < row_end; ++r) {
      const BlockQ4_Kx8* group = groups + (r / kInterleavedRows) * blocks;
      args.y[b * args.ld_y + r] = dot_q4_kx8_row(group, static_cast<int>(r % kInterleavedRows), a, blocks);
    }
  }
}

}  // namespace ref
}  // namespace kvdesk
