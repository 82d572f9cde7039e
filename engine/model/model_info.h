// What a loaded model is, described for people: weight types per tensor group, the tokenizer's
// kind, the layers a sliding window limits. Shared by kvdesk-cli info and the engine's
// ModelSummary (which the app's model view shows), so both say the same thing.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine_types.h"

namespace kvdesk {

class GgufFile;
class Model;
struct ModelConfig;

// The tensor's role: its GGUF name without the "blk.N." layer prefix and the ".weight" /
// ".bias" suffix ("blk.3.attn_q.weight" -> "attn_q", "token_embd.weight" -> "token_embd").
std::string tensor_group(std::string_view tensor_name);

// One entry per (group, type), sorted by group then type; tensors and bytes summed over layers.
std::vector<WeightTypeGroup> weight_type_groups(const GgufFile& file);

// How many tensors each ggml type stores, over the whole file.
std::map<std::string, int> tensor_type_counts(const GgufFile& file);

// "SentencePiece" (GGUF tokenizer.ggml.model "llama", or a .model file given instead),
// "byte-level BPE (pre NAME)" ("gpt2"), else the raw model name.
std::string tokenizer_kind(const GgufFile& file, const std::string& tokenizer_path);

// Layers whose attention a sliding window limits (0 without one).
int32_t local_layer_count(const ModelConfig& config);

ModelDescription describe_model(const Model& model, const std::string& tokenizer_path);

}  // namespace kvdesk
