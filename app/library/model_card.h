// ModelCard: what the library says about one model, read from its GGUF header and tensor
// infos only (GgufFile::open_metadata: the weights stay on disk), and what fits on this
// machine: for each KV type, the longest conversation and how many 4K-token conversations the
// memory left after the weights holds, from the same KV arithmetic the memory panel uses
// (kv_layer_groups.h: blocks per sequence, sliding windows included, times bytes per block).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app/library/model_finder.h"
#include "engine/model/model_config.h"
#include "kernels/kv_type.h"

namespace kvdesk::library {

// Tokens of the conversations counted in KvFit::conversations.
constexpr int64_t kFitConversationTokens = 4096;
// The block size and prefill chunk the fits assume: the engine's defaults.
constexpr int32_t kFitBlockSize = 16;
constexpr int32_t kFitChunkTokens = 256;

// What the fits need of a model's KV layout, small enough to keep between runs: its context,
// how its layers share blocks (kv_layer_groups.h) and one block's bytes per KV type.
struct KvShape {
  int64_t context_length = 0;
  int32_t num_groups = 1;
  int32_t num_global_groups = 1;
  int32_t window = 0;
  std::vector<uint64_t> block_bytes;   // [all_kv_types()] one pool block of kFitBlockSize tokens

  bool operator==(const KvShape&) const = default;
};

KvShape kv_shape(const ModelConfig& config);

// One KV type's room in the memory left after the weights.
struct KvFit {
  KvType type = KvType::F16;
  int64_t max_context = 0;     // tokens of one conversation, at most the model's context length
  int64_t conversations = 0;   // conversations of kFitConversationTokens at once
};

struct ModelCard {
  FoundModel found;
  uint64_t size_bytes = 0;        // every shard's file
  std::string arch;               // general.architecture
  uint64_t params = 0;            // values in every tensor of every shard
  uint64_t weight_bytes = 0;      // bytes of every tensor of every shard
  std::string weight_type;        // llama.cpp's file type name ("Q4_K_M"), else the type holding the most bytes
  int64_t context_length = 0;
  std::string chat_template;      // the markup the model's own template writes, "none" without one
  std::optional<KvShape> kv;      // when kvdesk can run the architecture
  // Why the model cannot be opened or run (not a GGUF, a missing shard, an architecture kvdesk
  // does not run); empty when it can. broken: the file itself is not a valid GGUF.
  std::string error;
  bool broken = false;
};

// Reads found.files' headers. Never throws for a bad file: the card carries the reason.
ModelCard read_model_card(const FoundModel& found);

// What fits in memory_bytes (the memory available for weights and KV), one per KV type in
// all_kv_types() order; empty when the card has no KV shape.
std::vector<KvFit> kv_fits(const ModelCard& card, uint64_t memory_bytes);

// The card as JSON and back (ModelLibrary keeps its cards between runs this way); card_from_json
// throws nlohmann::json's exceptions or kvdesk::Error for a malformed one.
nlohmann::json card_to_json(const ModelCard& card);
ModelCard card_from_json(const nlohmann::json& j);

// llama.cpp's name for general.file_type ("Q4_K_M"), or "" for an id it does not name.
std::string file_type_name(uint64_t file_type);

// The markup a chat template's source writes, from the control tokens in it: "ChatML",
// "Llama 3", "Gemma", "harmony", "Mistral", ... or "own" when none is recognised.
std::string template_markup_name(const std::string& source);

}  // namespace kvdesk::library
