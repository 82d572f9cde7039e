// Host-callable launchers of the CUDA KV kernels (decode and prefill attention, append, block
// copies, offload), over the same plain-data contract as the CPU kernels (kernels/paged_kv.h,
// kernels/attention.h) with every pointer in device memory. Plain
// C++: includes no CUDA header. All launches go to the default stream and return without
// waiting; bad shapes throw std::invalid_argument before anything is launched.
//
// Batched decode attention (flash-decoding): the grid is (split, kv head x head chunk,
// sequence). Each CTA reads one split of one sequence's K/V rows for one kv head through the
// block table, dequantizes them and runs an online softmax for the query heads of (a chunk of)
// that kv head's group; it writes a partial (max, sum, acc). Where attention_on_tensor_cores
// says so, the products run on tensor cores (f16 inputs, 64-token tiles, up to 16 heads a CTA),
// else in f32 registers (up to kMaxHeadsPerCta heads a CTA). A second kernel combines the
// partials of a (sequence, head) into out. The split count comes from an AttentionPlan, so long
// contexts spread over the whole GPU.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/paged_kv.h"

namespace kvdesk::cuda {

constexpr int32_t kMaxHeadsPerCta = 8;   // query heads one CTA keeps in registers
constexpr int32_t kMaxHeadDim = 256;     // head_dim: a multiple of 8, at most this

// How one batched attention call is cut. The same plan must size the workspace and run.
struct AttentionPlan {
  int32_t num_splits = 1;     // splits per sequence, for the longest one
  int32_t split_tokens = 0;   // tokens per split (a multiple of 64)
  bool tensor_cores = true;   // the tensor-core kernel where it takes the layer (false: the f32 one)
};

// Splits so that num_seqs x num_kv_heads x head chunks x splits CTAs fill about two waves of
// multiprocessors, never a split under 64 tokens; tensor cores where the layer allows.
AttentionPlan plan_attention(int32_t num_seqs, int32_t num_heads, int32_t num_kv_heads,
                             int32_t max_tokens, int32_t multiprocessors);

// Floats of the workspace (AttentionArgs::scratch) one batched call needs.
int64_t attention_workspace_floats(const AttentionPlan& plan, int32_t num_seqs, int32_t num_heads,
                                   int32_t head_dim);

// Decode attention of one query token per sequence:
//   seqs[num_seqs]                   device array; every num_tokens in [1, max_tokens]
//   args.q, args.out                 device [num_seqs][num_heads][head_dim]
//   args.scratch                     device [attention_workspace_floats(...)]
//   args.numerics                    Exact only (the LlamaCpp f16 rounding is CPU-only)
// Same result as ref::paged_attention per sequence up to f32 rounding, or, where
// plan.tensor_cores and attention_on_tensor_cores(layer), up to f16 rounding of q, of the
// decoded K/V values and of the softmax weights (f16 K/V are exact).
void paged_attention(const PagedKvLayer& layer, const PagedSeq* seqs, int32_t num_seqs,
                     int32_t max_tokens, const AttentionArgs& args, const AttentionPlan& plan);

// Whether paged_attention can run this layer on tensor cores: K and V of one type among f16,
// fp8_e4m3, fp8_e5m2, int8 and int4, head_dim 64, 96 or 128. f32 and bf16 KV (kept for their
// precision and range), mixed types and other head dims take the f32 path.
bool attention_on_tensor_cores(const PagedKvLayer& layer);

// Causal prefill attention of one sequence's newest num_queries tokens (their K/V already
// appended) over all its cached tokens, a reused prefix included:
//   seq                      block_table in device memory; num_tokens counts the new tokens
//   q, out                   device [num_queries][num_heads][head_dim]; query t sits at
//                            position seq.num_tokens - num_queries + t and sees keys [0, position]
// Exact numerics; same result as ref::paged_attention per query token (num_tokens = position + 1)
// up to f32 rounding.
void paged_prefill_attention(const PagedKvLayer& layer, const PagedSeq& seq, int32_t num_queries, const float* q,
                             int32_t num_heads, float scale, float* out);

// Write one token's K and V rows for each of num_items (sequence, position) pairs, quantized to
// the layer's types bit-identically to ref::quantize_kv_row (so to paged_kv_write):
//   seqs[num_items], positions[num_items]           device; 0 <= position < num_tokens
//   k, v                                            device [num_items][num_kv_heads][head_dim]
// Items whose position is out of range are skipped.
void paged_kv_append(const PagedKvLayer& layer, const PagedSeq* seqs, const int32_t* positions,
                     int32_t num_items, const float* k, const float* v);

// Copy-on-write: copy whole physical blocks of K and V, block src[i] -> dst[i] (device
// [num_copies] each); no destination may also be a source.
void paged_kv_copy_blocks(const PagedKvLayer& layer, const int32_t* src, const int32_t* dst,
                          int32_t num_copies);

// Host offload of one layer's blocks through a staging buffer: device memory (then one
// cudaMemcpyAsync to or from pinned host memory) or mapped pinned host memory itself.
//   blocks[num_blocks]                                   device; physical block ids
//   staging [num_blocks][k.block_stride + v.block_stride] block i's K bytes, then its V bytes
// Gather copies the blocks into staging; scatter copies staging back into (other) blocks.
// Bytes move as stored: a block read back equals the block written out.
size_t offload_staging_bytes(const PagedKvLayer& layer, int32_t num_blocks);
void paged_kv_gather_blocks(const PagedKvLayer& layer, const int32_t* blocks, int32_t num_blocks, uint8_t* staging);
void paged_kv_scatter_blocks(const PagedKvLayer& layer, const int32_t* blocks, int32_t num_blocks, const uint8_t* staging);

}  // namespace kvdesk::cuda
