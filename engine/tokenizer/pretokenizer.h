// PreTokenizer: splits text into the words that byte-level BPE then encodes one at a time,
// as tokenizer.ggml.pre names it (the names and their patterns: pretokenizer_rules.h).
// The regular expressions are applied in sequence, as Hugging Face's Split pre-tokenizers
// with "isolated" matches and llama.cpp apply them: every stage splits each piece from the
// stage before into its matches and the text between them, and an empty match (a lookahead)
// is a cut at its position. Nothing is ever dropped, so the pieces concatenate to the input.
//
// The patterns run on ICU's regex engine, which has \p{L}, \p{N}, (?i:...), lookahead and a
// \s that is Unicode White_Space (vertical tab and U+0085 included, as in Hugging Face's
// engine), so the real patterns run as written instead of a hand-made Unicode table; a chat
// prompt is short and the model's forward pass dwarfs the split, so ICU's speed is ample.
//
// Bytes that are not valid UTF-8 are each a piece of their own and never reach a regex:
// byte-level BPE encodes them as their byte token, so encode/decode round-trips any bytes.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kvdesk {

class PreTokenizer {
 public:
  // The patterns of a tokenizer.ggml.pre value ("llama-bpe", "qwen2", "gpt-2", "default",
  // ...). Throws kvdesk::Error naming an unknown value.
  static PreTokenizer for_name(std::string_view pre);
  // Regular expressions (ICU syntax) applied in sequence. Throws kvdesk::Error for a bad one.
  explicit PreTokenizer(const std::vector<std::string>& patterns);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // Non-empty views into text, in order, that concatenate to text.
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  struct Stages;
  std::unique_ptr<const Stages> stages_;
};

}  // namespace kvdesk
