// Row quantizers and dequantizers for the weight types kvdesk stores (ggml's reference
// rounding, so files we write read back the same in other GGUF readers).
#pragma once
#include <cstdint>

#include "kernels/ggml_types.h"

namespace kvdesk::ref {

// x[n] -> n / 32 blocks. n must be a multiple of 32.
void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n);
void quantize_row_q4_0(const float* x, BlockQ4_0* y, int64_t n);

// x[n] -> one row of `type` (F32, F16, BF16, Q8_0, Q4_0); out holds ggml_row_bytes(type, n).
void quantize_row(GgmlType type, const float* x, void* out, int64_t n);

// One row of `type` -> y[n] (every computable type).
void dequantize_row(GgmlType type, const void* row, float* y, int64_t n);

}  // namespace kvdesk::ref
