// Dequantizing GEMM on tensor cores for prefill batches (see cuda_ops.h): y[b][r] = dot(W[r], x[b])
// for a batch of many activation rows, where the GEMV (one warp per weight row, at most
// kMaxGemvBatch rows) would re-read every weight row once per 8 tokens.
//
// One CTA of 4 warps computes a tile of kTileRows weight rows x kTileTokens activation rows.
// Per step of kTileK values it decodes the tile's weight values with weight_codec.cuh's decode8
// (the GEMV's decoder, so both read every type the same way) and rounds them to f16, rounds the
// activations to f16, and the warps multiply the two shared-memory tiles with WMMA 16x16x16
// (f32 accumulate); each warp owns 32 x 32 of the output. The accumulators leave through shared
// memory so edge tiles store only their valid rows and tokens. Rounding: f16 keeps 11
// significant bits of each decoded weight and each activation (the CPU's integer path keeps 8
// bits of the activation); the products and sums are f32. f32 weights do not come here
// (cuda::matmul keeps them on the exact GEMV).
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/weight_codec.cuh"

namespace kvdesk::cuda {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kTileRows = 64;     // weight rows per CTA
constexpr int kTileTokens = 64;   // activation rows per CTA
constexpr int kTileK = 32;        // values of a row per step
constexpr int kThreads = 128;     // 4 warps as 2 x 2, 32 x 32 outputs each
constexpr int kPad = 8;           // halves of padding per shared row (WMMA's ldm: a multiple of 8)
constexpr int kLd = kTileK + kPad;
constexpr int kOutLd = kTileTokens + 4;

// Shared tiles: the weights and activations of one step as f16 [rows][k], and the f32 output
// tile [rows][tokens] at the end (its own array: 17 KB beside the 10 KB of inputs).
struct GemmShared {
  __half w[kTileRows][kLd];
  __half x[kTileTokens][kLd];
  float out[kTileRows][kOutLd];
};

// Weight values [e0, e0 + 8) of row `row` into the tile, zeros past the matrix.
template <GgmlType kType>
__device__ void load_weights(GemmShared& s, const uint8_t* w, size_t row_bytes, int32_t rows, int32_t n,
                             int32_t row0, int32_t k0) {
  for (int i = threadIdx.x; i < kTileRows * (kTileK / 8); i += kThreads) {
    const int r = i / (kTileK / 8);
    const int c = (i % (kTileK / 8)) * 8;
    const int32_t row = row0 + r;
    float v[8] = {};
    if (row < rows && k0 + c < n) decode8(kType, w + size_t(row) * row_bytes, k0 + c, v);
    for (int j = 0; j < 8; ++j) s.w[r][c + j] = __float2half_rn(v[j]);
  }
}

// Activation values [k0, k0 + kTileK) of tokens [tok0, tok0 + kTileTokens), zeros past the batch.
__device__ void load_activations(GemmShared& s, const float* x, int32_t batch, int32_t n, int32_t tok0, int32_t k0) {
  for (int i = threadIdx.x; i < kTileTokens * (kTileK / 4); i += kThreads) {
    const int t = i / (kTileK / 4);
    const int c = (i % (kTileK / 4)) * 4;
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (tok0 + t < batch && k0 + c < n) v = *reinterpret_cast<const float4*>(x + int64_t(tok0 + t) * n + k0 + c);
    s.x[t][c + 0] = __float2half_rn(v.x);
    s.x[t][c + 1] = __float2half_rn(v.y);
    s.x[t][c + 2] = __float2half_rn(v.z);
    s.x[t][c + 3] = __float2half_rn(v.w);
  }
}

template <GgmlType kType>
__global__ void __launch_bounds__(kThreads) gemm_kernel(const uint8_t* w, size_t row_bytes, int32_t rows, int32_t n,
                                                        const float* x, int32_t batch, float* y) {
  __shared__ GemmShared s;
  const int32_t row0 = blockIdx.x * kTileRows;
  const int32_t tok0 = blockIdx.y * kTileTokens;
  const int warp = threadIdx.x / 32;
  const int warp_row = (warp / 2) * 32;     // the warp's 32 weight rows in the tile
  const int warp_tok = (warp % 2) * 32;     // and its 32 tokens

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
  for (auto& a : acc) {
    for (auto& f : a) wmma::fill_fragment(f, 0.0f);
  }
  for (int32_t k0 = 0; k0 < n; k0 += kTileK) {
    load_weights<kType>(s, w, row_bytes, rows, n, row0, k0);
    load_activations(s, x, batch, n, tok0, k0);
    __syncthreads();
    for (int kk = 0; kk < kTileK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b[2];
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(a[i], &s.w[warp_row + 16 * i][kk], kLd);
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], &s.x[warp_tok + 16 * j][kk], kLd);
      for (int i = 0; i < 2; ++i) {
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
      }
    }
    __syncthreads();
  }
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      wmma::store_matrix_sync(&s.out[warp_row + 16 * i][warp_tok + 16 * j], acc[i][j], kOutLd, wmma::mem_row_major);
    }
  }
  __syncthreads();
  // y[token][row]: consecutive threads take consecutive rows of one token (coalesced stores).
  for (int i = threadIdx.x; i < kTileRows * kTileTokens; i += kThreads) {
    const int t = i / kTileRows;
    const int r = i % kTileRows;
    if (row0 + r < rows && tok0 + t < batch) y[int64_t(tok0 + t) * rows + row0 + r] = s.out[r][t];
  }
}

