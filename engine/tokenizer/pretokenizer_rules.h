// PreTokenizerRules: what a tokenizer.ggml.pre name means for a byte-level BPE vocabulary.
// Every name llama.cpp accepts for a byte-level BPE chat model maps to the same split rules
// (the regular expressions of the family's tokenizer.json, applied in sequence), to the
// same two loading flags llama.cpp sets for it, and to whether the family's tokenizer.json
// normalizes to NFC.
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
  // Text is put in Unicode NFC before it is split, as the family's tokenizer.json normalizer
  // does (Qwen2, GPT-NeoX/MPT); llama.cpp skips this step, Hugging Face does not.
  bool nfc = false;
};

// The rules for a tokenizer.ggml.pre value. Throws kvdesk::Error naming an unknown value.
const PreTokenizerRules& pre_tokenizer_rules(std::string_view name);

// Every accepted name, in table order.
std::vector<std::string_view> known_pre_tokenizer_names();

// One row of the table: the family's rules and the name llama.cpp's converter
// (convert_hf_to_gguf.py) writes for the family's reference model, which is the name it
// lists first.
struct PreTokenizerFamily {
  std::string_view name;
  const PreTokenizerRules* rules;
};
std::vector<PreTokenizerFamily> pre_tokenizer_families();

}  // namespace kvdesk
