// Matrix product of a weight matrix W[rows][n] (GGUF type, row-major, ggml_row_bytes per row)
// with a batch of prepared activation rows A[batch][n]:
//     y[b * ld_y + r] = dot(W[r], A[b])    for r in [row_begin, row_end), b in [0, batch)
// Callers split [0, rows) across threads. The cpu:: version tiles rows x batch so a tile of
// weight rows is read from memory once and reused for every activation row (prefill), and
// degenerates to streaming GEMV for batch 1 (decode).
#pragma once
#include <cstdint>

#include "kernels/ggml_types.h"

namespace kvdesk {

struct MatmulArgs {
  GgmlType weight_type;
  const void* weights;      // [rows][n] in weight_type
  int64_t n;                // values per row (the reduction length)
  const void* acts;         // [batch][act_row_bytes(weight_type, n)]
  int64_t batch;
  float* y;                 // [batch][ld_y]
  int64_t ld_y;
};

namespace ref {
void matmul_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
}
namespace cpu {
void matmul_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
}

}  // namespace kvdesk
