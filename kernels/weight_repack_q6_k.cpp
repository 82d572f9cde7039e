// Q6_K rows into Q6_Kx8 groups (layout in kernels/weight_repack.h), and the scalar truth of
// products over that layout: it reads every quant and scale back out of the interleaved bytes
// and sums them exactly as ref::vec_dot does for Q6_K, so the two agree bit for bit.
#include <cstring>

#include "kernels/check.h"
#include "kernels/dot.h"
#include "kernels/fp16.h"
#include "kernels/weight_repack.h"
#include "kernels/weight_repack_twin.h"

namespace kvdesk {
namespace {

constexpr int kSubBlocks = 16;    // 16-value sub-blocks of a super-block
constexpr int kChunks = 4;        // chunks of 4 values x 8 rows in a sub-block
constexpr int kChunkBytes = 4;    // values of one row in a chunk
constexpr int kCodeVectors = 3;   // 32-byte vectors of a sub-block's packed quants

// The 256 quants q (0..63) of a Q6_K row's super-block, value v = 128h + 32k + l: low 4 bits
// from ql (k < 2 low nibbles, else high), high 2 bits from bits 2k, 2k + 1 of qh.
void q6_k_values(const BlockQ6_K& row, uint8_t (&q)[kQK_K]) {
  for (int h = 0; h < 2; ++h) {
    for (int k = 0; k < 4; ++k) {
      const uint8_t* low = row.ql + 64 * h + 32 * (k & 1);
      const uint8_t* high = row.qh + 32 * h;
      const int low_shift = k < 2 ? 0 : 4;
      for (int l = 0; l < 32; ++l) {
        q[128 * h + 32 * k + l] = static_cast<uint8_t>((low[l] >> low_shift & 15) | (high[l] >> (2 * k) & 3) << 4);
      }
    }
  }
}

// The byte of vector a of sub-block i that holds row r's value at place k of its chunks.
int code_byte(int i, int a, int r, int k) { return 32 * (kCodeVectors * i + a) + kChunkBytes * r + k; }

// A chunk's 4 values at once, one byte each: bits 0..5 of vector a's 4 bytes are chunk a, bits
// 6, 7 bits 2a, 2a + 1 of the last chunk.
void interleave_block(const BlockQ6_K* in, int64_t stride, BlockQ6_Kx8& out) {
  for (int r = 0; r < kInterleavedRows; ++r) {
    const BlockQ6_K& row = in[r * stride];
    out.d[r] = row.d;
    uint8_t q[kQK_K];
    q6_k_values(row, q);
    for (int i = 0; i < kSubBlocks; ++i) {
      out.scales[kInterleavedRows * i + r] = row.scales[i];
      uint32_t chunks[kChunks];
      std::memcpy(chunks, q + 16 * i, sizeof(chunks));
      for (int a = 0; a < kCodeVectors; ++a) {
        const uint32_t word = chunks[a] | (chunks[kChunks - 1] >> (2 * a) & 0x03030303u) << 6;
        std::memcpy(out.codes + code_byte(i, a, r, 0), &word, sizeof(word));
      }
    }
  }
}

// q (0..63) of value v = 16i + 4c + k of row r.
int q6_kx8_value(const BlockQ6_Kx8& b, int r, int v) {
  const int i = v / 16;
  const int c = v % 16 / kChunkBytes;
  const int k = v % kChunkBytes;
  if (c < kCodeVectors) return b.codes[code_byte(i, c, r, k)] & 63;
  int q = 0;
  for (int a = 0; a < kCodeVectors; ++a) q |= (b.codes[code_byte(i, a, r, k)] >> 6) << (2 * a);
  return q;
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
