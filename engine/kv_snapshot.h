// KvSnapshot: one plain, copyable picture of the paged KV cache for the UI panels, the CLI's
// --json and the benchmarks. Made by KvCache::snapshot(); holds no pointers into the cache.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/kv_type.h"

namespace kvdesk {

// The block sizes (tokens per block) a pool may use; the waste figures compare them all.
inline constexpr std::array<int32_t, 5> kKvBlockSizes = {8, 16, 32, 64, 128};

// Blocks that hold `tokens` tokens.
inline int32_t kv_blocks_for(int64_t tokens, int32_t block_size) {
  return int32_t((tokens + block_size - 1) / block_size);
}

// The newest rows a sequence keeps in f32 by default: on stories260K with 4-bit KV, 4, 8, 16
// and 32 rows take the mean KL from f32 KV from 5.5e-2 to 1.7e-2, 9.3e-3, 5.0e-3 and 2.6e-3,
// at layers x 2 x kv_dim x 4 bytes a row per sequence (TinyLlama: 16 rows, 0.7 MiB).
inline constexpr int32_t kKvRecentRows = 16;

// How a KV pool stores its blocks.
struct KvLayout {
  KvType k_type = KvType::F32;
  KvType v_type = KvType::F32;
  int32_t block_size = 16;     // tokens per block
  int32_t num_blocks = 0;      // physical blocks in the pool
  AttentionNumerics numerics = AttentionNumerics::Exact;  // how attention reads f16 K/V
  // Newest rows per sequence also kept in f32 and read exact (engine/kv/recent_rows.h) when K
  // or V is stored in 8 bits or fewer; a KvCache's own layout says 0 where it keeps none.
  int32_t recent_rows = kKvRecentRows;
};

// The rows a pool of this layout keeps in f32 per sequence: recent_rows for 8-bit and 4-bit
// K or V, else 0 (f16 and bf16 rows lose too little to be worth it).
inline int32_t kv_recent_rows(const KvLayout& layout) {
  return kv_type_low_bit(layout.k_type) || kv_type_low_bit(layout.v_type) ? layout.recent_rows : 0;
}

enum class BlockState : uint8_t {
  Free,      // never used, or its cached contents were evicted
  Cached,    // ref_count 0 but findable by hash: reusable until evicted (LRU)
  Used,      // held by exactly one sequence
  Shared,    // held by several sequences (ref_count > 1)
};

struct KvBlockInfo {
  BlockState state = BlockState::Free;
  int32_t ref_count = 0;
  int32_t filled_tokens = 0;   // tokens written in it (block_size when full)
};

struct KvSequenceInfo {
  int32_t seq_id = 0;
  int32_t num_tokens = 0;             // token rows held (after retention: the kept ones)
  std::vector<int32_t> block_table;   // [blocks] physical ids of layer group 0, in logical order
  int32_t shared_blocks = 0;          // entries of block_table with ref_count > 1
  int32_t tokens_seen = 0;            // positions the sequence went through (>= num_tokens)
  bool retained = false;              // a KV retention policy runs on it
  // With several layer groups (sliding-window layers): the blocks of groups 1.. it holds, and
  // its share of the pool against every group holding every logical block.
  std::vector<int32_t> group_blocks;
  int32_t held_blocks = 0;
  int32_t full_attention_blocks = 0;
};

// Waste if every live sequence had been given blocks of another size.
struct BlockSizeWhatIf {
  int32_t block_size = 0;
  int64_t waste_tokens = 0;
  size_t waste_bytes = 0;
};

// The host tier (engine/kv/host_tier.h): KV blocks of sequences out of the pool, in host
// memory. Counters are since the tier was created.
struct HostTierStats {
  size_t budget_bytes = 0;             // 0: the tier is off
  int32_t compression_level = 0;       // zstd level of its blocks; 0: kept as stored
  int32_t entries = 0;                 // sequences held
  int64_t blocks = 0;                  // their KV blocks
  size_t stored_bytes = 0;             // those blocks as the pool stores them
  size_t held_bytes = 0;               // what the tier holds for them (compressed, or stored_bytes)
  uint64_t swap_outs = 0;              // sequences stored into the tier
  uint64_t swap_ins = 0;               // sequences loaded back into the pool
  uint64_t hits = 0;                   // conversation turns that continued from the tier
  uint64_t drops = 0;                  // entries dropped, least recently used first, for the budget
  uint64_t refusals = 0;               // sequences the budget could not take (released or recomputed)
};

struct KvSnapshot {
  KvLayout layout;
  size_t bytes_per_token = 0;          // K + V, all layers, scales included
  size_t recent_row_bytes = 0;         // the live sequences' f32 copies of their newest rows
  size_t bytes_per_block = 0;
  size_t pool_bytes = 0;
  int32_t max_context = 0;             // the model's context length
  // Layer groups (engine/kv/kv_layer_groups.h): 1 for a model without sliding windows, whose
  // blocks hold every layer; else blocks of layers_per_block layers, and local groups keep
  // only the last sliding_window tokens.
  int32_t layer_groups = 1;
  int32_t local_layer_groups = 0;
  int32_t layers_per_block = 0;
  int32_t sliding_window = 0;

  int32_t blocks_total = 0;
  int32_t blocks_used = 0;             // ref_count >= 1 (Used + Shared)
  int32_t blocks_cached = 0;           // evictable
  int32_t blocks_free = 0;
  int32_t blocks_shared = 0;           // ref_count > 1
  std::vector<KvBlockInfo> blocks;     // [blocks_total]
  std::vector<KvSequenceInfo> sequences;

  // Internal fragmentation: slots reserved in held blocks but not yet filled.
  int64_t tokens_stored = 0;           // distinct token slots filled in held blocks
  int64_t slots_reserved = 0;          // blocks_used x block_size
  int64_t internal_waste_tokens = 0;
  size_t internal_waste_bytes = 0;
  double internal_waste_pct = 0;       // of reserved
  // Against contiguous allocation: each live sequence preallocated max_context slots.
  int64_t contiguous_reserved_tokens = 0;
  int64_t contiguous_waste_tokens = 0;
  size_t contiguous_waste_bytes = 0;
  double contiguous_waste_pct = 0;
  std::vector<BlockSizeWhatIf> what_if;   // one per kKvBlockSizes entry

  // Prefix cache and copy-on-write, counted since the cache was created.
  uint64_t prefix_hits = 0;            // blocks found by hash at admission
  uint64_t prefix_misses = 0;          // full prompt blocks looked up and not found
  uint64_t prefix_hit_tokens = 0;      // prefill tokens saved
  double prefix_hit_rate = 0;          // hits / (hits + misses)
  uint64_t evictions = 0;
  uint64_t cow_copies = 0;
  uint64_t forks = 0;                  // sequences forked from another (whole or a prefix)
  uint64_t imports = 0;                // sequences restored from saved bytes (a saved conversation)

  // KV retention (engine/kv/kv_retention.h): over the sequences a policy runs on, tokens seen vs
  // kept now; compactions and the blocks they returned to the pool since the cache was created.
  int64_t retention_tokens_seen = 0;
  int64_t retention_tokens_kept = 0;
  uint64_t retention_compactions = 0;
  uint64_t retention_blocks_freed = 0;

  // Filled by the engine, which owns the tier; empty in KvCache::snapshot().
  HostTierStats host_tier;
};

}  // namespace kvdesk
