// Batched paged decode attention on the GPU, flash-decoding style (see cuda_kernels.h).
//
// Two split kernels write the same partials (attention_split.cuh): the tensor-core kernel of
// attention_mma.cu where it takes the layer (one KV type among f16, fp8, int8 and int4, head_dim
// 64, 96 or 128; see attention_on_tensor_cores), and this file's SIMT kernel for the rest (f32
// and bf16 KV, mixed K/V types, other head dims), which rounds nothing.
//
// SIMT split kernel, one CTA per (split, kv head x head chunk, sequence), kThreads threads:
//   a row of head_dim values is read by L = pow2ceil(head_dim / 8) lanes, 8 values each, so a
//   warp reads 32 / L rows at once ("token slots"; a CTA has kThreads / L of them), and each
//   slot loads kRowsPerSlot K and V rows before using them (bytes in flight). Each slot
//   runs the online softmax of ref::paged_attention over its tokens for the CTA's query heads
//   (scores in base 2: q is prescaled by scale * log2 e). At the end the slots' (m, l, acc)
//   are merged through shared memory into one partial per (sequence, head, split):
//     partial_ml[seq][head][split] = (m, l),  partial_acc[seq][head][split][head_dim]
//   with acc unnormalized.
// Combine kernel, one CTA per (head, sequence): M = max m_s, out = sum acc_s 2^(m_s - M) /
//   sum l_s 2^(m_s - M) over the splits that hold tokens of the sequence.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cuda/attention_split.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/kv_checks.h"
#include "kernels/cuda/kv_codec.cuh"

namespace kvdesk::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kRowsPerSlot = 4;   // K and V rows each token slot has in flight per step
constexpr int kMinSplitTokens = 64;

