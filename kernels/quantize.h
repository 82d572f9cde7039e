// Row quantizers and dequantizers for the weight types kvdesk stores (ggml's reference
// rounding, so files we write read back the same in other GGUF readers).
#pragma once
#include <cstdint>

#include "kernels/ggml_types.h"

namespace kvdesk::ref {

// x[n] -> n / 32 blocks. n must be a multiple of 32.
void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n);
void quantize_row_q4_0(const float* x, BlockQ4_0* y, int64_t n);

// kernels/quantize_q4_1_q5.cpp: n must be a multiple of 32.
void quantize_row_q4_1(const float* x, BlockQ4_1* y, int64_t n);
void quantize_row_q5_0(const float* x, BlockQ5_0* y, int64_t n);
void quantize_row_q5_1(const float* x, BlockQ5_1* y, int64_t n);
void dequantize_row_q4_1(const BlockQ4_1* x, float* y, int64_t n);
void dequantize_row_q5_0(const BlockQ5_0* x, float* y, int64_t n);
void dequantize_row_q5_1(const BlockQ5_1* x, float* y, int64_t n);

// kernels/quantize_kquants.cpp: n must be a multiple of 256.
void quantize_row_q4_k(const float* x, BlockQ4_K* y, int64_t n);
void quantize_row_q5_k(const float* x, BlockQ5_K* y, int64_t n);
void quantize_row_q6_k(const float* x, BlockQ6_K* y, int64_t n);
void dequantize_row_q4_k(const BlockQ4_K* x, float* y, int64_t n);
void dequantize_row_q5_k(const BlockQ5_K* x, float* y, int64_t n);
void dequantize_row_q6_k(const BlockQ6_K* x, float* y, int64_t n);

// kernels/quantize_low_kquants.cpp: n must be a multiple of 256.
void quantize_row_q2_k(const float* x, BlockQ2_K* y, int64_t n);
void quantize_row_q3_k(const float* x, BlockQ3_K* y, int64_t n);
void dequantize_row_q2_k(const BlockQ2_K* x, float* y, int64_t n);
void dequantize_row_q3_k(const BlockQ3_K* x, float* y, int64_t n);

// kernels/quantize_iq4.cpp: n must be a multiple of 32 (IQ4_NL) or 256 (IQ4_XS).
void quantize_row_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t n);
void quantize_row_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t n);
void dequantize_row_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t n);
void dequantize_row_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t n);

// kernels/quantize_mxfp4.cpp: n must be a multiple of 32.
void quantize_row_mxfp4(const float* x, BlockMXFP4* y, int64_t n);
void dequantize_row_mxfp4(const BlockMXFP4* x, float* y, int64_t n);

// x[n] -> one row of `type` (every computable type); out holds ggml_row_bytes(type, n).
void quantize_row(GgmlType type, const float* x, void* out, int64_t n);

// One row of `type` -> y[n] (every computable type).
void dequantize_row(GgmlType type, const void* row, float* y, int64_t n);

}  // namespace kvdesk::ref
