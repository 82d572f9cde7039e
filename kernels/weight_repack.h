// Weight layouts for the GEMM tiles, made at load from a file's ggml layout (the file is never
// changed): Q4_0 rows interleaved eight at a time (GgmlType::Q4_0x8), so one 32-byte load holds
// 4 values of each of 8 rows and an integer dot lane is one output row: no horizontal sums, and
// one activation broadcast feeds 8 rows.
//
// Q4_0x8 matrix W[rows][n], rows % 8 == 0: row group g (rows 8g .. 8g + 7) is n / 32 blocks
// BlockQ4_0x8 starting at byte g * 8 * ggml_row_bytes(Q4_0, n), so the matrix keeps its size and
// a range of whole groups is one contiguous run. Block j of group g holds block j of each row:
//     d[r]                  = that row's scale
//     qs[32 * c + 4 * r + k] = that row's qs[4c + k]    (c < 4, k < 4)
// so chunk c, masked to low nibbles, is values 4c .. 4c + 3 of rows 0..7 (one int32 lane each),
// and its high nibbles values 16 + 4c .. 16 + 4c + 3.
//
// IQ4_NLx8: IQ4_NL rows, whose blocks are laid out as Q4_0's (an fp16 scale, 32 nibbles),
// interleaved exactly as Q4_0x8, in BlockQ4_0x8: the nibbles are indices into kIq4nlValues
// instead of q + 8. MXFP4x8: MXFP4 rows the same way, in BlockMXFP4x8: each row's E8M0 exponent
// in place of d, the nibbles indices into kMxfp4Values.
//
// Q2_Kx8, Q3_Kx8, Q4_Kx8, Q5_Kx8, Q6_Kx8, Q8_0x8 and IQ4_XSx8 (kernels/weight_repack_q2_k.cpp,
// weight_repack_q3_k.cpp, weight_repack_q4_k.cpp for both Q4_K and Q5_K, weight_repack_q6_k.cpp,
// weight_repack_q8_0.cpp, weight_repack_iq4_xs.cpp): Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_0 and
// IQ4_XS rows interleaved the same way, one block per block (super-block) of 8 rows, the matrix
// again keeping its size.
#pragma once
#include <cstdint>

#include "kernels/dot.h"
#include "kernels/ggml_types.h"
#include "kernels/matmul.h"