// The types are ints, not KvType: nvcc's host stub cannot name kAnyKvType as an enum argument.
// kHeads: the query heads the kernel keeps registers and shared memory for (4 or
// kMaxHeadsPerCta); a group of at most 4 heads takes the 4-head instance, whose fewer registers
// let more CTAs share a multiprocessor and keep more K/V bytes in flight.
template <int kKTypeCode, int kVTypeCode, int kHeads>
__global__ void __launch_bounds__(kThreads) attention_split_kernel(SplitParams p) {
  constexpr KvType kKType = KvType(kKTypeCode);
  constexpr KvType kVType = KvType(kVTypeCode);
  const int32_t seq_index = blockIdx.z;
  const int32_t kv_head = blockIdx.y / p.head_chunks;
  const int32_t head0 = kv_head * p.group + (blockIdx.y % p.head_chunks) * kMaxHeadsPerCta;
  const int32_t heads = min(kHeads, kv_head * p.group + p.group - head0);
  const int32_t split = blockIdx.x;
  const PagedSeq seq = p.seqs[seq_index];
  const int32_t begin = split * p.split_tokens;
  if (begin >= seq.num_tokens) return;   // this sequence is shorter than the plan's longest
  const int32_t end = min(seq.num_tokens, begin + p.split_tokens);

  const PagedKvLayer& layer = p.layer;
  const int32_t d = layer.head_dim;
  const int32_t lanes_per_row = 1 << (32 - __clz(d / 8 - 1));   // pow2ceil(d / 8); d/8 == 1 -> 1
  const int32_t lane = threadIdx.x % 32;
  const int32_t sub = lane % lanes_per_row;   // which 8 values of the row
  const int32_t slot = threadIdx.x / lanes_per_row;
  const int32_t slots = kThreads / lanes_per_row;
  const int32_t e0 = sub * 8;
  const bool has_values = e0 < d;

  float q[kHeads][8];   // [head][value], prescaled to base-2 scores
  float acc[kHeads][8];
  float m[kHeads], l[kHeads];
  const float q_scale = p.scale * kLog2e;
#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
    const float* qh = p.q + (int64_t(seq_index) * p.num_heads + head0 + h) * d + e0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      q[h][i] = h < heads && has_values ? qh[i] * q_scale : 0.0f;
      acc[h][i] = 0.0f;
    }
    m[h] = -INFINITY;
    l[h] = 0.0f;
  }

  // A warp step covers kRowsPerSlot x slots_per_warp consecutive tokens: all their K and V
  // loads are issued first, then the math runs row by row. Every lane of a warp runs the same
  // iterations (the shuffles need all 32).
  const int32_t slots_per_warp = 32 / lanes_per_row;
  const int32_t warp_slot = slot % slots_per_warp;
  const int32_t warp_tokens = kRowsPerSlot * slots_per_warp;
  for (int32_t base = begin + int32_t(threadIdx.x / 32) * warp_tokens; base < end; base += kWarps * warp_tokens) {
    RowPart k_parts[kRowsPerSlot], v_parts[kRowsPerSlot];
#pragma unroll
    for (int j = 0; j < kRowsPerSlot; ++j) {
      const int32_t pos = base + j * slots_per_warp + warp_slot;
      if (pos < end && has_values) {
        const int32_t block = seq.block_table[pos / layer.block_size];
        fetch8<kKType>(layer.k.type, row_address(layer.k, block, layer.block_size, pos, kv_head), d, e0, k_parts[j]);
        fetch8<kVType>(layer.v.type, row_address(layer.v, block, layer.block_size, pos, kv_head), d, e0, v_parts[j]);
      }
    }
#pragma unroll
    for (int j = 0; j < kRowsPerSlot; ++j) {
      float k[8];
      decode8<kKType>(layer.k.type, k_parts[j], k);
      float s[kHeads] = {};
#pragma unroll
      for (int h = 0; h < kHeads; ++h) {
        if (h >= heads) break;   // CTA-uniform
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) dot = fmaf(q[h][i], k[i], dot);
        for (int offset = lanes_per_row / 2; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xFFFFFFFFu, dot, offset);
        s[h] = dot;
      }
      if (base + j * slots_per_warp + warp_slot >= end) continue;
      float v[8];
      decode8<kVType>(layer.v.type, v_parts[j], v);
#pragma unroll
      for (int h = 0; h < kHeads; ++h) {
        if (h >= heads) break;
        // The running max rarely moves after a slot's first tokens: rescale only when it does
        // (the row's lanes agree, as they hold the same reduced score).
        if (s[h] > m[h]) {
          const float acc_scale = exp2f(m[h] - s[h]);
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[h][i] *= acc_scale;
          l[h] *= acc_scale;
          m[h] = s[h];
        }
        const float weight = exp2f(s[h] - m[h]);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[h][i] = fmaf(v[i], weight, acc[h][i]);
        l[h] += weight;
      }
    }
  }

  // Merge the slots: slot_ml[head][slot] = (m, l); slot_acc[head][thread's 8 values].
  __shared__ float slot_m[kHeads][kThreads];
  __shared__ float slot_l[kHeads][kThreads];
  __shared__ float slot_acc[kHeads][kThreads * 8];
  __shared__ float cta_m[kHeads];
#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
    if (sub == 0) {
      slot_m[h][slot] = m[h];
      slot_l[h][slot] = l[h];
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) slot_acc[h][threadIdx.x * 8 + i] = acc[h][i];
  }
  __syncthreads();
  if (threadIdx.x < heads) {
    float mx = -INFINITY;
    for (int32_t s = 0; s < slots; ++s) mx = fmaxf(mx, slot_m[threadIdx.x][s]);
    float sum = 0.0f;
    for (int32_t s = 0; s < slots; ++s) {
      if (slot_l[threadIdx.x][s] > 0.0f) sum += slot_l[threadIdx.x][s] * exp2f(slot_m[threadIdx.x][s] - mx);
    }
    cta_m[threadIdx.x] = mx;
    const int64_t row = (int64_t(seq_index) * p.num_heads + head0 + threadIdx.x) * p.num_splits + split;
    p.partial_ml[2 * row] = mx;
    p.partial_ml[2 * row + 1] = sum;
  }
  __syncthreads();
  for (int32_t idx = threadIdx.x; idx < heads * d; idx += kThreads) {
    const int32_t h = idx / d;
    const int32_t e = idx % d;
    float total = 0.0f;
    for (int32_t s = 0; s < slots; ++s) {
      if (slot_l[h][s] > 0.0f) {
        total += slot_acc[h][(s * lanes_per_row + e / 8) * 8 + e % 8] * exp2f(slot_m[h][s] - cta_m[h]);
      }
    }
    const int64_t row = (int64_t(seq_index) * p.num_heads + head0 + h) * p.num_splits + split;
    p.partial_acc[row * d + e] = total;
  }
}

