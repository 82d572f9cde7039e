// PagedKvLayer: the plain-data contract between the KV cache (engine/) and the attention
// kernels (CPU and CUDA) for one layer. Keys and values live in fixed-size physical
// blocks; a sequence's block table maps its logical block i (positions [i*B, (i+1)*B)) to a
// physical block. Scattered blocks then read as one contiguous sequence.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/kv_type.h"

namespace kvdesk {

// Layout of one layer's K (and, separately, V) storage:
//   data[num_blocks][num_kv_heads][block_size][kv_row_bytes(type, head_dim)]
// so one (block, kv head) is block_size rows, contiguous: the rows a query head of that
// group reads one after another.
struct PagedKvTensor {
  KvType type = KvType::F32;
  uint8_t* data = nullptr;
  size_t block_stride = 0;   // bytes between physical blocks
  size_t head_stride = 0;    // bytes between kv heads inside a block
  size_t row_stride = 0;     // bytes between token rows inside a (block, head)
};

struct PagedKvLayer {
  PagedKvTensor k;
  PagedKvTensor v;
  int32_t block_size = 16;   // tokens per block
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
};

// One sequence as attention sees it.
struct PagedSeq {
  const int32_t* block_table = nullptr;  // [ceil(num_tokens / block_size)] physical block ids
  int32_t num_tokens = 0;                // positions [0, num_tokens) are readable
};

}  // namespace kvdesk