template <GgmlType kType>
void launch_gemm(const void* w, size_t row_bytes, int32_t rows, int32_t n, const float* x, int32_t batch, float* y) {
  const dim3 grid(unsigned((rows + kTileRows - 1) / kTileRows), unsigned((batch + kTileTokens - 1) / kTileTokens));
  gemm_kernel<kType><<<grid, kThreads>>>(static_cast<const uint8_t*>(w), row_bytes, rows, n, x, batch, y);
}

}  // namespace

void gemm(GgmlType type, const void* w, int32_t rows, int32_t n, const float* x, int32_t batch, float* y) {
  require_weight_row(type, n, "CUDA gemm");
  if (batch < 1 || rows < 0) {
    throw std::invalid_argument("CUDA gemm: batch " + std::to_string(batch) + " is under 1 or rows are negative");
  }
  if (rows == 0) return;
  const size_t row_bytes = ggml_row_bytes(type, n);
  switch (type) {
    case GgmlType::F32: launch_gemm<GgmlType::F32>(w, row_bytes, rows, n, x, batch, y); break;
    case GgmlType::F16: launch_gemm<GgmlType::F16>(w, row_bytes, rows, n, x, batch, y); break;
    case GgmlType::BF16: launch_gemm<GgmlType::BF16>(w, row_bytes, rows, n, x, batch, y); break;
    case GgmlType::Q8_0: launch_gemm<GgmlType::Q8_0>(w, row_bytes, rows, n, x, batch, y); break;
    case GgmlType::Q4_0: launch_gemm<GgmlType::Q4_0>(w, row_bytes, rows, n, x, batch, y); break;
    case GgmlType::Q4_1: launch_gemm<GgmlType::Q4_1>(w, row_bytes, rows, n, x, batch, y); break;
    case GgmlType::Q5_0: launch_gemm<GgmlType::Q5_0>(w, row_bytes, rows, n, x, batch, y); break;
    case GgmlType::Q5_1: launch_gemm<GgmlType::Q5_1>(w, row_bytes, rows, n, x, batch, y); break;
    case GgmlType::Q4_K: launch_gemm<GgmlType::Q4_K>(w, row_bytes, rows, n, x, batch, y); break;
    case GgmlType::Q5_K: launch_gemm<GgmlType::Q5_K>(w, row_bytes, rows, n, x, batch, y); break;
    case GgmlType::Q6_K: launch_gemm<GgmlType::Q6_K>(w, row_bytes, rows, n, x, batch, y); break;
    default: break;   // refused by require_weight_row
  }
  check_last_error("CUDA gemm");
}

void matmul(GgmlType type, const void* w, int32_t rows, int32_t n, const float* x, int32_t batch, float* y) {
  if (batch > kMaxGemvBatch && type != GgmlType::F32) return gemm(type, w, rows, n, x, batch, y);
  for (int32_t b0 = 0; b0 < batch; b0 += kMaxGemvBatch) {
    gemv(type, w, rows, n, x + int64_t(b0) * n, std::min(kMaxGemvBatch, batch - b0), y + int64_t(b0) * rows);
  }
}

}  // namespace kvdesk::cuda