__global__ void attention_combine_kernel(const PagedSeq* seqs, int32_t num_heads, int32_t head_dim,
                                         int32_t num_splits, int32_t split_tokens,
                                         const float* partial_ml, const float* partial_acc, float* out) {
  const int32_t seq_index = blockIdx.y;
  const int32_t head = blockIdx.x;
  const int32_t used = min(num_splits, (seqs[seq_index].num_tokens + split_tokens - 1) / split_tokens);
  const int64_t row0 = (int64_t(seq_index) * num_heads + head) * num_splits;
  float mx = -INFINITY;
  for (int32_t s = 0; s < used; ++s) mx = fmaxf(mx, partial_ml[2 * (row0 + s)]);
  float sum = 0.0f;
  for (int32_t s = 0; s < used; ++s) sum += partial_ml[2 * (row0 + s) + 1] * exp2f(partial_ml[2 * (row0 + s)] - mx);
  for (int32_t e = threadIdx.x; e < head_dim; e += blockDim.x) {
    float total = 0.0f;
    for (int32_t s = 0; s < used; ++s) {
      total += partial_acc[(row0 + s) * head_dim + e] * exp2f(partial_ml[2 * (row0 + s)] - mx);
    }
    out[(int64_t(seq_index) * num_heads + head) * head_dim + e] = total / sum;
  }
}

template <KvType kKType, KvType kVType>
void launch_split(const SplitParams& p, dim3 grid) {
  if (p.group <= 4) {
    attention_split_kernel<int(kKType), int(kVType), 4><<<grid, kThreads>>>(p);
  } else {
    attention_split_kernel<int(kKType), int(kVType), kMaxHeadsPerCta><<<grid, kThreads>>>(p);
  }
}

void launch_split_for_types(const SplitParams& p, dim3 grid) {
  const KvType k = p.layer.k.type;
  if (k != p.layer.v.type) return launch_split<kAnyKvType, kAnyKvType>(p, grid);
  switch (k) {
    case KvType::F32: return launch_split<KvType::F32, KvType::F32>(p, grid);
    case KvType::F16: return launch_split<KvType::F16, KvType::F16>(p, grid);
    case KvType::BF16: return launch_split<KvType::BF16, KvType::BF16>(p, grid);
    case KvType::FP8_E4M3: return launch_split<KvType::FP8_E4M3, KvType::FP8_E4M3>(p, grid);
    case KvType::FP8_E5M2: return launch_split<KvType::FP8_E5M2, KvType::FP8_E5M2>(p, grid);
    case KvType::INT8: return launch_split<KvType::INT8, KvType::INT8>(p, grid);
    case KvType::INT4: return launch_split<KvType::INT4, KvType::INT4>(p, grid);
  }
}

int32_t head_chunks(int32_t num_heads, int32_t num_kv_heads) {
  const int32_t group = num_heads / num_kv_heads;
  return (group + kMaxHeadsPerCta - 1) / kMaxHeadsPerCta;
}

}  // namespace

