// What every tokenizer shares: choosing one for a GGUF, control and user-defined tokens in
// template-written text, and the end-of-generation set.
#include "engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <array>

#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/error.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/tokenizer/spm_tokenizer.h"

namespace kvdesk {
namespace {

// End-of-turn tokens of the chat families: ChatML/Qwen, Llama 3, Gemma, Phi-3, and gpt-oss's
// harmony format (<|return|> ends the answer, <|call|> a tool call). (Llama 2, Mistral and
// Zephyr end a turn with </s>, which is EOS.)
constexpr std::array<std::string_view, 6> kEndOfTurnPieces = {"<|im_end|>", "<|eot_id|>", "<end_of_turn>",
                                                              "<|end|>",    "<|return|>", "<|call|>"};

// Harmony's message structure tokens, which a harmony vocabulary prints (as llama.cpp does):
// an answer is "<|channel|>analysis<|message|>...<|end|><|start|>assistant<|channel|>final
// <|message|>...", and the chat template finds its final message by them.
constexpr std::array<std::string_view, 5> kHarmonyStructurePieces = {"<|start|>", "<|channel|>", "<|message|>",
                                                                     "<|constrain|>", "<|end|>"};

bool is_special(TokenKind kind) { return kind == TokenKind::Control || kind == TokenKind::UserDefined; }

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& file) {
  const std::string model = file.get_string("tokenizer.ggml.model");
  if (model == "llama") return load_spm_tokenizer(file);
  if (model == "gpt2") return load_bpe_tokenizer(file);
  throw Error(file.path() + ": unsupported tokenizer model '" + model +
              "' (tokenizer.ggml.model; kvdesk reads SentencePiece \"llama\" and byte-level BPE \"gpt2\")");
}

std::unique_ptr<Tokenizer> Tokenizer::from_spm_file(const std::string& path) { return load_spm_tokenizer_file(path); }

void Tokenizer::index_special_tokens(int32_t eot_id) {
  specials_ = TokenTrie();
  end_of_generation_.clear();
  for (int32_t id = 0; id < vocab_size_; ++id) {
    if (!is_special(kind(id)) || piece(id).empty()) continue;
    specials_.insert(piece(id), id);
    if (std::find(kEndOfTurnPieces.begin(), kEndOfTurnPieces.end(), piece(id)) != kEndOfTurnPieces.end()) {
      end_of_generation_.push_back(id);
    }
  }
  for (const int32_t id : {eos_id_, eot_id}) {
    if (id >= 0) end_of_generation_.push_back(id);
  }
  if (specials_.find("<|return|>") >= 0 && specials_.find("<|call|>") >= 0) use_harmony_structure();
}

// gpt-oss: <|end|> closes each message (the reasoning's too) and must not end generation there;
// the structure tokens print so the answer's text shows its channels.
void Tokenizer::use_harmony_structure() {
  for (const std::string_view text : kHarmonyStructurePieces) {
    const int32_t id = specials_.find(text);
    if (id < 0) continue;
    bytes_[size_t(id)] = std::string(text);
    std::erase(end_of_generation_, id);
  }
}

const std::string& Tokenizer::piece(int32_t id) const {
  static const std::string kNone;
  return in_range(id) ? pieces_[size_t(id)] : kNone;
}

bool Tokenizer::is_end_of_generation(int32_t id) const {
  return std::find(end_of_generation_.begin(), end_of_generation_.end(), id) != end_of_generation_.end();
}

std::vector<int32_t> Tokenizer::encode_segments(const std::vector<TextSegment>& segments, bool add_bos) const {
  std::vector<int32_t> out;
  if (add_bos && bos_id_ >= 0) out.push_back(bos_id_);
  std::string pending;   // text since the last special token, not yet encoded
  const auto flush = [&] {
    if (pending.empty()) return;
    const std::vector<int32_t> ids = encode(pending, false);
    out.insert(out.end(), ids.begin(), ids.end());
    pending.clear();
  };
  for (const TextSegment& segment : segments) {
    if (!segment.parse_special) {
      pending += segment.text;
      continue;
    }
    specials_.split(
        segment.text, [&](std::string_view text) { pending += text; },
        [&](int32_t id) {
          flush();
          out.push_back(id);
        });
  }
  flush();
  return out;
}

}  // namespace kvdesk
