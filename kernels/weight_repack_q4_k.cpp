// Q4_K and Q5_K rows into Q4_Kx8 and Q5_Kx8 groups (layouts in kernels/weight_repack.h; a
// Q5_Kx8 block is a Q4_Kx8 block plus the transposed fifth bits), and the scalar truth of
// products over those layouts: it reads every quant, scale and min back out of the interleaved
// bytes and sums them exactly as ref::vec_dot does for Q4_K / Q5_K, so the two agree bit for bit.
#include <cstring>

#include "kernels/check.h"
#include "kernels/dot.h"
#include "kernels/fp16.h"
#include "kernels/weight_repack.h"
#include "kernels/weight_repack_six_bits.h"
#include "kernels/weight_repack_twin.h"

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
  put_six_bit_value<kQ4_KScaleValues>(b.scale_low, b.scale_high, v, value);
}

int six_bits(const BlockQ4_Kx8& b, int v) { return six_bit_value<kQ4_KScaleValues>(b.scale_low, b.scale_high, v); }

// d, dmin, scales, mins and low nibbles of 8 Q4_K or Q5_K rows (in[0], in[stride], ...).
template <class Row>
void interleave_block(const Row* in, int64_t stride, BlockQ4_Kx8& out) {
  std::memset(&out, 0, sizeof(out));
  for (int r = 0; r < kInterleavedRows; ++r) {
    const Row& row = in[r * stride];
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

// The 8 x 8 bit matrix x (bit j of byte i) transposed (to bit i of byte j) in three rounds of
// masked swaps: 1-bit, 2-bit, then 4-bit blocks across the diagonal.
uint64_t transpose_bits_8x8(uint64_t x) {
  x = (x & 0xAA55AA55AA55AA55ull) | (x & 0x00AA00AA00AA00AAull) << 7 | (x >> 7 & 0x00AA00AA00AA00AAull);
  x = (x & 0xCCCC3333CCCC3333ull) | (x & 0x0000CCCC0000CCCCull) << 14 | (x >> 14 & 0x0000CCCC0000CCCCull);
  x = (x & 0xF0F0F0F00F0F0F0Full) | (x & 0x00000000F0F0F0F0ull) << 28 | (x >> 28 & 0x00000000F0F0F0F0ull);
  return x;
}

// The fifth bits of 8 Q5_K rows (in[0], in[stride], ...), transposed (weight_repack.h): bit s
// of row r's qh[4c + k] to bit c of qh[32s + 4r + k]. For each r and k the 8 bytes qh[4c + k]
// are one 8 x 8 bit matrix.
void interleave_fifth_bits(const BlockQ5_K* in, int64_t stride, uint8_t (&qh)[kInterleavedRows * kQK_K / 8]) {
  for (int r = 0; r < kInterleavedRows; ++r) {
    for (int k = 0; k < kChunkBytes; ++k) {
      uint64_t chunks = 0;  // byte c: the row's qh[4c + k]
      for (int c = 0; c < kChunks; ++c) chunks |= uint64_t{in[r * stride].qh[kChunkBytes * c + k]} << (8 * c);
      const uint64_t sub_blocks = transpose_bits_8x8(chunks);  // byte s, bit c: bit s of qh[4c + k]
      for (int s = 0; s < kSubBlocks; ++s) {
        qh[32 * s + kChunkBytes * r + k] = static_cast<uint8_t>(sub_blocks >> (8 * s));
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

// Quant q (0..31) of value i (0..255) of row r: the nibble and the fifth bit.
int q5_kx8_value(const BlockQ5_Kx8& b, int r, int i) {
  const int l = i % 32;
  const int fifth = b.qh[32 * (i / 32) + kChunkBytes * r + l % kChunkBytes] >> (l / kChunkBytes) & 1;
  return q4_kx8_value(b.low, r, i) | fifth << 4;
}

const BlockQ4_Kx8& low_part(const BlockQ4_Kx8& b) { return b; }
const BlockQ4_Kx8& low_part(const BlockQ5_Kx8& b) { return b.low; }
int quant(const BlockQ4_Kx8& b, int r, int i) { return q4_kx8_value(b, r, i); }
int quant(const BlockQ5_Kx8& b, int r, int i) { return q5_kx8_value(b, r, i); }

// Row r of the group (Q4_Kx8 or Q5_Kx8 blocks) against one act row, as ref's dot_k_affine.
template <class Block>
float dot_k_x8_row(const Block* group, int r, const BlockQ8K* a, int64_t blocks) {
  double sum = 0.0;
  for (int64_t j = 0; j < blocks; ++j) {
    const BlockQ4_Kx8& b = low_part(group[j]);
    int32_t scaled = 0;
    int32_t mins = 0;
    for (int s = 0; s < kSubBlocks; ++s) {
      int32_t dot = 0;
      for (int l = 0; l < 32; ++l) dot += quant(group[j], r, 32 * s + l) * a[j].qs[32 * s + l];
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

void interleave_q5_k_group(const BlockQ5_K* rows, int64_t blocks, BlockQ5_Kx8* group) {
  for (int64_t j = 0; j < blocks; ++j) {
    interleave_block(rows + j, blocks, group[j].low);
    interleave_fifth_bits(rows + j, blocks, group[j].qh);
  }
}

namespace ref {

void matmul_q4_kx8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  matmul_x8_rows<BlockQ4_Kx8, BlockQ8K>(GgmlType::Q4_Kx8, kQK_K, args, row_begin, row_end, dot_k_x8_row<BlockQ4_Kx8>);
}

void matmul_q5_kx8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  matmul_x8_rows<BlockQ5_Kx8, BlockQ8K>(GgmlType::Q5_Kx8, kQK_K, args, row_begin, row_end, dot_k_x8_row<BlockQ5_Kx8>);
}

}  // namespace ref
}  // namespace kvdesk
