// Repacking rows into interleaved groups (Q4_0x8, IQ4_NLx8, MXFP4x8, Q4_1x8, Q5_0x8 and Q5_1x8 here; Q2_Kx8,
// Q3_Kx8, Q4_Kx8 and Q5_Kx8, Q6_Kx8, Q8_0x8, IQ4_XSx8 in weight_repack_q2_k.cpp,
// weight_repack_q3_k.cpp, weight_repack_q4_k.cpp, weight_repack_q6_k.cpp, weight_repack_q8_0.cpp,
// weight_repack_iq4_xs.cpp), and the scalar truth of products over the layouts made here.
#include "kernels/weight_repack.h"

#include <cstring>
#include <vector>

#include "kernels/check.h"
#include "kernels/dot.h"
#include "kernels/fp16.h"
#include "kernels/weight_repack_twin.h"

namespace kvdesk {
namespace {

constexpr int kChunks = 4;        // 32-byte chunks of a BlockQ4_0x8's qs
constexpr int kChunkBytes = 4;    // bytes of one row in a chunk

// Row r's 16 bytes of nibbles into the chunks of an interleaved block's qs.
void interleave_row_nibbles(const uint8_t* in, int r, uint8_t* out) {
  for (int c = 0; c < kChunks; ++c) {
    std::memcpy(&out[c * kInterleavedRows * kChunkBytes + r * kChunkBytes], &in[c * kChunkBytes], kChunkBytes);
  }
}

// Row r's d and 16 bytes of nibbles (a Q4_0, IQ4_NL, Q5_0 or Q5_1 block) into `out`.
template <class Block>
void interleave_nibbles(const Block& in, int r, BlockQ4_0x8& out) {
  out.d[r] = in.d;
  interleave_row_nibbles(in.qs, r, out.qs);
}

// The 8 MXFP4 rows of one group: each block's exponent and nibbles.
void interleave_mxfp4_group(const BlockMXFP4* rows, int64_t blocks, BlockMXFP4x8* group) {
  for (int64_t j = 0; j < blocks; ++j) {
    for (int r = 0; r < kInterleavedRows; ++r) {
      group[j].e[r] = rows[r * blocks + j].e;
      interleave_row_nibbles(rows[r * blocks + j].qs, r, group[j].qs);
    }
  }
}

// The 8 rows of one group, blocks [blocks] each (ggml layout in `rows`), into `group`. Block is
// BlockQ4_0 or BlockIQ4_NL: an fp16 d and 16 bytes of nibbles either way.
template <class Block>
void interleave_group(const Block* rows, int64_t blocks, BlockQ4_0x8* group) {
  static_assert(sizeof(Block) == sizeof(BlockQ4_0));
  for (int64_t j = 0; j < blocks; ++j) {
    for (int r = 0; r < kInterleavedRows; ++r) interleave_nibbles(rows[r * blocks + j], r, group[j]);
  }
}

// Row r's 32 fifth bits (bit i of qh: value i) into the transposed qh of weight_repack.h.
void interleave_fifth_bits(const uint8_t* qh, int r, uint8_t* out) {
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  for (int k = 0; k < kChunkBytes; ++k) {
    uint8_t byte = 0;
    for (int c = 0; c < 8; ++c) byte = static_cast<uint8_t>(byte | ((bits >> (4 * c + k)) & 1) << c);
    out[kChunkBytes * r + k] = byte;
  }
}

// The same for Q4_1, Q5_0 and Q5_1 rows into Q4_1x8, Q5_0x8 and Q5_1x8 blocks: the nibbles, and
// the fifth bits and minimums where the type has them.
template <class Block, class Out>
void interleave_q4_1_q5_group(const Block* rows, int64_t blocks, Out* group) {
  for (int64_t j = 0; j < blocks; ++j) {
    for (int r = 0; r < kInterleavedRows; ++r) {
      const Block& in = rows[r * blocks + j];
      interleave_nibbles(in, r, group[j].low);
      if constexpr (requires { in.qh; }) interleave_fifth_bits(in.qh, r, group[j].qh);
      if constexpr (requires { in.m; }) group[j].m[r] = in.m;
    }
  }
}

// Nibble q (0..15) of value i (0..31) of row r in an interleaved block's qs.
int interleaved_nibble(const uint8_t* qs, int r, int i) {
  const int low_index = i % 16;
  const uint8_t byte = qs[(low_index / kChunkBytes) * kInterleavedRows * kChunkBytes + r * kChunkBytes +
                          low_index % kChunkBytes];
  return i < 16 ? byte & 15 : byte >> 4;
}

int q4_0x8_value(const BlockQ4_0x8& b, int r, int i) { return interleaved_nibble(b.qs, r, i); }

// sum_b fp16(d[r]) * a[b].d * (sum_i q[i] * a[b].qs[i] - 8 * a[b].sum), as ref::vec_dot for Q4_0.
float dot_q4_0x8_row(const BlockQ4_0x8* group, int r, const BlockQ8Act* a, int64_t blocks) {
  double sum = 0.0;
  for (int64_t j = 0; j < blocks; ++j) {
    int32_t isum = 0;
    for (int i = 0; i < kQ4_0BlockValues; ++i) isum += q4_0x8_value(group[j], r, i) * a[j].qs[i];
    sum += static_cast<double>(fp16_to_fp32(group[j].d[r]) * a[j].d) * (isum - 8 * a[j].sum);
  }
  return static_cast<float>(sum);
}

// sum_b fp16(d[r]) * a[b].d * sum_i kIq4nlValues[q[i]] * a[b].qs[i], as ref::vec_dot for IQ4_NL.
float dot_iq4_nlx8_row(const BlockQ4_0x8* group, int r, const BlockQ8Act* a, int64_t blocks) {
  double sum = 0.0;
  for (int64_t j = 0; j < blocks; ++j) {
    int32_t isum = 0;
    for (int i = 0; i < kIq4nlBlockValues; ++i) isum += kIq4nlValues[q4_0x8_value(group[j], r, i)] * a[j].qs[i];
    sum += static_cast<double>(fp16_to_fp32(group[j].d[r]) * a[j].d) * isum;
  }
  return static_cast<float>(sum);
}

// sum_b 2^(e[r] - 128) * a[b].d * sum_i kMxfp4Values[q[i]] * a[b].qs[i], as ref::vec_dot for MXFP4.
float dot_mxfp4x8_row(const BlockMXFP4x8* group, int r, const BlockQ8Act* a, int64_t blocks) {
  double sum = 0.0;
  for (int64_t j = 0; j < blocks; ++j) {
    int32_t isum = 0;
    for (int i = 0; i < kMxfp4BlockValues; ++i) isum += kMxfp4Values[interleaved_nibble(group[j].qs, r, i)] * a[j].qs[i];
    sum += static_cast<double>(mxfp4_scale(group[j].e[r]) * a[j].d) * isum;
  }
  return static_cast<float>(sum);
}

// q of value i of row r in a Q4_1x8 (0..15), Q5_0x8 or Q5_1x8 block (0..31, with the fifth bit).
template <class Block>
int q_x8_value(const Block& b, int r, int i) {
  const int nibble = q4_0x8_value(b.low, r, i);
  if constexpr (requires { b.qh; }) return nibble | ((b.qh[kChunkBytes * r + i % kChunkBytes] >> (i / kChunkBytes)) & 1) << 4;
  return nibble;
}

// sum_b fp16(d[r]) * a[b].d * (sum_i q[i] * a[b].qs[i] - 16 * a[b].sum), as ref::vec_dot for Q5_0.
float dot_q5_0x8_row(const BlockQ5_0x8* group, int r, const BlockQ8Act* a, int64_t blocks) {
  double sum = 0.0;
  for (int64_t j = 0; j < blocks; ++j) {
    int32_t isum = 0;
    for (int i = 0; i < kQ5_0BlockValues; ++i) isum += q_x8_value(group[j], r, i) * a[j].qs[i];
    sum += static_cast<double>(fp16_to_fp32(group[j].low.d[r]) * a[j].d) * (isum - 16 * a[j].sum);
  }
  return static_cast<float>(sum);
}

// sum_b fp16(d[r]) * a[b].d * sum_i q[i] * a[b].qs[i] + fp16(m[r]) * a[b].d * a[b].sum, as
// ref::vec_dot for Q4_1 and Q5_1 (Block BlockQ4_1x8 or BlockQ5_1x8).
template <class Block>
float dot_affine_x8_row(const Block* group, int r, const BlockQ8Act* a, int64_t blocks) {
  double sum = 0.0;
  for (int64_t j = 0; j < blocks; ++j) {
    int32_t isum = 0;
    for (int i = 0; i < kQ8ActBlockValues; ++i) isum += q_x8_value(group[j], r, i) * a[j].qs[i];
    sum += static_cast<double>(fp16_to_fp32(group[j].low.d[r]) * a[j].d) * isum +
           static_cast<double>(fp16_to_fp32(group[j].m[r])) * (a[j].d * static_cast<float>(a[j].sum));
  }
  return static_cast<float>(sum);
}

// The group's 8 rows (ggml layout in `rows`, blocks [blocks] each) into its interleaved layout.
void interleave_any_group(GgmlType type, const uint8_t* rows, int64_t blocks, uint8_t* group) {
  switch (type) {
    case GgmlType::Q4_0:
      return interleave_group(reinterpret_cast<const BlockQ4_0*>(rows), blocks, reinterpret_cast<BlockQ4_0x8*>(group));
    case GgmlType::Q2_K:
      return interleave_q2_k_group(reinterpret_cast<const BlockQ2_K*>(rows), blocks,
                                   reinterpret_cast<BlockQ2_Kx8*>(group));
    case GgmlType::Q3_K:
      return interleave_q3_k_group(reinterpret_cast<const BlockQ3_K*>(rows), blocks,
                                   reinterpret_cast<BlockQ3_Kx8*>(group));
    case GgmlType::Q4_K:
      return interleave_q4_k_group(reinterpret_cast<const BlockQ4_K*>(rows), blocks,
                                   reinterpret_cast<BlockQ4_Kx8*>(group));
    case GgmlType::Q5_K:
      return interleave_q5_k_group(reinterpret_cast<const BlockQ5_K*>(rows), blocks,
                                   reinterpret_cast<BlockQ5_Kx8*>(group));
    case GgmlType::Q6_K:
      return interleave_q6_k_group(reinterpret_cast<const BlockQ6_K*>(rows), blocks,
                                   reinterpret_cast<BlockQ6_Kx8*>(group));
    case GgmlType::Q8_0:
      return interleave_q8_0_group(reinterpret_cast<const BlockQ8_0*>(rows), blocks,
                                   reinterpret_cast<BlockQ8_0x8*>(group));
    case GgmlType::IQ4_XS:
      return interleave_iq4_xs_group(reinterpret_cast<const BlockIQ4_XS*>(rows), blocks,
                                     reinterpret_cast<BlockIQ4_XSx8*>(group));
    case GgmlType::IQ4_NL:
      return interleave_group(reinterpret_cast<const BlockIQ4_NL*>(rows), blocks, reinterpret_cast<BlockQ4_0x8*>(group));
    case GgmlType::MXFP4:
      return interleave_mxfp4_group(reinterpret_cast<const BlockMXFP4*>(rows), blocks,
                                    reinterpret_cast<BlockMXFP4x8*>(group));
    case GgmlType::Q4_1:
      return interleave_q4_1_q5_group(reinterpret_cast<const BlockQ4_1*>(rows), blocks,
                                      reinterpret_cast<BlockQ4_1x8*>(group));
    case GgmlType::Q5_0:
      return interleave_q4_1_q5_group(reinterpret_cast<const BlockQ5_0*>(rows), blocks,
                                      reinterpret_cast<BlockQ5_0x8*>(group));
    case GgmlType::Q5_1:
      return interleave_q4_1_q5_group(reinterpret_cast<const BlockQ5_1*>(rows), blocks,
                                      reinterpret_cast<BlockQ5_1x8*>(group));
    default: KVDESK_ASSERT(!"interleave_any_group: no interleaved layout for the type");
  }
}

}  // namespace

GgmlType repacked_type(GgmlType type, int64_t rows) {
  if (rows % kInterleavedRows != 0) return type;
  switch (type) {
    case GgmlType::Q4_0: return GgmlType::Q4_0x8;
    case GgmlType::Q2_K: return GgmlType::Q2_Kx8;
    case GgmlType::Q3_K: return GgmlType::Q3_Kx8;
    case GgmlType::Q4_K: return GgmlType::Q4_Kx8;
    case GgmlType::Q5_K: return GgmlType::Q5_Kx8;
    case GgmlType::Q6_K: return GgmlType::Q6_Kx8;
    case GgmlType::Q8_0: return GgmlType::Q8_0x8;
    case GgmlType::IQ4_XS: return GgmlType::IQ4_XSx8;
    case GgmlType::IQ4_NL: return GgmlType::IQ4_NLx8;
    case GgmlType::MXFP4: return GgmlType::MXFP4x8;
    case GgmlType::Q4_1: return GgmlType::Q4_1x8;
    case GgmlType::Q5_0: return GgmlType::Q5_0x8;
    case GgmlType::Q5_1: return GgmlType::Q5_1x8;
    default: return type;
  }
}

bool cpu_layout_pays(GgmlType type, CpuIsa isa) {
  if (isa == CpuIsa::Avx2 || isa == CpuIsa::AvxVnni) return true;
  if (isa == CpuIsa::Avx512) {
    return type == GgmlType::Q4_0 || type == GgmlType::Q8_0 || type == GgmlType::Q4_1 || type == GgmlType::Q5_0 ||
           type == GgmlType::Q5_1;
  }
  return false;
}

void repack_rows(GgmlType type, void* data, int64_t rows, int64_t n) {
  if (repacked_type(type, rows) == type) return;
  const int64_t blocks = n / ggml_type_info(type).block_values;
  const size_t group_bytes = kInterleavedRows * ggml_row_bytes(type, n);
  std::vector<uint8_t> rows_copy(group_bytes);  // [8][row bytes], the group in ggml's layout
  for (int64_t g = 0; g < rows / kInterleavedRows; ++g) {
    uint8_t* group = static_cast<uint8_t*>(data) + static_cast<size_t>(g) * group_bytes;
    std::memcpy(rows_copy.data(), group, group_bytes);
    interleave_any_group(type, rows_copy.data(), blocks, group);
  }
}

namespace ref {

void matmul_q4_0x8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  matmul_x8_rows<BlockQ4_0x8, BlockQ8Act>(GgmlType::Q4_0x8, kQ4_0BlockValues, args, row_begin, row_end,
                                          dot_q4_0x8_row);
}

void matmul_iq4_nlx8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  matmul_x8_rows<BlockQ4_0x8, BlockQ8Act>(GgmlType::IQ4_NLx8, kIq4nlBlockValues, args, row_begin, row_end,
                                          dot_iq4_nlx8_row);
}

void matmul_mxfp4x8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  matmul_x8_rows<BlockMXFP4x8, BlockQ8Act>(GgmlType::MXFP4x8, kMxfp4BlockValues, args, row_begin, row_end,
                                           dot_mxfp4x8_row);
}

void matmul_q4_1x8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  matmul_x8_rows<BlockQ4_1x8, BlockQ8Act>(GgmlType::Q4_1x8, kQ4_1BlockValues, args, row_begin, row_end,
                                          dot_affine_x8_row<BlockQ4_1x8>);
}

void matmul_q5_0x8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  matmul_x8_rows<BlockQ5_0x8, BlockQ8Act>(GgmlType::Q5_0x8, kQ5_0BlockValues, args, row_begin, row_end, dot_q5_0x8_row);
}

void matmul_q5_1x8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  matmul_x8_rows<BlockQ5_1x8, BlockQ8Act>(GgmlType::Q5_1x8, kQ5_1BlockValues, args, row_begin, row_end,
                                          dot_affine_x8_row<BlockQ5_1x8>);
}

}  // namespace ref
}  // namespace kvdesk
