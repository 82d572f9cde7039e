// PreTokenizer: splits text into the words that byte-level BPE then encodes one at a time,
// as tokenizer.ggml.pre names it. Each name stands for the same regular expressions that
// llama.cpp and the Hugging Face tokenizer.json use, applied in sequence the way llama.cpp
// does: every stage splits each piece from the stage before into its matches and the text
// between them (nothing is ever dropped, so the pieces always concatenate to the input).
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
  // Known names: "gpt2", "llama-bpe" (Llama 3), "qwen2", "smollm", "default" (what
  // llama.cpp uses for a BPE vocabulary without tokenizer.ggml.pre). Throws kvdesk::Error
  // naming any other value.
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
