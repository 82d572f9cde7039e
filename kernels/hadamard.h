// The orthonormal Hadamard rotation of KV rows (the QuaRot idea): a quantized KV type stores
// H·k and H·v instead of k and v, k here the smoothed and scaled key D^-1 (k - mu) and q the
// scaled query D q (engine/model/key_smoothing.h), each turned after that scaling. A key channel with outliers (real LLMs have a few; stories260K's
// reach |k| = 28 among values of a few units) is spread over the whole block of the row, so a
// row's groups share one narrower range and per-token scales lose less. Attention stays exact in
// exact arithmetic: H is orthogonal, so q·k = (Hq)·(Hk), and the output sum_j p_j v_j is
// H (sum_j p_j Hv_j) because the normalized Sylvester H is symmetric and its own inverse.
//
// For head_dim n the rotation is block diagonal: blocks of b = the largest power of two dividing
// n (n = 80 -> 16, 96 -> 32, 128 -> 128), each the b x b Sylvester matrix scaled by 1/sqrt(b).
// The transform runs in place as a Walsh-Hadamard butterfly, n log2(b) additions.
#pragma once
#include <cstdint>

#include "kernels/kv_type.h"

namespace kvdesk {

// Whether rows of this KV type are stored rotated: int8 and int4, whose error is a step of the
// group's range, so narrowing the range narrows every value's error. Float formats keep plain
// rows: their error is relative to each value, and rotated the outlier's large value is in every
// channel. Measured on stories260K with plain (not mean-subtracted) keys (kvdesk-cli perplexity,
// 1427 tokens, mean KL vs f32 KV):
// int8 6.6e-4 -> 5.3e-4, int4 0.30 -> 0.24, but fp8_e4m3 1.3e-2 -> 2.5e-2, fp8_e5m2 5.3e-2 -> 0.12.
// Its head_dim is 8, so a rotated outlier of 28 is still +-10 in every channel; rows of 64 and
// more channels with a few outliers rotate into a near-Gaussian spread.
constexpr bool kv_type_rotated(KvType type) { return type == KvType::INT8 || type == KvType::INT4; }

// The rotation's block for a row of n values: the largest power of two dividing n (n > 0).
constexpr int32_t hadamard_block(int32_t n) { return n & -n; }

// x[rows][n] = H x[r] for every row, in place (its own inverse). The fast butterfly.
void hadamard_rotate_rows(float* x, int64_t rows, int32_t n);

namespace ref {
// y[n] = H x[n] as a matrix product, entry (i, j) of a block = (-1)^popcount(i & j) / sqrt(b):
// the definition the butterfly is tested against. x and y must not overlap.
void hadamard_rotate(const float* x, float* y, int32_t n);
}  // namespace ref

}  // namespace kvdesk
