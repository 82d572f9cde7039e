// The KvSnapshot field by field, named as in engine/kv_snapshot.h; blocks and sequences as arrays.
#include "app/server/kv_json.h"

namespace kvdesk::server {
namespace {

using nlohmann::json;

const char* block_state_name(BlockState s) {
  switch (s) {
    case BlockState::Free: return "free";
    case BlockState::Cached: return "cached";
    case BlockState::Used: return "used";
    case BlockState::Shared: return "shared";
  }
  return "?";
}

json blocks_json(const KvSnapshot& kv) {
  json blocks = json::array();
  for (const KvBlockInfo& b : kv.blocks) {
    blocks.push_back({{"state", block_state_name(b.state)}, {"ref_count", b.ref_count}, {"filled_tokens", b.filled_tokens}});
  }
  return blocks;
}

// Each sequence with who holds it: a live request, or a conversation's parked turn.
json sequences_json(const EngineStats& stats) {
  json sequences = json::array();
  for (const KvSequenceInfo& s : stats.kv.sequences) {
    json j = {{"seq_id", s.seq_id},
              {"num_tokens", s.num_tokens},
              {"block_table", s.block_table},
              {"shared_blocks", s.shared_blocks},
              {"tokens_seen", s.tokens_seen},
              {"retained", s.retained},
              {"group_blocks", s.group_blocks},
              {"held_blocks", s.held_blocks},
              {"full_attention_blocks", s.full_attention_blocks}};
    for (const SequenceOwner& o : stats.owners) {
      if (o.seq_id != s.seq_id) continue;
      j["request"] = o.request;
      j["conversation_key"] = o.conversation_key;
    }
    sequences.push_back(std::move(j));
  }
  return sequences;
}

json host_tier_json(const HostTierStats& t) {
  return {{"budget_bytes", t.budget_bytes}, {"compression_level", t.compression_level}, {"entries", t.entries},
          {"blocks", t.blocks},           {"stored_bytes", t.stored_bytes},           {"held_bytes", t.held_bytes},
          {"swap_outs", t.swap_outs},     {"swap_ins", t.swap_ins},                   {"hits", t.hits},
          {"drops", t.drops},             {"refusals", t.refusals}};
}

json what_if_json(const KvSnapshot& kv) {
  json what_if = json::array();
  for (const BlockSizeWhatIf& w : kv.what_if) {
    what_if.push_back({{"block_size", w.block_size}, {"waste_tokens", w.waste_tokens}, {"waste_bytes", w.waste_bytes}});
  }
  return what_if;
}

}  // namespace

json kv_snapshot_json(const KvSnapshot& kv) {
  return {
      {"k_type", kv_type_name(kv.layout.k_type)},
      {"v_type", kv_type_name(kv.layout.v_type)},
      {"block_size", kv.layout.block_size},
      {"recent_rows", kv.layout.recent_rows},
      {"recent_row_bytes", kv.recent_row_bytes},
      {"bytes_per_token", kv.bytes_per_token},
      {"bytes_per_block", kv.bytes_per_block},
      {"pool_bytes", kv.pool_bytes},
      {"max_context", kv.max_context},
      {"layer_groups", kv.layer_groups},
      {"local_layer_groups", kv.local_layer_groups},
      {"layers_per_block", kv.layers_per_block},
      {"sliding_window", kv.sliding_window},
      {"blocks_total", kv.blocks_total},
      {"blocks_used", kv.blocks_used},
      {"blocks_cached", kv.blocks_cached},
      {"blocks_free", kv.blocks_free},
      {"blocks_shared", kv.blocks_shared},
      {"tokens_stored", kv.tokens_stored},
      {"slots_reserved", kv.slots_reserved},
      {"internal_waste_tokens", kv.internal_waste_tokens},
      {"internal_waste_bytes", kv.internal_waste_bytes},
      {"internal_waste_pct", kv.internal_waste_pct},
      {"contiguous_reserved_tokens", kv.contiguous_reserved_tokens},
      {"contiguous_waste_tokens", kv.contiguous_waste_tokens},
      {"contiguous_waste_bytes", kv.contiguous_waste_bytes},
      {"contiguous_waste_pct", kv.contiguous_waste_pct},
      {"what_if", what_if_json(kv)},
      {"prefix_hits", kv.prefix_hits},
      {"prefix_misses", kv.prefix_misses},
      {"prefix_hit_tokens", kv.prefix_hit_tokens},
      {"prefix_hit_rate", kv.prefix_hit_rate},
      {"evictions", kv.evictions},
      {"cow_copies", kv.cow_copies},
      {"forks", kv.forks},
      {"retention_tokens_seen", kv.retention_tokens_seen},
      {"retention_tokens_kept", kv.retention_tokens_kept},
      {"retention_compactions", kv.retention_compactions},
      {"retention_blocks_freed", kv.retention_blocks_freed},
      {"host_tier", host_tier_json(kv.host_tier)},
      {"blocks", blocks_json(kv)},
  };
}

json kv_stats_json(const EngineStats& stats) {
  json j = kv_snapshot_json(stats.kv);
  j.update({
      {"model_loaded", stats.model_loaded},
      {"running", stats.running},
      {"waiting", stats.waiting},
      {"swapped", stats.swapped},
      {"parked", stats.parked},
      {"preemptions", stats.preemptions},
      {"prefix_caching", stats.prefix_caching},
      {"sequences", sequences_json(stats)},
  });
  return j;
}

}  // namespace kvdesk::server
