// What the two split kernels of batched decode attention share (paged_attention.cu's SIMT
// kernel, attention_mma.cu's tensor-core one): their parameters, the partials' layout the
// combine kernel reads, and a row's address in the paged pool. Device code; included by .cu
// files only.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/paged_kv.h"

namespace kvdesk::cuda {

constexpr float kLog2e = 1.4426950408889634f;

// One batched call's parameters. Each split kernel writes, for every (sequence, query head,
// split) that holds tokens, the base-2 running max m and sum l of its softmax (scores prescaled
// by scale * log2 e) and its unnormalized output:
//   partial_ml[seq][head][split] = (m, l),  partial_acc[seq][head][split][head_dim]
struct SplitParams {
  PagedKvLayer layer;
  const PagedSeq* seqs;       // [num_seqs]
  const float* q;             // [num_seqs][num_heads][head_dim]
  float scale;
  int32_t num_heads;
  int32_t group;              // query heads per kv head
  int32_t head_chunks;        // CTAs per kv head: ceil(group / the kernel's heads per CTA)
  int32_t num_splits;
  int32_t split_tokens;
  float* partial_ml;          // [num_seqs][num_heads][num_splits][2]
  float* partial_acc;         // [num_seqs][num_heads][num_splits][head_dim]
};

__device__ inline const uint8_t* row_address(const PagedKvTensor& t, int32_t block, int32_t block_size, int32_t pos,
                                             int32_t kv_head) {
  return t.data + size_t(block) * t.block_stride + size_t(kv_head) * t.head_stride +
         size_t(pos % block_size) * t.row_stride;
}

// The tensor-core kernel (attention_mma.cu): whether it takes this layer, and its launch over
// grid (num_splits, kv heads x head_chunks, num_seqs); p.head_chunks counts its 16-head chunks.
bool mma_attention_takes(const PagedKvLayer& layer);
int32_t mma_attention_head_chunks(int32_t group);
void launch_mma_attention(const SplitParams& p, int32_t num_seqs);

}  // namespace kvdesk::cuda