namespace kvdesk {

constexpr int kInterleavedRows = 8;

struct BlockQ4_0x8 {
  uint16_t d[kInterleavedRows];                              // [8] row scales, IEEE half
  uint8_t qs[kInterleavedRows * kQ4_0BlockValues / 2];       // [4 chunks][8 rows][4 bytes]
};
static_assert(sizeof(BlockQ4_0x8) == kInterleavedRows * sizeof(BlockQ4_0));

struct BlockMXFP4x8 {
  uint8_t e[kInterleavedRows];                               // [8] row exponents: scale 2^(e - 128)
  uint8_t qs[kInterleavedRows * kMxfp4BlockValues / 2];      // [4 chunks][8 rows][4 bytes], as Q4_0x8's
};
static_assert(sizeof(BlockMXFP4x8) == kInterleavedRows * sizeof(BlockMXFP4));

// Q4_1x8: Q4_1 rows, whose d and nibbles are laid out as Q4_0's, as the Q4_0x8 block of those
// plus each row's minimum.
struct BlockQ4_1x8 {
  BlockQ4_0x8 low;                 // d, nibbles
  uint16_t m[kInterleavedRows];    // [8] row minimums, IEEE half
};
static_assert(sizeof(BlockQ4_1x8) == kInterleavedRows * sizeof(BlockQ4_1));

// Q5_0x8 and Q5_1x8: Q5_0 / Q5_1 rows, whose d and low nibbles are laid out as Q4_0's, are the
// Q4_0x8 block of those plus their fifth bits transposed so that one 32-byte vector serves the
// whole block (and Q5_1's minimums, one per row):
//     bit c of qh[4r + k] = the fifth bit of value 4c + k of row r   (c < 8, k < 4)
// so qh, shifted to bring bit c to bit 4, is the fifth bits of values 4c .. 4c + 3 of rows 0..7,
// in the bytes where chunk c % 4 of `low` has their nibbles (low nibbles for c < 4, high ones
// for c >= 4).
struct BlockQ5_0x8 {
  BlockQ4_0x8 low;                                         // d, low nibbles
  uint8_t qh[kInterleavedRows * kQ5_0BlockValues / 8];     // [8 rows][4 bytes], bit c: value 4c + k
};
static_assert(sizeof(BlockQ5_0x8) == kInterleavedRows * sizeof(BlockQ5_0));
struct BlockQ5_1x8 {
  BlockQ4_0x8 low;                                         // d, low nibbles
  uint16_t m[kInterleavedRows];                            // [8] row minimums, IEEE half
  uint8_t qh[kInterleavedRows * kQ5_1BlockValues / 8];     // as BlockQ5_0x8's
};
static_assert(sizeof(BlockQ5_1x8) == kInterleavedRows * sizeof(BlockQ5_1));

// d, dmin and the 128 six-bit scales and mins of super-block j of 8 Q4_K or Q5_K rows, which
// Q4_Kx8 and Q5_Kx8 blocks both start with. The six-bit values are numbered v = 8s + r for sc[s]
// of row r and 64 + 8s + r for m[s]; their low 4 bits are nibbles of scale_low (v < 64 low,
// v >= 64 high nibble of byte v % 64) and their high 2 bits bits 2k, 2k + 1 of
// scale_high[v % 32] (k = v / 32), so four vector shifts and masks unpack all of them.
constexpr int kQ4_KScaleValues = 128;
struct KScalesX8 {
  uint16_t d[kInterleavedRows];                          // [8] row scales of sc, IEEE half
  uint16_t dmin[kInterleavedRows];                       // [8] row scales of m, IEEE half
  uint8_t scale_low[kQ4_KScaleValues / 2];               // [64] low 4 bits of the 128 values
  uint8_t scale_high[kQ4_KScaleValues / 4];              // [32] high 2 bits, 4 values a byte
};

// Super-block j of a Q4_Kx8 row group holds super-block j of its 8 rows (each 256 values in 8
// sub-blocks s of 32, value 32s + l = fp16(d) * sc[s] * q - fp16(dmin) * m[s]): their scales
// (KScalesX8), and
//     qs[32 * (8p + c) + 4r + k] = that row's qs[32p + 4c + k]   (pair p < 4, chunk c < 8, k < 4)
// so chunk 8p + c, masked to low nibbles, is values 4c .. 4c + 3 of sub-block 2p of rows 0..7
// (one int32 lane each), its high nibbles the same values of sub-block 2p + 1.
struct BlockQ4_Kx8 {
  KScalesX8 scales;                                      // d, dmin, scales, mins
  uint8_t qs[kInterleavedRows * kQK_K / 2];              // [4 pairs][8 chunks][8 rows][4 bytes]
};
static_assert(sizeof(BlockQ4_Kx8) == kInterleavedRows * sizeof(BlockQ4_K));

// Super-block j of a Q5_Kx8 row group holds super-block j of its 8 rows (value
// v = 32s + 4c + k = fp16(d) * sc[s] * q - fp16(dmin) * m[s], q 0..31, chunk c < 8, k < 4): their
// scales (KScalesX8), and the quants of a 32-value sub-block packed 8 in 5 bytes:
//     codes[160s + 32a + 4r + k], a < 5: bits 0..4 = q of value 32s + 4a + k of row r (chunk a),
//                                        bits 5..7 = 3 of the 15 bits of chunks 5..7 there:
//     chunk 5 = bits 5..7 of vector 0, then bits 5, 6 of vector 1
//     chunk 6 = bits 5..7 of vector 2, then bits 5, 6 of vector 3
//     chunk 7 = bits 5..7 of vector 4, then bit 7 of vector 1, bit 7 of vector 3
// so the 5 vectors of a sub-block, masked, are chunks 0..4 of rows 0..7 (4 values, one int32
// lane a row) and their top bits, shifted into place, chunks 5..7: 23 vector operations unpack 8
// chunks, where nibbles with fifth bits kept apart took 31 to 39.
struct BlockQ5_Kx8 {
  KScalesX8 scales;                                      // d, dmin, scales, mins
  uint8_t codes[kInterleavedRows * kQK_K * 5 / 8];       // [8 sub-blocks][5 vectors][8 rows][4 bytes]
};
static_assert(sizeof(BlockQ5_Kx8) == kInterleavedRows * sizeof(BlockQ5_K));

// Super-block j of a Q6_Kx8 row group holds super-block j of its 8 rows (value
// v = 16i + 4c + k = fp16(d) * scales[i] * (q - 32), q 0..63, in 16-value sub-block i, chunk
// c < 4, k < 4), the quants of a sub-block packed 4 in 3 bytes:
//     d[r]                       = that row's d
//     scales[8i + r]             = that row's scales[i]
//     codes[96i + 32a + 4r + k], a < 3: bits 0..5 = q of value 16i + 4a + k of row r,
//                                       bits 6, 7 = bits 2a, 2a + 1 of q of value 16i + 12 + k
// so the 3 vectors of a sub-block, masked, are chunks 0, 1 and 2 of rows 0..7 (4 values, one
// int32 lane a row) and their top bits, shifted into place, chunk 3: 11 vector operations
// unpack 4 chunks, where separate low nibbles and high bit pairs took 16 to 20. The GEMM reads
// a block front to back, scales first: with them at the end, decode (which prefetches a block
// ahead, interleaved_gemm_avx2.h) waited on their line at the start of every block, 12% slower.
struct BlockQ6_Kx8 {
  uint16_t d[kInterleavedRows];                      // [8] row scales, IEEE half
  int8_t scales[kInterleavedRows * kQK_K / 16];      // [16 sub-blocks][8 rows]
  uint8_t codes[kInterleavedRows * kQK_K * 3 / 4];   // [16 sub-blocks][3 vectors][8 rows][4 bytes]
};
static_assert(sizeof(BlockQ6_Kx8) == kInterleavedRows * sizeof(BlockQ6_K));

// Super-block j of a Q2_Kx8 row group holds super-block j of its 8 rows (value
// v = 128h + 32k + l = fp16(d) * (sm[v / 16] & 15) * q - fp16(dmin) * (sm[v / 16] >> 4), q 0..3):
//     qs[32 * (8h + c) + 4r + k']  = that row's qs[32h + 4c + k']     (half h < 2, chunk c < 8)
//     scales[8i + r]               = that row's scales[i] (sm)         (16-value sub-block i)
//     d[r], dmin[r]                = that row's d, dmin
// so chunk 8h + c of qs, shifted right by 2k and masked to 2 bits, is values 4c .. 4c + 3 of the
// 32 at 128h + 32k of rows 0..7, one int32 lane each.
struct BlockQ2_Kx8 {
  uint8_t qs[kInterleavedRows * kQK_K / 4];       // [2 halves][8 chunks][8 rows][4 bytes]
  uint8_t scales[kInterleavedRows * kQK_K / 16];  // [16 sub-blocks][8 rows]
  uint16_t d[kInterleavedRows];                   // [8] row scales of the scales, IEEE half
  uint16_t dmin[kInterleavedRows];                // [8] row scales of the mins, IEEE half
};
static_assert(sizeof(BlockQ2_Kx8) == kInterleavedRows * sizeof(BlockQ2_K));

// Super-block j of a Q3_Kx8 row group holds super-block j of its 8 rows (value
// v = 128h + 32k + l = fp16(d) * (sc[v / 16] - 32) * (q - 4), q = bit pair | third bit << 2, 0..7):
//     qs[32 * (8h + c) + 4r + k']  = that row's qs[32h + 4c + k']     (half h < 2, chunk c < 8)
//     hmask[32 * c + 4r + k']      = that row's hmask[4c + k']        (chunk c < 8)
//     d[r]                         = that row's d
// so chunk 8h + c of qs, shifted right by 2k, holds the bit pairs of values 4c .. 4c + 3 of the
// 32 at 128h + 32k of rows 0..7 (one int32 lane each), and chunk c of hmask, bit 4h + k, their
// third bits. The 128 six-bit scales sc[i] are numbered v = 8i + r (16-value sub-block i, row r)
// and packed as Q4_Kx8's scales and mins, which is what makes the block fit Q3_K's 110 bytes a
// row: the scales unpack with the same vector shifts.
constexpr int kQ3_KScaleValues = 128;
struct BlockQ3_Kx8 {
  uint8_t hmask[kInterleavedRows * kQK_K / 8];    // [8 chunks][8 rows][4 bytes]
  uint8_t qs[kInterleavedRows * kQK_K / 4];       // [2 halves][8 chunks][8 rows][4 bytes]
  uint8_t scale_low[kQ3_KScaleValues / 2];        // [64] low 4 bits of the 128 scales
  uint8_t scale_high[kQ3_KScaleValues / 4];       // [32] high 2 bits, 4 scales a byte
  uint16_t d[kInterleavedRows];                   // [8] row scales, IEEE half
};
static_assert(sizeof(BlockQ3_Kx8) == kInterleavedRows * sizeof(BlockQ3_K));

// Block j of a Q8_0x8 row group holds block j of its 8 rows (value i = fp16(d) * qs[i]):
//     d[r]                   = that row's d
//     qs[32 * c + 4 * r + k] = that row's qs[4c + k]    (c < 8, k < 4)
// so chunk c is values 4c .. 4c + 3 of rows 0..7, one int32 lane each.
struct BlockQ8_0x8 {
  uint16_t d[kInterleavedRows];                         // [8] row scales, IEEE half
  int8_t qs[kInterleavedRows * kQ8_0BlockValues];       // [8 chunks][8 rows][4 bytes]
};
static_assert(sizeof(BlockQ8_0x8) == kInterleavedRows * sizeof(BlockQ8_0));

// Super-block j of an IQ4_XSx8 row group holds super-block j of its 8 rows (each 256 values in 8
// sub-blocks s of 32, value 32s + l = fp16(d) * (ls[s] - 32) * kIq4nlValues[index]):
//     d[r]                          = that row's d
//     qs[32 * (4s + c) + 4r + k]    = that row's qs[16s + 4c + k]   (sub-block s < 8, c < 4, k < 4)
// so chunk 4s + c, masked to low nibbles, is the indices of values 4c .. 4c + 3 of sub-block s
// of rows 0..7 (one int32 lane each), its high nibbles those of values 16 + 4c .. 16 + 4c + 3:
// each sub-block is laid out as a Q4_0x8 block, meeting act block 8j + s.
// The 64 six-bit scales ls[s] are numbered v = 8s + r; their low 4 bits are nibbles of
// scale_low (v < 32 low, v >= 32 high nibble of byte v % 32) and their high 2 bits bits 2k,
// 2k + 1 of scale_high[v % 16] (k = v / 16), so a few vector shifts and masks unpack all of them.
constexpr int kIQ4_XSScaleValues = 64;
struct BlockIQ4_XSx8 {
  uint16_t d[kInterleavedRows];                   // [8] row scales, IEEE half
  uint8_t scale_low[kIQ4_XSScaleValues / 2];      // [32] low 4 bits of the 64 scales
  uint8_t scale_high[kIQ4_XSScaleValues / 4];     // [16] high 2 bits, 4 scales a byte
  uint8_t qs[kInterleavedRows * kQK_K / 2];       // [8 sub-blocks][4 chunks][8 rows][4 bytes]
};
static_assert(sizeof(BlockIQ4_XSx8) == kInterleavedRows * sizeof(BlockIQ4_XS));

// The interleaved layout a matrix of `type` takes for the AVX2 GEMM, or `type` itself when there
// is none or the shape does not fit it (rows not a multiple of 8).
GgmlType repacked_type(GgmlType type, int64_t rows);

// Whether that layout is worth making when the kernels run `isa`: on AVX2 and AVX-VNNI for every
// type that has one; on AVX-512 for Q4_0 and Q8_0, whose 512-bit tiles over pairs of groups
// (kernels/cpu/matmul_x8_avx512.cpp) beat the AVX-512 row kernels, and for Q4_1, Q5_0 and
// Q5_1, whose AVX2 tiles beat the AVX-512 kernels over ggml's rows (TinyLlama shape, 2 threads,
// kvdesk-bench ab --knob weight-layout: prefill 128 4.95x, 1.62x, 4.43x, decode 2.65x, 1.45x,
// 2.37x), while the VNNI kernels of the other types are ahead of the AVX2 tiles; never for the
// scalar ones.
bool cpu_layout_pays(GgmlType type, CpuIsa isa);

// Rewrites data ([rows][ggml_row_bytes(type, n)] in ggml's layout) in place into
// repacked_type(type, rows)'s layout. Nothing happens when that is `type` itself.
void repack_rows(GgmlType type, void* data, int64_t rows, int64_t n);

namespace ref {
// matmul_rows for a Q4_0x8 matrix: row_begin and row_end multiples of 8 (or row_end == rows).
void matmul_q4_0x8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
// The same for a Q2_Kx8 matrix, equal bit for bit to ref::matmul_rows on the Q2_K rows.
void matmul_q2_kx8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
// The same for a Q3_Kx8 matrix, equal bit for bit to ref::matmul_rows on the Q3_K rows.
void matmul_q3_kx8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
// The same for a Q4_Kx8 matrix, equal bit for bit to ref::matmul_rows on the Q4_K rows.
void matmul_q4_kx8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
// The same for a Q5_Kx8 matrix, equal bit for bit to ref::matmul_rows on the Q5_K rows.
void matmul_q5_kx8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
// The same for a Q6_Kx8 matrix, equal bit for bit to ref::matmul_rows on the Q6_K rows.
void matmul_q6_kx8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
// The same for a Q8_0x8 matrix, equal bit for bit to ref::matmul_rows on the Q8_0 rows.
void matmul_q8_0x8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
// The same for an IQ4_XSx8 matrix, equal bit for bit to ref::matmul_rows on the IQ4_XS rows.
void matmul_iq4_xsx8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
// The same for an IQ4_NLx8 matrix, equal bit for bit to ref::matmul_rows on the IQ4_NL rows.
void matmul_iq4_nlx8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
// The same for an MXFP4x8 matrix, equal bit for bit to ref::matmul_rows on the MXFP4 rows.
void matmul_mxfp4x8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
// The same for a Q4_1x8 matrix, equal bit for bit to ref::matmul_rows on the Q4_1 rows.
void matmul_q4_1x8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
// The same for a Q5_0x8 matrix, equal bit for bit to ref::matmul_rows on the Q5_0 rows.
void matmul_q5_0x8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
// The same for a Q5_1x8 matrix, equal bit for bit to ref::matmul_rows on the Q5_1 rows.
void matmul_q5_1x8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
}  // namespace ref

// Internal to the repacking: the 8 Q4_K rows of one group, super-blocks [blocks] each (ggml
// layout in `rows`), into `group` (kernels/weight_repack_q4_k.cpp).
void interleave_q4_k_group(const BlockQ4_K* rows, int64_t blocks, BlockQ4_Kx8* group);
// The same for Q2_K (kernels/weight_repack_q2_k.cpp).
void interleave_q2_k_group(const BlockQ2_K* rows, int64_t blocks, BlockQ2_Kx8* group);
// The same for Q3_K (kernels/weight_repack_q3_k.cpp).
void interleave_q3_k_group(const BlockQ3_K* rows, int64_t blocks, BlockQ3_Kx8* group);
// The same for Q5_K (kernels/weight_repack_q4_k.cpp).
void interleave_q5_k_group(const BlockQ5_K* rows, int64_t blocks, BlockQ5_Kx8* group);
// The same for Q6_K (kernels/weight_repack_q6_k.cpp).
void interleave_q6_k_group(const BlockQ6_K* rows, int64_t blocks, BlockQ6_Kx8* group);
// The same for Q8_0 (kernels/weight_repack_q8_0.cpp).
void interleave_q8_0_group(const BlockQ8_0* rows, int64_t blocks, BlockQ8_0x8* group);
// The same for IQ4_XS (kernels/weight_repack_iq4_xs.cpp).
void interleave_iq4_xs_group(const BlockIQ4_XS* rows, int64_t blocks, BlockIQ4_XSx8* group);

}  // namespace kvdesk
