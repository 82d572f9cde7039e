// KV append with on-the-fly quantization, and copy-on-write block copies (see cuda_kernels.h).
// Append: one warp per (item, kv head, K or V) writes one row; lane i handles values i, i + 32,
// ... The row maxima are warp reductions (max is exact, so their order does not matter) and
// each value goes through the encoders of kv_codec.cuh, so rows equal ref::quantize_kv_row's.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "kernels/cuda/block_copy.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/kv_codec.cuh"

namespace kvdesk::cuda {
namespace {

constexpr unsigned kFullMask = 0xFFFFFFFFu;

__device__ inline float warp_abs_max(const float* x, int32_t n) {
  float amax = 0.0f;
  for (int32_t i = threadIdx.x; i < n; i += 32) amax = fmaxf(amax, fabsf(x[i]));
  for (int offset = 16; offset > 0; offset /= 2) amax = fmaxf(amax, __shfl_xor_sync(kFullMask, amax, offset));
  return amax;
}

// s = amax / max, codes[i] = fp8(x[i] / s): quantize_fp8_row.
template <uint8_t (*kEncode)(float)>
__device__ void write_fp8_row(const float* x, uint8_t* row, int32_t n, float max) {
  const float s = warp_abs_max(x, n) / max;
  if (threadIdx.x == 0) *reinterpret_cast<float*>(row) = s;
  uint8_t* codes = row + sizeof(float);
  for (int32_t i = threadIdx.x; i < n; i += 32) codes[i] = s != 0.0f ? kEncode(x[i] / s) : 0;
}

// quantize_affine_row: per group, its finite min and max as warp reductions (fmin / fmax skip
// NaNs and are exact, so order does not matter), the pair of affine_pair, then the codes; for
// int4 each lane writes whole bytes (values 2b and 2b + 1).
__device__ void write_affine_row(KvType type, const float* x, uint8_t* row, int32_t n) {
  const int32_t group = kv_row_group(type, n);
  const float levels = type == KvType::INT8 ? kKvInt8Levels : kKvInt4Levels;
  uint8_t* codes = row + kv_row_values_offset(type, n);
  const int32_t groups = kv_row_scales(type, n);
  for (int32_t g = 0; g < groups; ++g) {
    const int32_t begin = g * group, end = kv_group_end(type, n, g);
    float lo = INFINITY, hi = -INFINITY;
    for (int32_t i = begin + int32_t(threadIdx.x); i < end; i += 32) lo = fminf(lo, x[i]), hi = fmaxf(hi, x[i]);
    for (int offset = 16; offset > 0; offset /= 2) {
      lo = fminf(lo, __shfl_xor_sync(kFullMask, lo, offset));
      hi = fmaxf(hi, __shfl_xor_sync(kFullMask, hi, offset));
    }
    const AffinePair a = affine_pair(lo, hi, levels);
    if (threadIdx.x == 0) {
      reinterpret_cast<uint16_t*>(row)[2 * g] = a.s16;
      reinterpret_cast<uint16_t*>(row)[2 * g + 1] = a.m16;
    }
    if (type == KvType::INT8) {
      for (int32_t i = begin + int32_t(threadIdx.x); i < end; i += 32) codes[i] = uint8_t(encode_affine(x[i], a, levels));
    } else {
      for (int32_t b = begin / 2 + int32_t(threadIdx.x); b < end / 2; b += 32) {
        codes[b] = uint8_t(encode_affine(x[2 * b], a, levels) | encode_affine(x[2 * b + 1], a, levels) << 4);
      }
    }
  }
}

__device__ void write_row(KvType type, const float* x, uint8_t* row, int32_t n) {
  switch (type) {
    case KvType::F32:
      for (int32_t i = threadIdx.x; i < n; i += 32) reinterpret_cast<float*>(row)[i] = x[i];
      return;
    case KvType::F16:
      for (int32_t i = threadIdx.x; i < n; i += 32) reinterpret_cast<uint16_t*>(row)[i] = encode_fp16(x[i]);
      return;
    case KvType::BF16:
      for (int32_t i = threadIdx.x; i < n; i += 32) reinterpret_cast<uint16_t*>(row)[i] = encode_bf16(x[i]);
      return;
    case KvType::FP8_E4M3: return write_fp8_row<encode_fp8_e4m3>(x, row, n, kFp8E4M3Max);
    case KvType::FP8_E5M2: return write_fp8_row<encode_fp8_e5m2>(x, row, n, kFp8E5M2Max);
    case KvType::INT8:
    case KvType::INT4: return write_affine_row(type, x, row, n);
  }
}

// grid (num_items, num_kv_heads, 2: K then V), 32 threads.
__global__ void append_kernel(PagedKvLayer layer, const PagedSeq* seqs, const int32_t* positions,
                              const float* k, const float* v) {
  const int32_t item = blockIdx.x;
  const int32_t kv_head = blockIdx.y;
  const PagedSeq seq = seqs[item];
  const int32_t pos = positions[item];
  if (pos < 0 || pos >= seq.num_tokens) return;
  const bool is_value = blockIdx.z == 1;
  const PagedKvTensor& t = is_value ? layer.v : layer.k;
  const float* x = (is_value ? v : k) + (int64_t(item) * layer.num_kv_heads + kv_head) * layer.head_dim;
  const int32_t block = seq.block_table[pos / layer.block_size];
  uint8_t* row = t.data + size_t(block) * t.block_stride + size_t(kv_head) * t.head_stride +
                 size_t(pos % layer.block_size) * t.row_stride;
  write_row(t.type, x, row, layer.head_dim);
}

// grid (num_copies, 2: K then V): block src[i] -> dst[i].
__global__ void copy_blocks_kernel(PagedKvTensor k, PagedKvTensor v, const int32_t* src, const int32_t* dst) {
  const PagedKvTensor& t = blockIdx.y == 0 ? k : v;
  cta_copy_bytes(t.data + size_t(dst[blockIdx.x]) * t.block_stride, t.data + size_t(src[blockIdx.x]) * t.block_stride,
                 t.block_stride);
}

}  // namespace

void paged_kv_append(const PagedKvLayer& layer, const PagedSeq* seqs, const int32_t* positions, int32_t num_items,
                     const float* k, const float* v) {
  if (layer.head_dim <= 0 || layer.head_dim % 2 != 0 || layer.num_kv_heads <= 0 || layer.block_size <= 0) {
    throw std::invalid_argument("CUDA KV append: need kv heads, a block size and an even head_dim (got " +
                                std::to_string(layer.head_dim) + ")");
  }
  if (num_items == 0) return;
  append_kernel<<<dim3(unsigned(num_items), unsigned(layer.num_kv_heads), 2), 32>>>(layer, seqs, positions, k, v);
  check_last_error("CUDA KV append");
}

void paged_kv_copy_blocks(const PagedKvLayer& layer, const int32_t* src, const int32_t* dst, int32_t num_copies) {
  if (num_copies == 0) return;
  copy_blocks_kernel<<<dim3(unsigned(num_copies), 2), 256>>>(layer.k, layer.v, src, dst);
  check_last_error("CUDA KV block copy");
}

}  // namespace kvdesk::cuda
