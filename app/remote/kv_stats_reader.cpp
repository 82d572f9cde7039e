// /v1/kv -> EngineStats, field by field; see kv_stats_reader.h.
#include "app/remote/kv_stats_reader.h"

namespace kvdesk::remote {
namespace {

using nlohmann::json;

BlockState block_state(const std::string& name) {
  if (name == "cached") return BlockState::Cached;
  if (name == "used") return BlockState::Used;
  if (name == "shared") return BlockState::Shared;
  return BlockState::Free;
}

template <class T>
void read(const json& j, const char* key, T& value) {
  if (j.contains(key)) value = j.at(key).get<T>();
}

void read_blocks(const json& j, KvSnapshot& kv) {
  for (const json& b : j.value("blocks", json::array())) {
    kv.blocks.push_back({block_state(b.at("state").get<std::string>()), b.at("ref_count").get<int32_t>(),
                         b.at("filled_tokens").get<int32_t>()});
  }
}

void read_sequences(const json& j, EngineStats& stats) {
  for (const json& s : j.value("sequences", json::array())) {
    KvSequenceInfo info;
    read(s, "seq_id", info.seq_id);
    read(s, "num_tokens", info.num_tokens);
    read(s, "block_table", info.block_table);
    read(s, "shared_blocks", info.shared_blocks);
    read(s, "tokens_seen", info.tokens_seen);
    read(s, "retained", info.retained);
    read(s, "group_blocks", info.group_blocks);
    read(s, "held_blocks", info.held_blocks);
    read(s, "full_attention_blocks", info.full_attention_blocks);
    stats.kv.sequences.push_back(info);
    if (s.contains("conversation_key")) {
      stats.owners.push_back({info.seq_id, s.value("request", RequestId{0}), s.at("conversation_key").get<uint64_t>()});
    }
  }
}

void read_what_if(const json& j, KvSnapshot& kv) {
  for (const json& w : j.value("what_if", json::array())) {
    kv.what_if.push_back({w.at("block_size").get<int32_t>(), w.at("waste_tokens").get<int64_t>(),
                          w.at("waste_bytes").get<size_t>()});
  }
}

void read_layout(const json& j, KvSnapshot& kv) {
  if (auto k = kv_type_from_name(j.value("k_type", ""))) kv.layout.k_type = *k;
  if (auto v = kv_type_from_name(j.value("v_type", ""))) kv.layout.v_type = *v;
  read(j, "block_size", kv.layout.block_size);
  kv.layout.recent_rows = j.value("recent_rows", 0);   // a server that does not say keeps none
  kv.layout.num_blocks = j.value("blocks_total", 0);
}

void read_counters(const json& j, KvSnapshot& kv) {
  read(j, "bytes_per_token", kv.bytes_per_token);
  read(j, "recent_row_bytes", kv.recent_row_bytes);
  read(j, "bytes_per_block", kv.bytes_per_block);
  read(j, "pool_bytes", kv.pool_bytes);
  read(j, "max_context", kv.max_context);
  read(j, "layer_groups", kv.layer_groups);
  read(j, "local_layer_groups", kv.local_layer_groups);
  read(j, "layers_per_block", kv.layers_per_block);
  read(j, "sliding_window", kv.sliding_window);
  read(j, "blocks_total", kv.blocks_total);
  read(j, "blocks_used", kv.blocks_used);
  read(j, "blocks_cached", kv.blocks_cached);
  read(j, "blocks_free", kv.blocks_free);
  read(j, "blocks_shared", kv.blocks_shared);
  read(j, "tokens_stored", kv.tokens_stored);
  read(j, "slots_reserved", kv.slots_reserved);
  read(j, "internal_waste_tokens", kv.internal_waste_tokens);
  read(j, "internal_waste_bytes", kv.internal_waste_bytes);
  read(j, "internal_waste_pct", kv.internal_waste_pct);
  read(j, "contiguous_reserved_tokens", kv.contiguous_reserved_tokens);
  read(j, "contiguous_waste_tokens", kv.contiguous_waste_tokens);
  read(j, "contiguous_waste_bytes", kv.contiguous_waste_bytes);
  read(j, "contiguous_waste_pct", kv.contiguous_waste_pct);
  read(j, "prefix_hits", kv.prefix_hits);
  read(j, "prefix_misses", kv.prefix_misses);
  read(j, "prefix_hit_tokens", kv.prefix_hit_tokens);
  read(j, "prefix_hit_rate", kv.prefix_hit_rate);
  read(j, "evictions", kv.evictions);
  read(j, "cow_copies", kv.cow_copies);
  read(j, "retention_tokens_seen", kv.retention_tokens_seen);
  read(j, "retention_tokens_kept", kv.retention_tokens_kept);
  read(j, "retention_compactions", kv.retention_compactions);
  read(j, "retention_blocks_freed", kv.retention_blocks_freed);
}

void read_host_tier(const json& j, HostTierStats& t) {
  if (!j.contains("host_tier") || !j.at("host_tier").is_object()) return;
  const json& h = j.at("host_tier");
  read(h, "budget_bytes", t.budget_bytes);
  read(h, "compression_level", t.compression_level);
  read(h, "entries", t.entries);
  read(h, "blocks", t.blocks);
  read(h, "stored_bytes", t.stored_bytes);
  read(h, "held_bytes", t.held_bytes);
  read(h, "swap_outs", t.swap_outs);
  read(h, "swap_ins", t.swap_ins);
  read(h, "hits", t.hits);
  read(h, "drops", t.drops);
  read(h, "refusals", t.refusals);
}

}  // namespace

void read_kv_stats_json(const json& j, EngineStats& stats) {
  read(j, "running", stats.running);
  read(j, "waiting", stats.waiting);
  read(j, "swapped", stats.swapped);
  read(j, "parked", stats.parked);
  read(j, "preemptions", stats.preemptions);
  read(j, "prefix_caching", stats.prefix_caching);
  KvSnapshot& kv = stats.kv;
  kv = KvSnapshot{};
  stats.owners.clear();
  read_layout(j, kv);
  read_counters(j, kv);
  read_what_if(j, kv);
  read_blocks(j, kv);
  read_sequences(j, stats);
  read_host_tier(j, kv.host_tier);
}

}  // namespace kvdesk::remote
