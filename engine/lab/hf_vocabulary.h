// The tokenizer.* GGUF keys llama.cpp's converter writes for a Hugging Face byte-level BPE
// tokenizer (convert_hf_to_gguf.py's get_vocab_base and gguf-py's SpecialVocab), made from
// its tokenizer.json without Python, so that a real vocabulary (Llama 3, Qwen3, DeepSeek V3,
// gpt-oss) can be loaded by kvdesk exactly as a converted model would carry it:
//   tokens and types: the model's vocab as NORMAL; added tokens with "special": true, or that
//     look special to the converter (<|...|>, <｜...｜>, <pad>, <mask>, <unused...>), as
//     CONTROL, the other added tokens as USER_DEFINED; ids no token has as "[PAD<id>]", UNUSED;
//   merges: "left right" in byte-level text (pairs with spaces inside written with U+0120);
//   tokenizer.ggml.pre: the name of the kvdesk family whose split rules split a probe text
//     exactly as the tokenizer.json's pre_tokenizer does (the converter hashes tokenized
//     probe text the same way), preferring the family that agrees on ignore_merges and NFC;
//   BOS/EOS ids and add_bos/add_eos from tokenizer_config.json, config.json and the
//     post_processor, and the chat template from tokenizer_config.json, when those files lie
//     beside tokenizer.json.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvdesk {

class GgufWriter;

struct HfBpeVocabulary {
  std::vector<std::string> tokens;   // by id
  std::vector<int32_t> types;        // GGUF token types: 1 normal, 3 control, 4 user defined, 5 unused
  std::vector<std::string> merges;
  std::string pre;                   // tokenizer.ggml.pre
  std::optional<int32_t> bos;
  std::optional<int32_t> eos;
  std::optional<bool> add_bos;
  std::optional<bool> add_eos;
  std::optional<std::string> chat_template;
};

// Throws kvdesk::Error naming the file and what it cannot convert (not byte-level BPE, a
// pre-tokenizer no kvdesk family splits like).
HfBpeVocabulary read_hf_bpe_vocabulary(const std::string& tokenizer_json_path);

void write_hf_bpe_vocabulary(GgufWriter& writer, const HfBpeVocabulary& vocab);

// The tokenizer.ggml.pre name for pre-tokenizer regexes applied in sequence: the first
// family of the table whose rules split the probe text identically, among those the one
// agreeing with the most of ignore_merges and nfc. Throws kvdesk::Error when no family splits
// like them.
std::string pre_tokenizer_name_for(const std::vector<std::string>& patterns, bool ignore_merges, bool nfc);

}  // namespace kvdesk
