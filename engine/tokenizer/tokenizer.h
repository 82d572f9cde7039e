// Tokenizer: text <-> token ids for a model. SentencePiece vocabularies (GGUF
// tokenizer.ggml.model = "llama") go through the sentencepiece library (spm_tokenizer.cpp);
// GPT-2-style byte-level BPE vocabularies ("gpt2": Llama 3, Qwen2, SmolLM) go through
// BpeTokenizer (bpe_tokenizer.cpp).
// Text typed by a user never contains a control token: "<s>" or "<|im_start|>" inside it is
// text. Only segments a chat template wrote may contain control tokens. The model's added
// tokens that are not special (user-defined: Qwen3's <think> and <tool_call>, GPT-NeoX's runs
// of spaces) are matched in any text before it is split into words, as llama.cpp and Hugging
// Face match them.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/token_trie.h"

namespace kvdesk {

class GgufFile;

enum class TokenKind : uint8_t { Normal, Unknown, Control, UserDefined, Unused, Byte };

// A piece of a prompt. parse_special: the text was written by a chat template, so the texts
// of control and user-defined tokens inside it ("<|im_start|>", "</s>") stand for those
// tokens. Message contents are segments without it.
struct TextSegment {
  std::string text;
  bool parse_special = false;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Picks the tokenizer by tokenizer.ggml.model. Throws kvdesk::Error when the GGUF has no
  // usable vocabulary or an unsupported model type.
  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& file);
  // A SentencePiece .model file (e.g. the Llama-2 tokenizer.model). Throws kvdesk::Error.
  static std::unique_ptr<Tokenizer> from_spm_file(const std::string& path);

  // Plain text: user-defined tokens are matched in it, control tokens never.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos) const = 0;

  // The segments joined into one text. Control and user-defined token texts lying wholly
  // inside a parse_special segment become their ids; the text between them is encoded with
  // encode() (which finds user-defined tokens anywhere), across segment borders, so where one
  // segment ends never changes the tokens by itself.
  std::vector<int32_t> encode_segments(const std::vector<TextSegment>& segments, bool add_bos) const;

  // The bytes this token contributes to the text when it follows other tokens
  // ("▁there" -> " there", "<0x0A>" / "Ċ" -> "\n", control tokens -> ""). May be part of a
  // UTF-8 character (byte tokens): use Utf8Stream to print.
  std::string token_bytes(int32_t id) const { return in_range(id) ? bytes_[size_t(id)] : std::string(); }
  // The vocabulary entry as stored ("▁there", "<0x0A>", "<s>", "Ġthere"); "" for an id out
  // of range.
  const std::string& piece(int32_t id) const;
  TokenKind kind(int32_t id) const { return in_range(id) ? kinds_[size_t(id)] : TokenKind::Unused; }

  int32_t vocab_size() const { return vocab_size_; }
  int32_t bos_id() const { return bos_id_; }   // -1 when the vocabulary has none
  int32_t eos_id() const { return eos_id_; }
  bool add_bos_default() const { return add_bos_default_; }
  // EOS, the GGUF's end-of-turn token (tokenizer.ggml.eot_token_id), and the end-of-turn
  // tokens of the chat families when the vocabulary has them as special tokens
  // (<|im_end|>, <|eot_id|>, <end_of_turn>, <|end|>, <|return|>, <|call|>), except in a harmony
  // vocabulary (gpt-oss: it has <|return|> and <|call|>), whose <|end|> ends a message within
  // the answer and, like its other structure tokens, prints.
  bool is_end_of_generation(int32_t id) const;

 protected:
  // Subclass constructors call this last, once piece() and kind() answer: indexes the special
  // tokens for encode_segments and the end-of-generation set. eot_id: -1 when none.
  void index_special_tokens(int32_t eot_id);

  bool in_range(int32_t id) const { return id >= 0 && id < vocab_size_; }

  int32_t vocab_size_ = 0;
  // Indexed by token id, vocab_size_ entries each, filled by the subclass constructor: the
  // piece as stored, its kind, and the bytes it prints.
  std::vector<std::string> pieces_;
  std::vector<TokenKind> kinds_;
  std::vector<std::string> bytes_;
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  bool add_bos_default_ = true;

 private:
  void use_harmony_structure();

  // Texts of the control and user-defined tokens.
  TokenTrie specials_;
  std::vector<int32_t> end_of_generation_;
};

}  // namespace kvdesk
