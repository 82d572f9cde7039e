// Row kernels of the forward step (see cuda_ops.h): rms_norm and argmax run one CTA per row
// with a block reduction; rope one CTA per (token, head) with a thread per rotated pair; the
// Hadamard rotation a thread per block of a row;
// swiglu, the residual add and the column scaling one thread per value. The math is row_ops.cuh's.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/row_ops.cuh"

namespace kvdesk::cuda {
namespace {

constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr int kRowThreads = 256;   // threads of the per-row CTAs (8 warps)
constexpr int kElementThreads = 256;

// The sum over a CTA of kRowThreads threads; every thread gets it.
__device__ double block_sum(double v) {
  __shared__ double warp_sums[kRowThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  double total = 0;
  for (int w = 0; w < kRowThreads / 32; ++w) total += warp_sums[w];
  return total;
}

__global__ void rms_norm_kernel(const float* x, const float* w, float* y, int32_t n, float eps) {
  const float* row = x + int64_t(blockIdx.x) * n;
  float* out = y + int64_t(blockIdx.x) * n;
  double sum_sq = 0;
  for (int32_t i = threadIdx.x; i < n; i += kRowThreads) sum_sq += double(row[i]) * row[i];
  const float scale = rms_scale(block_sum(sum_sq), n, eps);
  for (int32_t i = threadIdx.x; i < n; i += kRowThreads) out[i] = row[i] * scale * w[i];
}

// grid (tokens, heads); thread i < n_rot / 2 turns pair i.
__global__ void rope_kernel(float* x, const int32_t* positions, int32_t heads, int32_t head_dim, ops::RopeParams p,
                            float theta_scale) {
  float* head = x + (int64_t(blockIdx.x) * heads + blockIdx.y) * head_dim;
  const int32_t position = positions[blockIdx.x];
  for (int i = threadIdx.x; i < p.n_rot / 2; i += blockDim.x) {
    const float theta = rope_theta(position, p, theta_scale, i);
    rope_pair(head[rope_first(p.mode, i)], head[rope_second(p.mode, p.n_rot, i)], cosf(theta), sinf(theta));
  }
}

__global__ void hadamard_kernel(float* x, int64_t num_blocks, int32_t b) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < num_blocks) hadamard_block_in_place(x + i * b, b);
}

__global__ void swiglu_kernel(const float* gate, const float* up, float* h, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) h[i] = silu_mul(gate[i], up[i]);
}

__global__ void add_kernel(float* y, const float* x, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}

__global__ void scale_columns_kernel(float* x, const float* scale, int64_t total, int32_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < total) x[i] *= scale[i % n];
}

__global__ void add_columns_kernel(float* x, const float* bias, int64_t total, int32_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < total) x[i] += bias[i % n];
}

__device__ ArgmaxCandidate better_of(const ArgmaxCandidate& a, const ArgmaxCandidate& b) {
  return argmax_better(b, a) ? b : a;
}

__global__ void argmax_kernel(const float* logits, int32_t n, int32_t* out) {
  const float* row = logits + int64_t(blockIdx.x) * n;
  ArgmaxCandidate best{row[0], 0};
  for (int32_t i = threadIdx.x; i < n; i += kRowThreads) best = better_of(best, ArgmaxCandidate{row[i], i});
  for (int offset = 16; offset > 0; offset /= 2) {
    const ArgmaxCandidate other{__shfl_xor_sync(kFullMask, best.value, offset), __shfl_xor_sync(kFullMask, best.index, offset)};
    best = better_of(best, other);
  }
  __shared__ ArgmaxCandidate warp_best[kRowThreads / 32];
  if (threadIdx.x % 32 == 0) warp_best[threadIdx.x / 32] = best;
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 0; w < kRowThreads / 32; ++w) best = better_of(best, warp_best[w]);
  out[blockIdx.x] = std::isnan(row[0]) ? 0 : best.index;
}

unsigned element_blocks(int64_t n) { return unsigned((n + kElementThreads - 1) / kElementThreads); }

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

}  // namespace

void rms_norm(const float* x, const float* w, float* y, int32_t rows, int32_t n, float eps) {
  require(rows >= 0 && n > 0, "CUDA rms_norm: need n > 0 (got " + std::to_string(n) + ")");
  if (rows == 0) return;
  rms_norm_kernel<<<unsigned(rows), kRowThreads>>>(x, w, y, n, eps);
  check_last_error("CUDA rms_norm");
}

void rope(float* x, const int32_t* positions, int32_t tokens, int32_t heads, int32_t head_dim, const ops::RopeParams& p) {
  require(p.n_rot > 0 && p.n_rot % 2 == 0 && p.n_rot <= head_dim && heads > 0 && tokens >= 0 && heads <= 65535,
          "CUDA rope: need an even n_rot in (0, head_dim] and 1..65535 heads (got n_rot " + std::to_string(p.n_rot) +
              ", head_dim " + std::to_string(head_dim) + ", heads " + std::to_string(heads) + ")");
  if (tokens == 0) return;
  const unsigned threads = unsigned(p.n_rot / 2 < 128 ? (p.n_rot / 2 + 31) / 32 * 32 : 128);
  rope_kernel<<<dim3(unsigned(tokens), unsigned(heads)), threads>>>(x, positions, heads, head_dim, p, rope_theta_scale(p));
  check_last_error("CUDA rope");
}

void hadamard_rotate_rows(float* x, int64_t rows, int32_t n) {
  require(rows >= 0 && n > 0, "CUDA hadamard: need n > 0 (got " + std::to_string(n) + ")");
  if (rows == 0) return;
  const int32_t b = n & -n;   // hadamard_block(n): the largest power of two dividing n
  const int64_t num_blocks = rows * (n / b);
  hadamard_kernel<<<element_blocks(num_blocks), kElementThreads>>>(x, num_blocks, b);
  check_last_error("CUDA hadamard");
}

void swiglu(const float* gate, const float* up, float* h, int64_t n) {
  require(n >= 0, "CUDA swiglu: negative length");
  if (n == 0) return;
  swiglu_kernel<<<element_blocks(n), kElementThreads>>>(gate, up, h, n);
  check_last_error("CUDA swiglu");
}

void add_in_place(float* y, const float* x, int64_t n) {
  require(n >= 0, "CUDA add_in_place: negative length");
  if (n == 0) return;
  add_kernel<<<element_blocks(n), kElementThreads>>>(y, x, n);
  check_last_error("CUDA add_in_place");
}

void scale_columns(float* x, const float* scale, int64_t rows, int32_t n) {
  require(rows >= 0 && n > 0, "CUDA scale_columns: need n > 0 (got " + std::to_string(n) + ")");
  if (rows == 0) return;
  scale_columns_kernel<<<element_blocks(rows * n), kElementThreads>>>(x, scale, rows * n, n);
  check_last_error("CUDA scale_columns");
}

void add_columns(float* x, const float* bias, int64_t rows, int32_t n) {
  require(rows >= 0 && n > 0, "CUDA add_columns: need n > 0 (got " + std::to_string(n) + ")");
  if (rows == 0) return;
  add_columns_kernel<<<element_blocks(rows * n), kElementThreads>>>(x, bias, rows * n, n);
  check_last_error("CUDA add_columns");
}

void argmax_rows(const float* logits, int32_t rows, int32_t n, int32_t* out) {
  require(rows >= 0 && n > 0, "CUDA argmax: need n > 0 (got " + std::to_string(n) + ")");
  if (rows == 0) return;
  argmax_kernel<<<unsigned(rows), kRowThreads>>>(logits, n, out);
  check_last_error("CUDA argmax");
}

}  // namespace kvdesk::cuda
