// Tokenizer: text <-> token ids for a model. SentencePiece vocabularies (GGUF
// tokenizer.ggml.model = "llama") go through the sentencepiece library, fed a ModelProto we
// build from the GGUF's tokens, scores and types (or a .model file given by the user).
// Text typed by a user is always encoded as text: "<s>" inside it never becomes BOS.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kvdesk {

class GgufFile;

enum class TokenKind : uint8_t { Normal, Unknown, Control, UserDefined, Unused, Byte };

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Throws kvdesk::Error when the GGUF has no usable vocabulary or an unsupported model type.
  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& file);
  // A SentencePiece .model file (e.g. the Llama-2 tokenizer.model). Throws kvdesk::Error.
  static std::unique_ptr<Tokenizer> from_spm_file(const std::string& path);

  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos) const = 0;

  // The bytes this token contributes to the text when it follows other tokens
  // ("▁there" -> " there", "<0x0A>" -> "\n", control tokens -> ""). May be part of a
  // UTF-8 character (byte tokens): use Utf8Stream to print.
  virtual std::string token_bytes(int32_t id) const = 0;
  // The vocabulary entry as stored ("▁there", "<0x0A>", "<s>"); "" for an id out of range.
  virtual const std::string& piece(int32_t id) const = 0;
  virtual TokenKind kind(int32_t id) const = 0;

  int32_t vocab_size() const { return vocab_size_; }
  int32_t bos_id() const { return bos_id_; }   // -1 when the vocabulary has none
  int32_t eos_id() const { return eos_id_; }
  bool add_bos_default() const { return add_bos_default_; }
  bool is_end_of_generation(int32_t id) const { return id == eos_id_; }

 protected:
  int32_t vocab_size_ = 0;
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  bool add_bos_default_ = true;
};

}  // namespace kvdesk
