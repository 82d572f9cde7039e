// KvCache's side of KV retention: compaction of a sequence's rows per (layer, kv head) into
// the front of its own blocks, and what that means for sharing (engine/kv/kv_retention.h):
// - rows are written only through a table whose blocks this sequence alone holds: a block
//   another sequence (a fork, a prefix-cache hit) also holds is replaced by a fresh copy first,
//   so the others keep reading exactly what they read before;
// - a held block published in the prefix cache that gets rewritten is unpublished first (a
//   hit on its token hash would serve KV of other positions); blocks past the new end are
//   released untouched, so a published one stays a correct cache entry;
// - from then on the sequence links and publishes no more blocks.
#include <algorithm>
#include <cstring>

#include "engine/error.h"
#include "engine/kv/kv_cache.h"
#include "kernels/check.h"

namespace kvdesk {
namespace {


uint8_t* row_at(const PagedKvTensor& t, const std::vector<int32_t>& table, int32_t block_size, int32_t kv_head,
                int32_t slot) {
  return t.data + size_t(table[size_t(slot / block_size)]) * t.block_stride + size_t(kv_head) * t.head_stride +
         size_t(slot % block_size) * t.row_stride;
}

}  // namespace

void KvCache::set_retention(SeqId seq, const RetentionOptions& options, int32_t prompt_end) {
  Sequence& s = sequence(seq);
  if (!options.enabled()) {
    s.retention.reset();
    return;
  }
  if (groups_.windowed()) {
    throw Error("KV retention is not available for a model with sliding-window layers: their KV already keeps only the last " +
                std::to_string(groups_.window) + " tokens");
  }
  if (storage_.on_device()) {
    throw Error("KV retention is not available with the KV pool in device memory (the CUDA backend); "
                "use the cpu backend for retention");
  }
  if (!s.retention || s.retention->options().policy != options.policy) s.retention.emplace(options, num_layers_, num_kv_heads_);
  s.retention->start_turn(prompt_end);
}

RetentionState* KvCache::retention(SeqId seq) {
  Sequence& s = sequence(seq);
  return s.retention ? &*s.retention : nullptr;
}

// note: when the pool cannot copy the shared blocks compaction must write, the sequence stays
// over its budget for this step and the next mark_computed tries again.
void KvCache::apply_retention(SeqId seq) {
  Sequence& s = sequence(seq);
  const std::vector<std::vector<int32_t>> kept = s.retention->plan(s.num_slots(), int32_t(s.tokens.size()));
  if (!kept.empty()) compact(seq, kept);
}

bool KvCache::compact(SeqId seq, const std::vector<std::vector<int32_t>>& kept) {
  KVDESK_ASSERT(!groups_.windowed());
  Sequence& s = sequence(seq);
  const int32_t B = block_size();
  const int32_t old_slots = s.num_slots();
  KVDESK_ASSERT(!s.swapped && s.num_computed == int32_t(s.tokens.size()));
  KVDESK_ASSERT(int32_t(kept.size()) == num_layers_ * num_kv_heads_);
  const int32_t new_slots = int32_t(kept[0].size());
  // The first slot whose row changes in any (layer, head): every slot before it stays.
  int32_t first_changed = new_slots;
  for (const std::vector<int32_t>& k : kept) {
    KVDESK_ASSERT(int32_t(k.size()) == new_slots && std::is_sorted(k.begin(), k.end()));
    KVDESK_ASSERT(k.empty() || (k.front() >= 0 && k.back() < old_slots));
    for (int32_t i = 0; i < first_changed; ++i) {
      if (k[size_t(i)] != i) first_changed = i;
    }
  }
  const int32_t first_block = first_changed / B;
  const int32_t new_blocks = kv_blocks_for(new_slots, B);
  const std::optional<std::vector<int32_t>> table = writable_table(s, first_block, new_blocks);
  if (!table) return false;
  std::vector<int32_t>& old_table = s.tables[0];
  move_rows(old_table, *table, kept, first_block * B);
  for (int32_t i = first_block; i < new_blocks; ++i) {
    if ((*table)[size_t(i)] != old_table[size_t(i)]) pool_.release(old_table[size_t(i)]);
  }
  const int32_t old_blocks = int32_t(old_table.size());
  for (int32_t i = old_blocks - 1; i >= new_blocks; --i) pool_.release(old_table[size_t(i)]);
  old_table = *table;
  s.num_evicted += old_slots - new_slots;
  s.compacted = true;
  s.recent.truncate(first_changed);   // the f32 copies of moved rows no longer match their slots
  s.chain.resize(std::min(s.chain.size(), size_t(first_block)));
  if (s.retention) s.retention->compact(kept);
  ++retention_compactions_;
  retention_blocks_freed_ += uint64_t(old_blocks - new_blocks);
  return true;
}

// The first num_blocks entries of s's table, with every block in [first_block, num_blocks)
// made safe to write: shared ones replaced by fresh blocks, published ones unpublished.
std::optional<std::vector<int32_t>> KvCache::writable_table(const Sequence& s, int32_t first_block, int32_t num_blocks) {
  std::vector<int32_t> table(s.tables[0].begin(), s.tables[0].begin() + num_blocks);
  int32_t copies = 0;
  for (int32_t i = first_block; i < num_blocks; ++i) copies += pool_.ref_count(table[size_t(i)]) > 1 ? 1 : 0;
  if (copies > pool_.num_available()) return std::nullopt;
  for (int32_t i = first_block; i < num_blocks; ++i) {
    int32_t& block = table[size_t(i)];
    if (pool_.ref_count(block) > 1) {
      block = take_block();
      ++cow_copies_;
    } else if (pool_.is_published(block)) {
      pool_.unpublish(block);
    }
  }
  return table;
}

// Row kept[l * H + g][i] of from_table goes to slot i of to_table, for slots i >= first_slot.
// In place (same block) this is safe: kept is ascending, so kept[i] >= i, and a slot is only
// written after every row it held was read.
void KvCache::move_rows(const std::vector<int32_t>& from_table, const std::vector<int32_t>& to_table,
                        const std::vector<std::vector<int32_t>>& kept, int32_t first_slot) {
  const int32_t B = block_size();
  for (int32_t l = 0; l < num_layers_; ++l) {
    const PagedKvLayer layer = storage_.layer(l);
    const size_t k_bytes = kv_row_bytes(layer.k.type, layer.head_dim);
    const size_t v_bytes = kv_row_bytes(layer.v.type, layer.head_dim);
    for (int32_t g = 0; g < num_kv_heads_; ++g) {
      const std::vector<int32_t>& k = kept[size_t(l * num_kv_heads_ + g)];
      for (int32_t i = first_slot; i < int32_t(k.size()); ++i) {
        const uint8_t* k_src = row_at(layer.k, from_table, B, g, k[size_t(i)]);
        uint8_t* k_dst = row_at(layer.k, to_table, B, g, i);
        if (k_src != k_dst) std::memcpy(k_dst, k_src, k_bytes);
        const uint8_t* v_src = row_at(layer.v, from_table, B, g, k[size_t(i)]);
        uint8_t* v_dst = row_at(layer.v, to_table, B, g, i);
        if (v_src != v_dst) std::memcpy(v_dst, v_src, v_bytes);
      }
    }
  }
}

}  // namespace kvdesk