AttentionPlan plan_attention(int32_t num_seqs, int32_t num_heads, int32_t num_kv_heads, int32_t max_tokens,
                             int32_t multiprocessors) {
  if (num_seqs <= 0 || num_kv_heads <= 0 || num_heads % num_kv_heads != 0 || max_tokens <= 0) {
    throw std::invalid_argument("CUDA attention plan: need sequences, tokens, and num_heads a multiple of num_kv_heads");
  }
  const int64_t ctas_per_split = int64_t(num_seqs) * num_kv_heads * head_chunks(num_heads, num_kv_heads);
  const int64_t wanted = std::max<int64_t>(1, (2 * int64_t(multiprocessors) + ctas_per_split - 1) / ctas_per_split);
  const int64_t most = (max_tokens + kMinSplitTokens - 1) / kMinSplitTokens;
  const int64_t splits = std::min(wanted, most);
  const int64_t per_split = (max_tokens + splits - 1) / splits;
  AttentionPlan plan;
  plan.split_tokens = int32_t((per_split + kMinSplitTokens - 1) / kMinSplitTokens * kMinSplitTokens);
  plan.num_splits = int32_t((max_tokens + plan.split_tokens - 1) / plan.split_tokens);
  return plan;
}

bool attention_on_tensor_cores(const PagedKvLayer& layer) { return mma_attention_takes(layer); }

int64_t attention_workspace_floats(const AttentionPlan& plan, int32_t num_seqs, int32_t num_heads, int32_t head_dim) {
  return int64_t(num_seqs) * num_heads * plan.num_splits * (2 + int64_t(head_dim));
}

void paged_attention(const PagedKvLayer& layer, const PagedSeq* seqs, int32_t num_seqs, int32_t max_tokens,
                     const AttentionArgs& args, const AttentionPlan& plan) {
  const int32_t d = layer.head_dim;
  if (d <= 0 || d % 8 != 0 || d > kMaxHeadDim) {
    throw std::invalid_argument("CUDA paged attention: head_dim " + std::to_string(d) +
                                " must be a multiple of 8 and at most " + std::to_string(kMaxHeadDim));
  }
  if (layer.num_kv_heads <= 0 || args.num_heads % layer.num_kv_heads != 0) {
    throw std::invalid_argument("CUDA paged attention: num_heads must be a multiple of num_kv_heads");
  }
  if (args.numerics != AttentionNumerics::Exact) {
    throw std::invalid_argument("CUDA paged attention: only Exact numerics (LlamaCpp f16 rounding is CPU-only)");
  }
  if (int64_t(plan.num_splits) * plan.split_tokens < max_tokens || plan.split_tokens <= 0) {
    throw std::invalid_argument("CUDA paged attention: the plan does not cover max_tokens");
  }
  require_fetch_alignment(layer.k, "CUDA paged attention", "K");
  require_fetch_alignment(layer.v, "CUDA paged attention", "V");
  if (num_seqs > 65535) throw std::invalid_argument("CUDA paged attention: at most 65535 sequences per call");
  if (num_seqs == 0) return;
  const int64_t partials = int64_t(num_seqs) * args.num_heads * plan.num_splits;
  SplitParams p{layer,
                seqs,
                args.q,
                args.scale,
                args.num_heads,
                args.num_heads / layer.num_kv_heads,
                head_chunks(args.num_heads, layer.num_kv_heads),
                plan.num_splits,
                plan.split_tokens,
                args.scratch,
                args.scratch + 2 * partials};
  if (plan.tensor_cores && mma_attention_takes(layer)) {
    p.head_chunks = mma_attention_head_chunks(p.group);
    launch_mma_attention(p, num_seqs);
  } else {
    const dim3 split_grid(unsigned(plan.num_splits), unsigned(layer.num_kv_heads * p.head_chunks), unsigned(num_seqs));
    launch_split_for_types(p, split_grid);
  }
  check_last_error("CUDA paged attention (split kernel)");
  const dim3 combine_grid(unsigned(args.num_heads), unsigned(num_seqs));
  attention_combine_kernel<<<combine_grid, std::min(d, 128)>>>(seqs, args.num_heads, d, plan.num_splits,
                                                               plan.split_tokens, p.partial_ml, p.partial_acc, args.out);
  check_last_error("CUDA paged attention (combine kernel)");
}

}  // namespace kvdesk::cuda
