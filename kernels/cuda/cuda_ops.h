// Host-callable launchers of the CUDA kernels of one Llama-style forward step besides
// attention: row operations (rms_norm, rope, Hadamard rotation, swiglu, residual add), embedding rows, the
// dequantizing GEMV of the projections, and greedy argmax. Same formulas as kernels/ops.h,
// ref::dequantize_row and the greedy sampler; every pointer in device memory. Plain C++:
// includes no CUDA header. All launches go to the default stream and return without waiting;
// bad shapes or types throw std::invalid_argument before anything is launched.
//
// GEMV takes f32 activations: decode is bound by reading the weights, so quantizing the
// activations (as the CPU does for its integer dot products) would save no time there and would
// add a rounding the CPU reference then has to model. Prefill batches go to a tensor-core GEMM
// (f16 inputs, f32 sums), which reads each weight once per 64 tokens instead of once per 8.
#pragma once
#include <cstdint>

#include "kernels/ggml_types.h"
#include "kernels/ops.h"

namespace kvdesk::cuda {

constexpr int32_t kMaxGemvBatch = 8;   // activation rows one GEMV call takes (decode batch)

// y[r][i] = x[r][i] / sqrt(mean(x[r]^2) + eps) * w[i]:  x, y [rows][n] (y may be x), w [n].
void rms_norm(const float* x, const float* w, float* y, int32_t rows, int32_t n, float eps);

// Rotary embedding in place of x [tokens][heads][head_dim], token t at positions[t] (device
// [tokens]); p.freq_factors, when set, is a device array [n_rot / 2]. n_rot even, <= head_dim.
void rope(float* x, const int32_t* positions, int32_t tokens, int32_t heads, int32_t head_dim,
          const ops::RopeParams& p);

// x [rows][n] = H x[r] in place: kernels/hadamard.h's rotation of KV rows, bit for bit.
void hadamard_rotate_rows(float* x, int64_t rows, int32_t n);

// h[i] = silu(gate[i]) * up[i], i in [0, n).
void swiglu(const float* gate, const float* up, float* h, int64_t n);

// y[i] += x[i], i in [0, n).
void add_in_place(float* y, const float* x, int64_t n);

// x[r][i] *= scale[i] for x [rows][n], scale [n].
void scale_columns(float* x, const float* scale, int64_t rows, int32_t n);

// x[r][i] += bias[i] for x [rows][n], bias [n].
void add_columns(float* x, const float* bias, int64_t rows, int32_t n);

// Whether the GEMV and embedding kernels take this weight type (every computable type).
bool weight_type_supported(GgmlType type);

// out[t] = row tokens[t] of table [vocab][n] (type, ggml_row_bytes(type, n) per row),
// dequantized: out [num_tokens][n], tokens device [num_tokens], each in [0, vocab).
void embedding_rows(GgmlType type, const void* table, int32_t n, const int32_t* tokens, int32_t num_tokens,
                    float* out);

// y[b][r] = dot(W[r], x[b]) for r in [0, rows), b in [0, batch): W [rows][n] of `type`,
// x [batch][n] f32 (16-byte aligned), y [batch][rows]. One warp per weight row decodes it once
// for the whole batch. n a multiple of the type's block (and of 8); 1 <= batch <= kMaxGemvBatch.
void gemv(GgmlType type, const void* w, int32_t rows, int32_t n, const float* x, int32_t batch, float* y);

// y[b][r] = dot(W[r], x[b]) as gemv's contract, for any batch >= 1, on tensor cores: W's
// decoded values and x rounded to f16, products summed in f32 (so y equals the double sum of
// the f16-rounded operands up to f32 rounding). 64 x 64 output tiles.
void gemm(GgmlType type, const void* w, int32_t rows, int32_t n, const float* x, int32_t batch, float* y);

// y[b][r] = dot(W[r], x[b]) for any batch >= 1: gemv for up to kMaxGemvBatch rows and for f32
// weights (in groups of kMaxGemvBatch: f32 weights are kept exact), gemm for larger batches.
void matmul(GgmlType type, const void* w, int32_t rows, int32_t n, const float* x, int32_t batch, float* y);

// out[r] = the greedy sampler's token for logits [rows][n] (first largest value; NaN loses).
void argmax_rows(const float* logits, int32_t rows, int32_t n, int32_t* out);

}  // namespace kvdesk::cuda
