// Model information rows and text (see model_info.h).
#include "ui/model_info.h"

#include "ui/panel_data.h"

namespace kvdesk::ui {
namespace {

std::string sliding_window_text(const ModelView& m) {
  if (m.sliding_window <= 0) return "none (every layer sees the whole context)";
  return std::to_string(m.sliding_window) + " tokens on " + std::to_string(m.local_layers) + " of " +
         std::to_string(m.layers) + " layers";
}

// A dense FFN's size, or a mixture of experts: how many run per token, of how many, each how big,
// and the shared expert's size where there is one.
std::string feed_forward_text(const ModelView& m) {
  if (m.expert_count <= 0) return std::to_string(m.feed_forward_length);
  std::string text = std::to_string(m.expert_used_count) + " of " + std::to_string(m.expert_count) +
                     " experts of " + std::to_string(m.expert_feed_forward_length) + " per token";
  if (m.expert_shared_feed_forward_length > 0) {
    text += ", and a shared expert of " + std::to_string(m.expert_shared_feed_forward_length);
  }
  return text;
}

void append_section(std::string& out, const char* title, const std::vector<ModelInfoRow>& rows) {
  out += std::string(title) + "\n";
  for (const ModelInfoRow& r : rows) out += "  " + r.label + ": " + r.value + "\n";
}

}  // namespace

std::vector<ModelInfoRow> model_info_rows(const ModelView& m) {
  return {
      {"file", m.path},
      {"architecture", m.architecture},
      {"parameters", format_count(m.parameters)},
      {"weights", format_bytes(m.weight_bytes)},
      {"layers", std::to_string(m.layers)},
      {"embedding", std::to_string(m.embedding_length)},
      {"feed forward", feed_forward_text(m)},
      {"attention heads", std::to_string(m.heads) + " (" + std::to_string(m.kv_heads) + " KV heads of " +
                              std::to_string(m.head_dim) + ")"},
      {"context length", format_count(m.context_length)},
      {"vocabulary", format_count(m.vocab_size)},
      {"tokenizer", m.tokenizer_kind},
      {"chat template", m.chat_template.empty() ? "none" : m.chat_template},
      {"sliding window", sliding_window_text(m)},
      {"backend", m.backend},
  };
}

std::vector<ModelInfoRow> weight_type_rows(const ModelView& m) {
  std::vector<ModelInfoRow> rows;
  for (const WeightTypeView& w : m.weight_types) {
    rows.push_back({w.group, w.type + ": " + std::to_string(w.tensors) + (w.tensors == 1 ? " tensor, " : " tensors, ") +
                                 format_bytes(w.bytes)});
  }
  return rows;
}

std::vector<ModelInfoRow> kv_cost_rows(const std::vector<KvTypeCost>& kv_types) {
  std::vector<ModelInfoRow> rows;
  for (const KvTypeCost& t : kv_types) rows.push_back({t.name, format_count(int64_t(t.bytes_per_token)) + " B"});
  return rows;
}

std::string model_info_text(const ViewModel& vm) {
  if (vm.model.state != ModelState::Loaded) return "no model is loaded\n";
  std::string out;
  append_section(out, "Model", model_info_rows(vm.model));
  append_section(out, "Weight types", weight_type_rows(vm.model));
  append_section(out, "KV bytes per token (K + V, all layers)", kv_cost_rows(vm.kv_types));
  return out;
}

}  // namespace kvdesk::ui
