// The model information view's content, computed from the ViewModel without ImGui: the Model
// tab draws these rows as tables, and scripts (model_info) and tests read the same as text.
#pragma once
#include <string>
#include <vector>

#include "ui/view_model.h"

namespace kvdesk::ui {

struct ModelInfoRow {
  std::string label;
  std::string value;
};

// Architecture, size, context, vocabulary, tokenizer, chat template, sliding window.
std::vector<ModelInfoRow> model_info_rows(const ModelView& model);

// One row per weight group and type: "attn_q" -> "q8_0: 2 tensors, 4.0 KiB".
std::vector<ModelInfoRow> weight_type_rows(const ModelView& model);

// One row per KV storage type: "q8_0" -> "1,088 B".
std::vector<ModelInfoRow> kv_cost_rows(const std::vector<KvTypeCost>& kv_types);

// Every row above as "label: value" lines under section titles; "no model is loaded" without one.
std::string model_info_text(const ViewModel& vm);

}  // namespace kvdesk::ui
