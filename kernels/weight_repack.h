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
#pragma once
#include <cstdint>

#include "kernels/ggml_types.h"
#include "kernels/matmul.h"

namespace kvdesk {

constexpr int kInterleavedRows = 8;

struct BlockQ4_0x8 {
  uint16_t d[kInterleavedRows];                              // [8] row scales, IEEE half
  uint8_t qs[kInterleavedRows * kQ4_0BlockValues / 2];       // [4 chunks][8 rows][4 bytes]
};
static_assert(sizeof(BlockQ4_0x8) == kInterleavedRows * sizeof(BlockQ4_0));

// The interleaved layout a matrix of `type` takes for the AVX2 GEMM, or `type` itself when there
// is none or the shape does not fit it (rows not a multiple of 8).
GgmlType repacked_type(GgmlType type, int64_t rows);

// Rewrites data ([rows][ggml_row_bytes(type, n)] in ggml's layout) in place into
// repacked_type(type, rows)'s layout. Nothing happens when that is `type` itself.
void repack_rows(GgmlType type, void* data, int64_t rows, int64_t n);

namespace ref {
// matmul_rows for a Q4_0x8 matrix: row_begin and row_end multiples of 8 (or row_end == rows).
void matmul_q4_0x8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
}  // namespace ref

}  // namespace kvdesk
