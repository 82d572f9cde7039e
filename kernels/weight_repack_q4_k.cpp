// Q4_K and Q5_K rows into Q4_Kx8 and Q5_Kx8 groups (layouts in kernels/weight_repack.h; both
// start with the same KScalesX8, Q5_Kx8's quants packed 8 in 5 bytes), and the scalar truth of
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

void put_six_bits(KScalesX8& b, int v, uint8_t value) {
  put_six_bit_value<kQ4_KScaleValues>(b.scale_low, b.scale_high, v, value);
}

int six_bits(const KScalesX8& b, int v) { return six_bit_value<kQ4_KScaleValues>(b.scale_low, b.scale_high, v); }

// d, dmin, scales and mins of 8 Q4_K or Q5_K rows (in[0], in[stride], ...).
template <class Row>
void interleave_scales(const Row* in, int64_t stride, KScalesX8& out) {
  for (int r = 0; r < kInterleavedRows; ++r) {
    const Row& row = in[r * stride];
    out.d[r] = row.d;
    out.dmin[r] = row.dmin;
    for (int s = 0; s < kSubBlocks; ++s) {
      const KScaleMin sm = k_scale_min(row.scales, s);
      put_six_bits(out, scale_number(s, r), sm.scale);
      put_six_bits(out, min_number(s, r), sm.min);
    }
  }
}

void interleave_block(const BlockQ4_K* in, int64_t stride, BlockQ4_Kx8& out) {
  std::memset(&out, 0, sizeof(out));
  interleave_scales(in, stride, out.scales);
  for (int r = 0; r < kInterleavedRows; ++r) {
    for (int p = 0; p < kPairs; ++p) {
      for (int c = 0; c < kChunks; ++c) {
        std::memcpy(&out.qs[32 * (kChunks * p + c) + kChunkBytes * r], &in[r * stride].qs[32 * p + kChunkBytes * c], kChunkBytes);
      }
    }
  }
}

// The 256 quants q (0..31) of a Q5_K row's super-block, value v = 32s + l: nibble l of the
// pair s / 2 (low for even s), fifth bit s of qh[l].
void q5_k_values(const BlockQ5_K& row, uint8_t (&q)[kQK_K]) {
  for (int s = 0; s < kSubBlocks; ++s) {
    const uint8_t* pair = row.qs + 32 * (s / 2);
    const int low_shift = s % 2 == 0 ? 0 : 4;
    for (int l = 0; l < 32; ++l) q[32 * s + l] = static_cast<uint8_t>((pair[l] >> low_shift & 15) | (row.qh[l] >> s & 1) << 4);
  }
}

// Where the 15 bits of chunks 5..7 of a Q5_Kx8 sub-block lie (weight_repack.h): bit 5 + t of
// vector a holds bit kTopBits[a][t].bit of chunk kTopBits[a][t].chunk.
struct TopBit {
  int chunk;
  int bit;
};
constexpr int kCodeVectors = 5;   // 32-byte vectors of a sub-block's packed quants
constexpr int kTopBitsPerByte = 3;
constexpr TopBit kTopBits[kCodeVectors][kTopBitsPerByte] = {
    {{5, 0}, {5, 1}, {5, 2}}, {{5, 3}, {5, 4}, {7, 3}}, {{6, 0}, {6, 1}, {6, 2}}, {{6, 3}, {6, 4}, {7, 4}}, {{7, 0}, {7, 1}, {7, 2}}};

// The byte of vector a of sub-block s that holds row r's value at place k of its chunks.
int code_byte(int s, int a, int r, int k) { return 32 * (kCodeVectors * s + a) + kChunkBytes * r + k; }

// Row r's 4 bytes in vector a of a sub-block: chunk a's values in bits 0..4 and the bits
// kTopBits puts there in 5..7, a chunk's 4 values at once (a word, one byte each).
void interleave_block(const BlockQ5_K* in, int64_t stride, BlockQ5_Kx8& out) {
  std::memset(&out, 0, sizeof(out));
  interleave_scales(in, stride, out.scales);
  for (int r = 0; r < kInterleavedRows; ++r) {
    uint8_t q[kQK_K];
    q5_k_values(in[r * stride], q);
    for (int s = 0; s < kSubBlocks; ++s) {
      uint32_t chunks[kChunks];
      std::memcpy(chunks, q + 32 * s, sizeof(chunks));
      for (int a = 0; a < kCodeVectors; ++a) {
        uint32_t word = chunks[a];
        for (int t = 0; t < kTopBitsPerByte; ++t) {
          const TopBit at = kTopBits[a][t];
          word |= (chunks[at.chunk] >> at.bit & 0x01010101u) << (5 + t);
        }
        std::memcpy(out.codes + code_byte(s, a, r, 0), &word, sizeof(word));
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

// Quant q (0..31) of value i = 32s + 4c + k (0..255) of row r.
int q5_kx8_value(const BlockQ5_Kx8& b, int r, int i) {
  const int s = i / 32;
  const int c = i % 32 / kChunkBytes;
  const int k = i % kChunkBytes;
  if (c < kCodeVectors) return b.codes[code_byte(s, c, r, k)] & 31;
  int q = 0;
  for (int a = 0; a < kCodeVectors; ++a) {
    for (int t = 0; t < kTopBitsPerByte; ++t) {
      if (kTopBits[a][t].chunk == c) q |= (b.codes[code_byte(s, a, r, k)] >> (5 + t) & 1) << kTopBits[a][t].bit;
    }
  }
  return q;
}

int quant(const BlockQ4_Kx8& b, int r, int i) { return q4_kx8_value(b, r, i); }
int quant(const BlockQ5_Kx8& b, int r, int i) { return q5_kx8_value(b, r, i); }

// Row r of the group (Q4_Kx8 or Q5_Kx8 blocks) against one act row, as ref's dot_k_affine.
template <class Block>
float dot_k_x8_row(const Block* group, int r, const BlockQ8K* a, int64_t blocks) {
  double sum = 0.0;
  for (int64_t j = 0; j < blocks; ++j) {
    const KScalesX8& sc = group[j].scales;
    int32_t scaled = 0;
    int32_t mins = 0;
    for (int s = 0; s < kSubBlocks; ++s) {
      int32_t dot = 0;
      for (int l = 0; l < 32; ++l) dot += quant(group[j], r, 32 * s + l) * a[j].qs[32 * s + l];
      scaled += six_bits(sc, scale_number(s, r)) * dot;
      mins += six_bits(sc, min_number(s, r)) * (a[j].bsums[2 * s] + a[j].bsums[2 * s + 1]);
    }
    sum += static_cast<double>(fp16_to_fp32(sc.d[r]) * a[j].d) * scaled -
           static_cast<double>(fp16_to_fp32(sc.dmin[r]) * a[j].d) * mins;
  }
  return static_cast<float>(sum);
}

}  // namespace

void interleave_q4_k_group(const BlockQ4_K* rows, int64_t blocks, BlockQ4_Kx8* group) {
  for (int64_t j = 0; j < blocks; ++j) interleave_block(rows + j, blocks, group[j]);
}

void interleave_q5_k_group(const BlockQ5_K* rows, int64_t blocks, BlockQ5_Kx8* group) {
  for (int64_t j = 0; j < blocks; ++j) interleave_block(rows + j, blocks, group[j]);
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
