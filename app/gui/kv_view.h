// From the engine's statistics to the panels' plain data: the KvSnapshot as a ui::KvView
// (with each sequence's conversation), the model summary, and what every KV storage type
// costs per token and costs the model (KV quality, as far as it is known).
#pragma once
#include <cstdint>
#include <map>
#include <vector>

#include "engine/engine_types.h"
#include "ui/view_model.h"

namespace kvdesk::gui {

// seq_id -> conversation id and title, for the sequences the controller could attribute.
struct SequenceOwner {
  int64_t conversation_id = 0;
  std::string title;
};
using SequenceOwners = std::map<int32_t, SequenceOwner>;

ui::KvView make_kv_view(const KvSnapshot& snapshot, bool prefix_caching, const SequenceOwners& owners);
void fill_model_view(const ModelSummary& model, ui::ModelView& view);
ui::EngineView make_engine_view(const EngineStats& stats);

// What the window knows of the loaded model's KV quality, by KV type name ("int8").
using KvQualities = std::map<std::string, ui::KvQualityView>;

// What each KV storage type costs for the loaded model: bytes per token as the engine computed
// them at load, and quality as far as `quality` knows it (else Unknown).
std::vector<ui::KvTypeCost> kv_type_costs(const ModelSummary& model, const KvQualities& quality);
// A measured KvQuality as the panels show it.
ui::KvQualityView kv_quality_view(const KvQuality& quality);

// The engine names each sequence's holder by conversation key (= conversation id); titles
// come from the conversation list.
SequenceOwners sequence_owners(const std::vector<kvdesk::SequenceOwner>& holders, const std::map<int64_t, std::string>& titles);

}  // namespace kvdesk::gui
