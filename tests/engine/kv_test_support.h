// KV cache test helpers: a tiny model shape, a cache over it, and a stand-in for the forward
// pass that writes K/V rows determined by the whole token prefix, so reading a row back tells
// whether a block (shared, cached, copied or swapped) really holds this sequence's prefix.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/kv/kv_cache.h"
#include "kernels/attention.h"

namespace kvdesk::test {

inline constexpr int32_t kTinyLayers = 2;
inline constexpr int32_t kTinyKvHeads = 2;
inline constexpr int32_t kTinyHeadDim = 4;

inline ModelConfig tiny_model(int32_t context_length = 256) {
  ModelConfig c;
  c.block_count = kTinyLayers;
  c.head_count = 4;
  c.head_count_kv = kTinyKvHeads;
  c.head_dim = kTinyHeadDim;
  c.embedding_length = 16;
  c.context_length = context_length;
  return c;
}

inline KvCacheConfig tiny_cache_config(int32_t num_blocks, int32_t block_size = 16, bool prefix_caching = true) {
  KvCacheConfig config;
  config.layout.block_size = block_size;
  config.layout.num_blocks = num_blocks;
  config.prefix_caching = prefix_caching;
  return config;
}

// sig[p]: a 64-bit signature of tokens[0..p], as the KV of position p depends on its prefix.
inline std::vector<uint64_t> prefix_signatures(const std::vector<int32_t>& tokens) {
  std::vector<uint64_t> sig(tokens.size());
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (size_t p = 0; p < tokens.size(); ++p) {
    h = (h ^ uint64_t(uint32_t(tokens[p]))) * 0x100000001B3ull;
    h ^= h >> 29;
    sig[p] = h;
  }
  return sig;
}

// K row of (layer, kv head) for a position with this signature: four 16-bit slices (exact in
// f32). V is K + 0.5.
inline void expected_k_row(uint64_t sig, int32_t layer, int32_t kv_head, float* out) {
  const uint64_t mixed = sig ^ (uint64_t(layer) * 0x9E37ull + uint64_t(kv_head) * 0x85EBull);
  for (int32_t d = 0; d < kTinyHeadDim; ++d) out[d] = float((mixed >> (16 * d)) & 0xFFFF);
}

// The forward pass's KV writes for positions [num_computed, upto), then mark_computed(upto);
// the cache's invariants are checked after.
inline void compute(KvCache& kv, SeqId seq, int32_t upto) {
  const std::vector<int32_t>& tokens = kv.tokens(seq);
  const std::vector<uint64_t> sig = prefix_signatures(tokens);
  float k[kTinyKvHeads * kTinyHeadDim];   // [kv_heads][head_dim]
  float v[kTinyKvHeads * kTinyHeadDim];
  for (int32_t p = kv.num_computed(seq); p < upto; ++p) {
    for (int32_t l = 0; l < kTinyLayers; ++l) {
      for (int32_t g = 0; g < kTinyKvHeads; ++g) {
        expected_k_row(sig[size_t(p)], l, g, k + g * kTinyHeadDim);
        for (int32_t d = 0; d < kTinyHeadDim; ++d) v[g * kTinyHeadDim + d] = k[g * kTinyHeadDim + d] + 0.5f;
      }
      paged_kv_write(kv.layer(l), kv.view(seq, p + 1, l), p - kv.num_evicted(seq), k, v);
    }
  }
  kv.mark_computed(seq, upto);
  kv.check_invariants();
}

inline void compute(KvCache& kv, SeqId seq) { compute(kv, seq, kv.num_tokens(seq)); }

// The first computed position whose K or V read back through the block table is not what
// compute() wrote for this sequence's tokens; -1 when all match. Blocks a sliding-window layer
// let go of are not read.
inline int32_t first_wrong_position(const KvCache& kv, SeqId seq) {
  const std::vector<uint64_t> sig = prefix_signatures(kv.tokens(seq));
  float want[kTinyHeadDim];
  float got_k[kTinyHeadDim];
  float got_v[kTinyHeadDim];
  const int32_t computed_slots = kv.num_computed(seq) - kv.num_evicted(seq);
  for (int32_t p = 0; p < computed_slots; ++p) {
    for (int32_t l = 0; l < kTinyLayers; ++l) {
      const PagedSeq view = kv.view(seq, kv.num_computed(seq), l);
      if (view.block_table[p / kv.block_size()] < 0) continue;
      for (int32_t g = 0; g < kTinyKvHeads; ++g) {
        expected_k_row(sig[size_t(p)], l, g, want);
        paged_kv_read_k(kv.layer(l), view, p, g, got_k);
        paged_kv_read_v(kv.layer(l), view, p, g, got_v);
        for (int32_t d = 0; d < kTinyHeadDim; ++d) {
          if (got_k[d] != want[d] || got_v[d] != want[d] + 0.5f) return p;
        }
      }
    }
  }
  return -1;
}

// Appends and computes tokens, as a prefill or decode step would.
inline bool append_and_compute(KvCache& kv, SeqId seq, const std::vector<int32_t>& tokens) {
  if (!kv.append(seq, tokens)) return false;
  compute(kv, seq);
  return true;
}

inline std::vector<int32_t> token_range(int32_t first, int32_t count) {
  std::vector<int32_t> t(static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i) t[size_t(i)] = first + i;
  return t;
}

inline std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace kvdesk::test
