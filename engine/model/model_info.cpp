// Model descriptions (see model_info.h).
#include "engine/model/model_info.h"

#include <algorithm>
#include <cctype>

#include "engine/gguf/gguf_reader.h"
#include "engine/model/model.h"
#include "kernels/ggml_types.h"

namespace kvdesk {
namespace {

// "blk.12." -> the rest of the name after it; any other name as it is.
std::string_view without_layer_prefix(std::string_view name) {
  constexpr std::string_view kLayer = "blk.";
  if (name.substr(0, kLayer.size()) != kLayer) return name;
  size_t i = kLayer.size();
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  if (i == kLayer.size() || i >= name.size() || name[i] != '.') return name;
  return name.substr(i + 1);
}

std::string_view without_suffix(std::string_view name, std::string_view suffix) {
  if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix) {
    name.remove_suffix(suffix.size());
  }
  return name;
}

}  // namespace

std::string tensor_group(std::string_view tensor_name) {
  std::string_view name = without_layer_prefix(tensor_name);
  name = without_suffix(name, ".weight");
  name = without_suffix(name, ".bias");
  return std::string(name);
}

std::vector<WeightTypeGroup> weight_type_groups(const GgufFile& file) {
  std::map<std::pair<std::string, std::string>, WeightTypeGroup> by_key;
  for (const GgufTensorInfo& t : file.tensors()) {
    WeightTypeGroup g{tensor_group(t.name), std::string(ggml_type_info(t.type).name), 0, 0};
    WeightTypeGroup& entry = by_key.try_emplace({g.group, g.type}, g).first->second;
    entry.tensors += 1;
    entry.bytes += t.num_bytes;
  }
  std::vector<WeightTypeGroup> out;
  out.reserve(by_key.size());
  for (auto& [key, group] : by_key) out.push_back(std::move(group));
  return out;
}

std::map<std::string, int> tensor_type_counts(const GgufFile& file) {
  std::map<std::string, int> counts;
  for (const GgufTensorInfo& t : file.tensors()) ++counts[std::string(ggml_type_info(t.type).name)];
  return counts;
}

std::string tokenizer_kind(const GgufFile& file, const std::string& tokenizer_path) {
  if (!tokenizer_path.empty()) return "SentencePiece (" + tokenizer_path + ")";
  const std::string model = file.find_string("tokenizer.ggml.model").value_or("");
  if (model == "llama") return "SentencePiece";
  if (model == "gpt2") return "byte-level BPE (pre " + file.find_string("tokenizer.ggml.pre").value_or("default") + ")";
  return model.empty() ? "unknown" : model;
}

int32_t local_layer_count(const ModelConfig& config) {
  int32_t local = 0;
  for (int32_t l = 0; l < config.block_count; ++l) local += config.is_local_layer(l) ? 1 : 0;
  return local;
}

ModelDescription describe_model(const Model& model, const std::string& tokenizer_path) {
  const ModelConfig& c = model.config();
  ModelDescription d;
  d.embedding_length = c.embedding_length;
  d.feed_forward_length = c.feed_forward_length;
  d.expert_count = c.expert_count;
  d.expert_used_count = c.expert_used_count;
  d.expert_feed_forward_length = c.expert_feed_forward_length;
  d.expert_shared_feed_forward_length = c.expert_shared_feed_forward_length;
  d.vocab_size = c.vocab_size;
  d.tokenizer_kind = tokenizer_kind(model.file(), tokenizer_path);
  d.local_layers = local_layer_count(c);
  d.sliding_window = d.local_layers > 0 ? c.sliding_window : 0;
  d.weight_types = weight_type_groups(model.file());
  return d;
}

}  // namespace kvdesk
