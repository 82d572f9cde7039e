// KvSnapshot / ModelSummary -> ui views, KV type costs, and the sequence-owner guess.
#include "app/gui/kv_view.h"

#include <algorithm>
#include <set>

namespace kvdesk::gui {
namespace {

ui::BlockKind block_kind(BlockState state) {
  switch (state) {
    case BlockState::Free: return ui::BlockKind::Free;
    case BlockState::Cached: return ui::BlockKind::Cached;
    case BlockState::Used: return ui::BlockKind::Used;
    case BlockState::Shared: return ui::BlockKind::Shared;
  }
  return ui::BlockKind::Free;
}

void copy_counters(const KvSnapshot& s, ui::KvView& v) {
  v.k_type = kv_type_name(s.layout.k_type);
  v.v_type = kv_type_name(s.layout.v_type);
  v.block_size = s.layout.block_size;
  v.recent_rows = kv_recent_rows(s.layout);
  v.recent_row_bytes = s.recent_row_bytes;
  v.bytes_per_token = s.bytes_per_token;
  v.bytes_per_block = s.bytes_per_block;
  v.pool_bytes = s.pool_bytes;
  v.max_context = s.max_context;
  v.layer_groups = s.layer_groups;
  v.local_layer_groups = s.local_layer_groups;
  v.layers_per_block = s.layers_per_block;
  v.sliding_window = s.sliding_window;
  v.blocks_total = s.blocks_total;
  v.blocks_used = s.blocks_used;
  v.blocks_cached = s.blocks_cached;
  v.blocks_free = s.blocks_free;
  v.blocks_shared = s.blocks_shared;
  v.tokens_stored = s.tokens_stored;
  v.slots_reserved = s.slots_reserved;
  v.internal_waste_tokens = s.internal_waste_tokens;
  v.internal_waste_bytes = s.internal_waste_bytes;
  v.internal_waste_pct = s.internal_waste_pct;
  v.contiguous_reserved_tokens = s.contiguous_reserved_tokens;
  v.contiguous_waste_tokens = s.contiguous_waste_tokens;
  v.contiguous_waste_bytes = s.contiguous_waste_bytes;
  v.contiguous_waste_pct = s.contiguous_waste_pct;
  v.prefix_hits = s.prefix_hits;
  v.prefix_misses = s.prefix_misses;
  v.prefix_hit_tokens = s.prefix_hit_tokens;
  v.prefix_hit_rate = s.prefix_hit_rate;
  v.evictions = s.evictions;
  v.cow_copies = s.cow_copies;
  v.forks = s.forks;
  v.retention_tokens_seen = s.retention_tokens_seen;
  v.retention_tokens_kept = s.retention_tokens_kept;
  v.retention_compactions = s.retention_compactions;
  v.retention_blocks_freed = s.retention_blocks_freed;
  const HostTierStats& t = s.host_tier;
  v.host_tier = ui::HostTierView{t.budget_bytes, t.compression_level, t.entries, t.blocks, t.stored_bytes,
                                 t.held_bytes, t.hits, t.swap_ins, t.drops};
}

}  // namespace

ui::KvView make_kv_view(const KvSnapshot& snapshot, bool prefix_caching, const SequenceOwners& owners) {
  ui::KvView view;
  view.valid = true;
  view.prefix_caching = prefix_caching;
  copy_counters(snapshot, view);
  view.blocks.reserve(snapshot.blocks.size());
  for (const KvBlockInfo& b : snapshot.blocks) view.blocks.push_back({block_kind(b.state), b.ref_count, b.filled_tokens});
  for (const KvSequenceInfo& s : snapshot.sequences) {
    ui::KvSequenceView seq;
    seq.seq_id = s.seq_id;
    seq.num_tokens = s.num_tokens;
    seq.block_table = s.block_table;
    view.window_held_blocks += s.held_blocks;
    view.window_full_blocks += s.full_attention_blocks;
    const auto it = owners.find(s.seq_id);
    if (it != owners.end()) {
      seq.conversation_id = it->second.conversation_id;
      seq.label = it->second.title;
    } else {
      seq.label = "seq " + std::to_string(s.seq_id);
    }
    view.sequences.push_back(std::move(seq));
  }
  for (const BlockSizeWhatIf& w : snapshot.what_if) view.what_if.push_back({w.block_size, w.waste_tokens, w.waste_bytes});
  return view;
}

void fill_model_view(const ModelSummary& m, ui::ModelView& view) {
  view.path = m.path;
  // The file, as model pickers show it; a remote server's model by the id it serves it under.
  view.name = m.backend == "remote" ? m.name : m.path.substr(m.path.find_last_of('/') + 1);
  view.architecture = m.architecture;
  view.backend = m.backend;
  view.context_length = m.context_length;
  view.layers = m.layers;
  view.heads = m.heads;
  view.kv_heads = m.kv_heads;
  view.head_dim = m.head_dim;
  view.threads = m.threads;
  view.parameters = m.parameters;
  view.weight_bytes = m.weight_bytes;
  view.chat_template = m.chat_template;
  view.chat_template_warning = m.chat_template_warning;
  view.chat_template_source = m.chat_template_source;
  view.bos_text = m.bos_text;
  view.eos_text = m.eos_text;
  const ModelDescription& d = m.description;
  view.embedding_length = d.embedding_length;
  view.feed_forward_length = d.feed_forward_length;
  view.expert_count = d.expert_count;
  view.expert_used_count = d.expert_used_count;
  view.expert_feed_forward_length = d.expert_feed_forward_length;
  view.expert_shared_feed_forward_length = d.expert_shared_feed_forward_length;
  view.vocab_size = d.vocab_size;
  view.tokenizer_kind = d.tokenizer_kind;
  view.sliding_window = d.sliding_window;
  view.local_layers = d.local_layers;
  view.weight_types.clear();
  for (const WeightTypeGroup& g : d.weight_types) view.weight_types.push_back({g.group, g.type, g.tensors, g.bytes});
}

ui::EngineView make_engine_view(const EngineStats& stats) {
  return {stats.running, stats.waiting, stats.swapped, stats.parked, stats.tokens_per_s, stats.preemptions};
}

std::vector<ui::KvTypeCost> kv_type_costs(const ModelSummary& model, const KvQualities& quality) {
  std::vector<ui::KvTypeCost> costs;
  for (const KvTypeCost& t : model.kv_types) {
    const auto known = quality.find(kv_type_name(t.type));
    costs.push_back({kv_type_name(t.type), t.bytes_per_token, known == quality.end() ? ui::KvQualityView{} : known->second});
  }
  return costs;
}

ui::KvQualityView kv_quality_view(const KvQuality& quality) {
  return {ui::KvQualityState::Measured, quality.kl, quality.top1, ""};
}

SequenceOwners sequence_owners(const std::vector<kvdesk::SequenceOwner>& holders, const std::map<int64_t, std::string>& titles) {
  SequenceOwners owners;
  for (const kvdesk::SequenceOwner& h : holders) {
    if (h.conversation_key == 0) continue;
    const int64_t id = int64_t(h.conversation_key);
    const auto title = titles.find(id);
    owners[h.seq_id] = {id, title == titles.end() ? std::string() : title->second};
  }
  return owners;
}

}  // namespace kvdesk::gui
