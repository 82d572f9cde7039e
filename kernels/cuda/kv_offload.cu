// Host offload gather/scatter of whole KV blocks (see cuda_kernels.h): one CTA per (block,
// K or V) copies the block's bytes to or from its slot of the staging buffer.
#include <cuda_runtime.h>

#include "kernels/cuda/block_copy.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device.h"

namespace kvdesk::cuda {
namespace {

constexpr int kCopyThreads = 256;

// Where block i's K (is_value false) or V bytes sit in the staging buffer.
__device__ inline size_t staging_offset(const PagedKvLayer& layer, int32_t i, bool is_value) {
  return size_t(i) * (layer.k.block_stride + layer.v.block_stride) + (is_value ? layer.k.block_stride : 0);
}

// grid (num_blocks, 2: K then V)
__global__ void gather_kernel(PagedKvLayer layer, const int32_t* blocks, uint8_t* staging) {
  const bool is_value = blockIdx.y == 1;
  const PagedKvTensor& t = is_value ? layer.v : layer.k;
  cta_copy_bytes(staging + staging_offset(layer, blockIdx.x, is_value), t.data + size_t(blocks[blockIdx.x]) * t.block_stride,
                 t.block_stride);
}

__global__ void scatter_kernel(PagedKvLayer layer, const int32_t* blocks, const uint8_t* staging) {
  const bool is_value = blockIdx.y == 1;
  const PagedKvTensor& t = is_value ? layer.v : layer.k;
  cta_copy_bytes(t.data + size_t(blocks[blockIdx.x]) * t.block_stride, staging + staging_offset(layer, blockIdx.x, is_value),
                 t.block_stride);
}

}  // namespace

size_t offload_staging_bytes(const PagedKvLayer& layer, int32_t num_blocks) {
  return size_t(num_blocks) * (layer.k.block_stride + layer.v.block_stride);
}

void paged_kv_gather_blocks(const PagedKvLayer& layer, const int32_t* blocks, int32_t num_blocks, uint8_t* staging) {
  if (num_blocks <= 0) return;
  gather_kernel<<<dim3(unsigned(num_blocks), 2), kCopyThreads>>>(layer, blocks, staging);
  check_last_error("CUDA KV gather");
}

void paged_kv_scatter_blocks(const PagedKvLayer& layer, const int32_t* blocks, int32_t num_blocks, const uint8_t* staging) {
  if (num_blocks <= 0) return;
  scatter_kernel<<<dim3(unsigned(num_blocks), 2), kCopyThreads>>>(layer, blocks, staging);
  check_last_error("CUDA KV scatter");
}

}  // namespace kvdesk::cuda
