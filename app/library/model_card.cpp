// Reading a card: every shard's header for sizes, the first one's metadata for the rest.
#include "app/library/model_card.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <map>
#include <memory>
#include <utility>

#include "engine/error.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/kv/kv_layer_groups.h"
#include "kernels/ggml_types.h"

namespace kvdesk::library {
namespace {

// The ggml type holding the most bytes, by name ("q4_K" -> "Q4_K").
std::string dominant_type(const std::map<GgmlType, uint64_t>& bytes_by_type) {
  if (bytes_by_type.empty()) return {};
  const auto most = std::max_element(bytes_by_type.begin(), bytes_by_type.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; });
  std::string name(ggml_type_info(most->first).name);
  for (char& c : name) c = char(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

// Fills the header-derived fields from the first shard; throws Error for a file that is no
// GGUF or whose first shard is missing.
void read_first_shard(const GgufFile& file, ModelCard& card) {
  if (const std::optional<uint64_t> split = file.find_uint("split.no"); split && *split != 0) {
    throw Error("the first of its " + std::to_string(card.found.expected_shards) + " shards is missing");
  }
  card.arch = file.find_string("general.architecture").value_or("");
  if (const std::optional<uint64_t> type = file.find_uint("general.file_type")) card.weight_type = file_type_name(*type);
  if (!card.arch.empty()) {
    card.context_length = int64_t(file.find_uint(card.arch + ".context_length").value_or(0));
  }
  const std::optional<std::string> chat_template = file.find_string("tokenizer.chat_template");
  card.chat_template = chat_template ? template_markup_name(*chat_template) : "none";
}

// Parameters and weight bytes summed over shards.
void add_shard(const GgufFile& file, ModelCard& card, std::map<GgmlType, uint64_t>& bytes_by_type) {
  for (const GgufTensorInfo& t : file.tensors()) {
    card.params += uint64_t(t.num_elements);
    card.weight_bytes += t.num_bytes;
    bytes_by_type[t.type] += t.num_bytes;
  }
}

// The problem without the "<path>: " the GGUF reader puts first (the card already names the file).
std::string without_path(const std::string& message, const std::string& path) {
  const std::string prefix = path + ": ";
  return message.starts_with(prefix) ? message.substr(prefix.size()) : message;
}

uint64_t files_size(const std::vector<std::string>& files) {
  uint64_t total = 0;
  for (const std::string& f : files) {
    std::error_code ec;
    const uintmax_t size = std::filesystem::file_size(f, ec);
    if (!ec) total += uint64_t(size);
  }
  return total;
}

}  // namespace

ModelCard read_model_card(const FoundModel& found) {
  ModelCard card;
  card.found = found;
  card.size_bytes = files_size(found.files);
  std::map<GgmlType, uint64_t> bytes_by_type;
  std::string reading;   // the file being read, for the error's message
  try {
    if (found.files.empty()) throw Error("no file");
    for (size_t i = 0; i < found.files.size(); ++i) {
      reading = found.files[i];
      const std::unique_ptr<GgufFile> file = GgufFile::open_metadata(found.files[i]);
      if (i == 0) read_first_shard(*file, card);
      add_shard(*file, card, bytes_by_type);
      if (i == 0) {
        try {
          card.kv = kv_shape(read_model_config(*file));
        } catch (const Error& e) {
          card.error = without_path(e.what(), reading);   // a valid GGUF that kvdesk cannot run
        }
      }
    }
  } catch (const Error& e) {
    card.error = without_path(e.what(), reading);
    card.broken = true;
    card.kv.reset();
    return card;
  }
  if (card.weight_type.empty()) card.weight_type = dominant_type(bytes_by_type);
  if (int32_t(found.files.size()) < found.expected_shards) {
    card.error = std::to_string(found.expected_shards - int32_t(found.files.size())) + " of its " +
                 std::to_string(found.expected_shards) + " shards are missing";
    card.kv.reset();
  }
  return card;
}

KvShape kv_shape(const ModelConfig& config) {
  const KvLayerGroups groups = kv_layer_groups(config);
  KvShape shape{config.context_length, groups.num_groups, groups.num_global_groups, groups.window, {}};
  for (KvType type : all_kv_types()) shape.block_bytes.push_back(kv_bytes_per_block(config, type, type, kFitBlockSize));
  return shape;
}

std::vector<KvFit> kv_fits(const ModelCard& card, uint64_t memory_bytes) {
  std::vector<KvFit> fits;
  if (!card.kv || card.kv->block_bytes.size() != all_kv_types().size()) return fits;
  KvLayerGroups groups;
  groups.num_groups = card.kv->num_groups;
  groups.num_global_groups = card.kv->num_global_groups;
  groups.window = card.kv->window;
  const uint64_t left = memory_bytes > card.weight_bytes ? memory_bytes - card.weight_bytes : 0;
  const int64_t context = std::max<int64_t>(card.kv->context_length, 1);
  for (size_t t = 0; t < all_kv_types().size(); ++t) {
    const KvType type = all_kv_types()[t];
    const uint64_t per_block = card.kv->block_bytes[t];
    auto bytes_for = [&](int64_t tokens) {
      return uint64_t(groups.blocks_for_sequence(tokens, kFitBlockSize, kFitChunkTokens)) * per_block;
    };
    // The longest context whose blocks fit: bytes grow with tokens, so bisect.
    int64_t lo = 0, hi = context;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      if (bytes_for(mid) <= left) lo = mid; else hi = mid - 1;
    }
    const uint64_t per_conversation = bytes_for(kFitConversationTokens);
    fits.push_back(KvFit{type, lo, per_conversation ? int64_t(left / per_conversation) : 0});
  }
  return fits;
}

namespace {

// A kept shape is data from the database: within what a real model has, or refused, so the
// fits' arithmetic cannot overflow.
void check_kept_shape(const KvShape& s) {
  const bool sane = s.context_length >= 0 && s.context_length <= (int64_t(1) << 31) && s.num_groups >= 1 &&
                    s.num_groups <= 4096 && s.num_global_groups >= 0 && s.num_global_groups <= s.num_groups &&
                    s.window >= 0 && s.block_bytes.size() == all_kv_types().size() &&
                    std::all_of(s.block_bytes.begin(), s.block_bytes.end(), [](uint64_t b) { return b > 0 && b < (uint64_t(1) << 40); });
  if (!sane) throw Error("a kept model card has an impossible KV shape");
}

}  // namespace

nlohmann::json card_to_json(const ModelCard& card) {
  nlohmann::json kv = nullptr;
  if (card.kv) {
    kv = {{"context_length", card.kv->context_length}, {"num_groups", card.kv->num_groups},
          {"num_global_groups", card.kv->num_global_groups}, {"window", card.kv->window},
          {"block_bytes", card.kv->block_bytes}};
  }
  return {{"name", card.found.name}, {"source", model_source_key(card.found.source)}, {"files", card.found.files},
          {"expected_shards", card.found.expected_shards}, {"projectors", card.found.projectors},
          {"size_bytes", card.size_bytes}, {"arch", card.arch}, {"params", card.params},
          {"weight_bytes", card.weight_bytes}, {"weight_type", card.weight_type},
          {"context_length", card.context_length}, {"chat_template", card.chat_template}, {"kv", kv},
          {"error", card.error}, {"broken", card.broken}};
}

ModelCard card_from_json(const nlohmann::json& j) {
  ModelCard card;
  card.found.name = j.at("name").get<std::string>();
  const std::optional<ModelSource> source = model_source_from_key(j.at("source").get<std::string>());
  if (!source) throw Error("a kept model card names an unknown source");
  card.found.source = *source;
  card.found.files = j.at("files").get<std::vector<std::string>>();
  card.found.expected_shards = j.at("expected_shards").get<int32_t>();
  card.found.projectors = j.at("projectors").get<std::vector<std::string>>();
  card.size_bytes = j.at("size_bytes").get<uint64_t>();
  card.arch = j.at("arch").get<std::string>();
  card.params = j.at("params").get<uint64_t>();
  card.weight_bytes = j.at("weight_bytes").get<uint64_t>();
  card.weight_type = j.at("weight_type").get<std::string>();
  card.context_length = j.at("context_length").get<int64_t>();
  card.chat_template = j.at("chat_template").get<std::string>();
  if (const nlohmann::json& kv = j.at("kv"); !kv.is_null()) {
    card.kv = KvShape{kv.at("context_length").get<int64_t>(), kv.at("num_groups").get<int32_t>(),
                      kv.at("num_global_groups").get<int32_t>(), kv.at("window").get<int32_t>(),
                      kv.at("block_bytes").get<std::vector<uint64_t>>()};
    check_kept_shape(*card.kv);
  }
  card.error = j.at("error").get<std::string>();
  card.broken = j.at("broken").get<bool>();
  return card;
}

std::string file_type_name(uint64_t file_type) {
  // llama.cpp's llama_ftype; retired ids (4-6, 33-35) have no name.
  static const std::map<uint64_t, const char*> names = {
      {0, "F32"}, {1, "F16"}, {2, "Q4_0"}, {3, "Q4_1"}, {7, "Q8_0"}, {8, "Q5_0"}, {9, "Q5_1"},
      {10, "Q2_K"}, {11, "Q3_K_S"}, {12, "Q3_K_M"}, {13, "Q3_K_L"}, {14, "Q4_K_S"}, {15, "Q4_K_M"},
      {16, "Q5_K_S"}, {17, "Q5_K_M"}, {18, "Q6_K"}, {19, "IQ2_XXS"}, {20, "IQ2_XS"}, {21, "Q2_K_S"},
      {22, "IQ3_XS"}, {23, "IQ3_XXS"}, {24, "IQ1_S"}, {25, "IQ4_NL"}, {26, "IQ3_S"}, {27, "IQ3_M"},
      {28, "IQ2_S"}, {29, "IQ2_M"}, {30, "IQ4_XS"}, {31, "IQ1_M"}, {32, "BF16"}, {36, "TQ1_0"},
      {37, "TQ2_0"}, {38, "MXFP4_MOE"},
  };
  const auto it = names.find(file_type);
  return it == names.end() ? std::string() : it->second;
}

std::string template_markup_name(const std::string& source) {
  // Most specific first: harmony also writes <|start|>, Phi-3 and GLM also write <|user|>.
  static const std::array<std::pair<const char*, const char*>, 14> markers = {{
      {"<|channel|>", "harmony"},
      {"<|start_header_id|>", "Llama 3"},
      {"<|im_start|>", "ChatML"},
      {"<start_of_turn>", "Gemma"},
      {"<\xef\xbd\x9c" "User\xef\xbd\x9c>", "DeepSeek"},   // <｜User｜>
      {"<|start_of_role|>", "Granite"},
      {"<|START_OF_TURN_TOKEN|>", "Command R"},
      {"[SYSTEM_PROMPT]", "Mistral"},
      {"[INST]", "Mistral / Llama 2"},
      {"<|im_user|>", "Kimi K2"},
      {"[gMASK]", "GLM"},
      {"<|end|>", "Phi-3"},
      {"<|user|>", "Zephyr"},
      {"<|begin_of_text|>", "Llama 3"},
  }};
  for (const auto& [marker, name] : markers) {
    if (source.find(marker) != std::string::npos) return name;
  }
  return "own";
}

}  // namespace kvdesk::library
