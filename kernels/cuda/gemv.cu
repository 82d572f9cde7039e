// Dequantizing GEMV and embedding rows (see cuda_ops.h). GEMV: one warp per weight row, 4 rows
// per CTA; lane l decodes the row's 8-value chunks l, l + 32, ... with weight_codec.cuh's
// decode8 and multiplies each with every activation row of the batch, so the weights are read
// once per call; a warp reduction gives y. Each weight type is its own instance of the kernel
// (the decoder's switch folds away). Embedding: one CTA per token decodes its row.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/weight_codec.cuh"

namespace kvdesk::cuda {
namespace {

constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr int kRowsPerCta = 4;
constexpr int kEmbeddingThreads = 128;

template <GgmlType kType>
__global__ void gemv_kernel(const uint8_t* w, size_t row_bytes, int32_t rows, int32_t n, const float* x,
                            int32_t batch, float* y) {
  const int32_t row = blockIdx.x * kRowsPerCta + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const uint8_t* wrow = w + size_t(row) * row_bytes;
  float acc[kMaxGemvBatch] = {};
  for (int32_t e0 = 8 * lane; e0 < n; e0 += 8 * 32) {
    float wv[8];
    decode8(kType, wrow, e0, wv);
    for (int b = 0; b < kMaxGemvBatch; ++b) {
      if (b >= batch) break;
      const float4* xv = reinterpret_cast<const float4*>(x + int64_t(b) * n + e0);
      const float4 lo = xv[0], hi = xv[1];
      acc[b] += wv[0] * lo.x + wv[1] * lo.y + wv[2] * lo.z + wv[3] * lo.w + wv[4] * hi.x + wv[5] * hi.y +
                wv[6] * hi.z + wv[7] * hi.w;
    }
  }
  for (int b = 0; b < kMaxGemvBatch; ++b) {
    if (b >= batch) break;
    float sum = acc[b];
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(kFullMask, sum, offset);
    if (lane == 0) y[int64_t(b) * rows + row] = sum;
  }
}

__global__ void embedding_kernel(GgmlType type, const uint8_t* table, size_t row_bytes, int32_t n, const int32_t* tokens,
                                 float* out) {
  const uint8_t* row = table + size_t(tokens[blockIdx.x]) * row_bytes;
  float* dst = out + int64_t(blockIdx.x) * n;
  for (int32_t e0 = 8 * threadIdx.x; e0 < n; e0 += 8 * kEmbeddingThreads) {
    float v[8];
    decode8(type, row, e0, v);
    for (int i = 0; i < 8; ++i) dst[e0 + i] = v[i];
  }
}

template <GgmlType kType>
void launch_gemv(const void* w, size_t row_bytes, int32_t rows, int32_t n, const float* x, int32_t batch, float* y) {
  const unsigned ctas = unsigned((rows + kRowsPerCta - 1) / kRowsPerCta);
  gemv_kernel<kType><<<ctas, 32 * kRowsPerCta>>>(static_cast<const uint8_t*>(w), row_bytes, rows, n, x, batch, y);
}

}  // namespace

bool weight_type_supported(GgmlType type) {
  switch (type) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16: case GgmlType::Q8_0: case GgmlType::Q4_0:
    case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1: case GgmlType::Q4_K: case GgmlType::Q5_K:
    case GgmlType::Q6_K:
      return true;
    default:
      return false;
  }
}

void embedding_rows(GgmlType type, const void* table, int32_t n, const int32_t* tokens, int32_t num_tokens, float* out) {
  require_weight_row(type, n, "CUDA embedding");
  if (num_tokens < 0) throw std::invalid_argument("CUDA embedding: negative token count");
  if (num_tokens == 0) return;
  embedding_kernel<<<unsigned(num_tokens), kEmbeddingThreads>>>(type, static_cast<const uint8_t*>(table),
                                                                 ggml_row_bytes(type, n), n, tokens, out);
  check_last_error("CUDA embedding");
}

void gemv(GgmlType type, const void* w, int32_t rows, int32_t n, const float* x, int32_t batch, float* y) {
  require_weight_row(type, n, "CUDA gemv");
  if (batch < 1 || batch > kMaxGemvBatch || rows < 0) {
    throw std::invalid_argument("CUDA gemv: batch " + std::to_string(batch) + " is outside 1.." +
                                std::to_string(kMaxGemvBatch) + " or rows are negative");
  }
  if (rows == 0) return;
  const size_t row_bytes = ggml_row_bytes(type, n);
  switch (type) {
    case GgmlType::F32: launch_gemv<GgmlType::F32>(w, row_bytes, rows, n, x, batch, y); break;
    case GgmlType::F16: launch_gemv<GgmlType::F16>(w, row_bytes, rows, n, x, batch, y); break;
    case GgmlType::BF16: launch_gemv<GgmlType::BF16>(w, row_bytes, rows, n, x, batch, y); break;
    case GgmlType::Q8_0: launch_gemv<GgmlType::Q8_0>(w, row_bytes, rows, n, x, batch, y); break;
    case GgmlType::Q4_0: launch_gemv<GgmlType::Q4_0>(w, row_bytes, rows, n, x, batch, y); break;
    case GgmlType::Q4_1: launch_gemv<GgmlType::Q4_1>(w, row_bytes, rows, n, x, batch, y); break;
    case GgmlType::Q5_0: launch_gemv<GgmlType::Q5_0>(w, row_bytes, rows, n, x, batch, y); break;
    case GgmlType::Q5_1: launch_gemv<GgmlType::Q5_1>(w, row_bytes, rows, n, x, batch, y); break;
    case GgmlType::Q4_K: launch_gemv<GgmlType::Q4_K>(w, row_bytes, rows, n, x, batch, y); break;
    case GgmlType::Q5_K: launch_gemv<GgmlType::Q5_K>(w, row_bytes, rows, n, x, batch, y); break;
    case GgmlType::Q6_K: launch_gemv<GgmlType::Q6_K>(w, row_bytes, rows, n, x, batch, y); break;
    default: break;   // refused by require_weight_row
  }
  check_last_error("CUDA gemv");
}

}  // namespace kvdesk::cuda
