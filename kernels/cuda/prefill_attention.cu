// Causal prefill attention over paged K/V, flash-attention tiling on CUDA cores (see
// cuda_kernels.h). One CTA per (tile of kQueryTile query tokens, query head), kThreads threads:
// each warp owns kQueryTile / kWarps query rows, lane i holds dims i, i + 32, ... of each row's
// q (prescaled to base 2) and accumulator. The CTA walks the key positions in tiles of
// kKeyTile: it dequantizes the tile's K and V rows (through the block table, kv_codec.cuh) into
// shared memory once, then every warp runs online_softmax.cuh's step for each of its rows over
// the keys that row may see (position <= its own). So each K/V row is read and dequantized once
// per query tile and head instead of once per query token.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/kv_checks.h"
#include "kernels/cuda/kv_codec.cuh"
#include "kernels/cuda/online_softmax.cuh"

namespace kvdesk::cuda {
namespace {

constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kQueryTile = 16;
constexpr int kRowsPerWarp = kQueryTile / kWarps;
constexpr int kKeyTile = 16;
constexpr int kDimsPerLane = kMaxHeadDim / 32;

struct PrefillParams {
  PagedKvLayer layer;
  PagedSeq seq;              // block_table in device memory; num_tokens counts the new tokens
  int32_t first_position;    // position of query 0: seq.num_tokens - num_queries
  int32_t num_queries;
  const float* q;            // [num_queries][num_heads][head_dim]
  float* out;                // [num_queries][num_heads][head_dim]
  int32_t num_heads;
  int32_t group;             // query heads per kv head
  float scale;
};

__device__ inline const uint8_t* row_address(const PagedKvTensor& t, const PagedKvLayer& layer, const PagedSeq& seq,
                                             int32_t pos, int32_t kv_head) {
  const int32_t block = seq.block_table[pos / layer.block_size];
  return t.data + size_t(block) * t.block_stride + size_t(kv_head) * t.head_stride +
         size_t(pos % layer.block_size) * t.row_stride;
}

// grid (query tiles, num_heads)
__global__ void __launch_bounds__(kThreads) prefill_kernel(PrefillParams p) {
  __shared__ float keys[kKeyTile][kMaxHeadDim];
  __shared__ float values[kKeyTile][kMaxHeadDim];
  const PagedKvLayer& layer = p.layer;
  const int32_t d = layer.head_dim;
  const int32_t head = blockIdx.y;
  const int32_t kv_head = head / p.group;
  const int32_t lane = threadIdx.x % 32;
  const int32_t row0 = blockIdx.x * kQueryTile + int32_t(threadIdx.x / 32) * kRowsPerWarp;

  float q[kRowsPerWarp][kDimsPerLane];
  float acc[kRowsPerWarp][kDimsPerLane];
  float m[kRowsPerWarp], l[kRowsPerWarp];
  int32_t position[kRowsPerWarp];   // -1: no query row (past num_queries)
  const float q_scale = p.scale * kLog2e;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int32_t row = row0 + r;
    position[r] = row < p.num_queries ? p.first_position + row : -1;
    const float* qr = p.q + (int64_t(row) * p.num_heads + head) * d;
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) {
      const int32_t e = lane + 32 * i;
      q[r][i] = position[r] >= 0 && e < d ? qr[e] * q_scale : 0.0f;
      acc[r][i] = 0.0f;
    }
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }

  const int32_t last_row = min(p.num_queries, int32_t(blockIdx.x + 1) * kQueryTile) - 1;
  const int32_t key_end = p.first_position + last_row + 1;   // keys [0, key_end) matter to this CTA
  const int32_t chunks = d / 8;
  for (int32_t key0 = 0; key0 < key_end; key0 += kKeyTile) {
    __syncthreads();   // the previous tile is no longer read
    for (int32_t c = threadIdx.x; c < kKeyTile * chunks; c += kThreads) {
      const int32_t r = c / chunks, e0 = (c % chunks) * 8, pos = key0 + r;
      if (pos >= key_end) continue;
      RowPart part;
      float x[8];
      fetch8<kAnyKvType>(layer.k.type, row_address(layer.k, layer, p.seq, pos, kv_head), d, e0, part);
      decode8<kAnyKvType>(layer.k.type, part, x);
      for (int i = 0; i < 8; ++i) keys[r][e0 + i] = x[i];
      fetch8<kAnyKvType>(layer.v.type, row_address(layer.v, layer, p.seq, pos, kv_head), d, e0, part);
      decode8<kAnyKvType>(layer.v.type, part, x);
      for (int i = 0; i < 8; ++i) values[r][e0 + i] = x[i];
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int32_t visible = min(kKeyTile, position[r] + 1 - key0);   // warp-uniform; <= 0 for no row
      for (int32_t j = 0; j < visible; ++j) {
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < kDimsPerLane; ++i) {
          if (lane + 32 * i < d) dot = fmaf(q[r][i], keys[j][lane + 32 * i], dot);
        }
        for (int offset = 16; offset > 0; offset /= 2) dot += __shfl_xor_sync(kFullMask, dot, offset);
        const SoftmaxStep step = online_softmax_step(m[r], l[r], dot);
#pragma unroll
        for (int i = 0; i < kDimsPerLane; ++i) {
          if (lane + 32 * i < d) acc[r][i] = fmaf(acc[r][i], step.acc_scale, values[j][lane + 32 * i] * step.weight);
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    if (position[r] < 0) continue;
    float* out = p.out + (int64_t(row0 + r) * p.num_heads + head) * d;
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) {
      if (lane + 32 * i < d) out[lane + 32 * i] = acc[r][i] / l[r];
    }
  }
}

}  // namespace

void paged_prefill_attention(const PagedKvLayer& layer, const PagedSeq& seq, int32_t num_queries, const float* q,
                             int32_t num_heads, float scale, float* out) {
  const int32_t d = layer.head_dim;
  if (d <= 0 || d % 8 != 0 || d > kMaxHeadDim) {
    throw std::invalid_argument("CUDA prefill attention: head_dim " + std::to_string(d) + " must be a multiple of 8 and at most " +
                                std::to_string(kMaxHeadDim));
  }
  if (layer.num_kv_heads <= 0 || num_heads <= 0 || num_heads % layer.num_kv_heads != 0 || num_heads > 65535) {
    throw std::invalid_argument("CUDA prefill attention: num_heads must be a multiple of num_kv_heads, at most 65535");
  }
  if (num_queries < 0 || num_queries > seq.num_tokens) {
    throw std::invalid_argument("CUDA prefill attention: " + std::to_string(num_queries) + " queries but the sequence holds " +
                                std::to_string(seq.num_tokens) + " tokens");
  }
  require_fetch_alignment(layer.k, "CUDA prefill attention", "K");
  require_fetch_alignment(layer.v, "CUDA prefill attention", "V");
  if (num_queries == 0) return;
  const PrefillParams p{layer, seq, seq.num_tokens - num_queries, num_queries, q, out, num_heads,
                        num_heads / layer.num_kv_heads, scale};
  const unsigned tiles = unsigned((num_queries + kQueryTile - 1) / kQueryTile);
  prefill_kernel<<<dim3(tiles, unsigned(num_heads)), kThreads>>>(p);
  check_last_error("CUDA prefill attention");
}

}  // namespace kvdesk::cuda
