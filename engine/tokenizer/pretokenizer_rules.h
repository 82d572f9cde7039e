// PreTokenizerRules: what a tokenizer.ggml.pre name means for a byte-level BPE vocabulary.
// Every name llama.cpp accepts for a byte-level BPE chat model maps to the same split rules
// (the regular expressions of the family's tokenizer.json, applied in sequence) and to the
// same two loading flags llama.cpp sets for it.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace kvdesk {

struct PreTokenizerRules {
  // ICU regular expressions applied one after the other (see PreTokenizer).
  std::vector<std::string> patterns;
  // A word that is a vocabulary token as a whole is taken as that token, whatever the merges
  // would make of it (Hugging Face's "ignore_merges": Llama 3, Tekken).
  bool ignore_merges = false;
  // Whether BOS is added when the GGUF has no tokenizer.ggml.add_bos_token.
  bool add_bos_default = false;
};

// The rules for a tokenizer.ggml.pre value. Throws kvdesk::Error naming an unknown value.
const PreTokenizerRules& pre_tokenizer_rules(std::string_view name);

// Every accepted name, in table order.
std::vector<std::string_view> known_pre_tokenizer_names();

}  // namespace kvdesk
