// SpmTokenizer: the sentencepiece library does the encoding (from a .model file, or from a
// ModelProto built out of a GGUF vocabulary); the per-token text for printing is
// precomputed here the way llama.cpp prints SentencePiece tokens.
#include "engine/tokenizer/spm_tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include "engine/error.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/tokenizer/spm_model_proto.h"
#include "engine/tokenizer/vocab_metadata.h"
#include "kernels/check.h"

namespace kvdesk {
namespace {

using sentencepiece::SentencePieceProcessor;

constexpr std::string_view kEscapedSpace = "\xE2\x96\x81";  // U+2581, sentencepiece's space
constexpr int kBpeModel = 2;

// "<0x0A>" -> '\n'; nullopt when the piece is not of that form.
std::optional<char> parse_byte_piece(std::string_view piece) {
  if (piece.size() != 6 || !piece.starts_with("<0x") || piece.back() != '>') return std::nullopt;
  int value = 0;
  for (const char c : piece.substr(3, 2)) {
    const int digit = c >= '0' && c <= '9' ? c - '0'
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                           : -1;
    if (digit < 0) return std::nullopt;
    value = value * 16 + digit;
  }
  return static_cast<char>(value);
}

std::string unescape_spaces(std::string_view piece) {
  std::string out;
  size_t at = 0;
  for (size_t hit; (hit = piece.find(kEscapedSpace, at)) != std::string_view::npos;) {
    out.append(piece.substr(at, hit - at)).push_back(' ');
    at = hit + kEscapedSpace.size();
  }
  return out.append(piece.substr(at));
}

// What a token prints, as llama.cpp prints it: normal pieces with U+2581 as a space, byte
// pieces as their byte, user-defined and unknown pieces as stored, control and unused as "".
std::string printed_bytes(const SpmPiece& piece) {
  switch (token_kind_of_type(piece.type)) {
    case TokenKind::Normal: return unescape_spaces(piece.piece);
    case TokenKind::Byte: {
      const std::optional<char> byte = parse_byte_piece(piece.piece);
      KVDESK_ASSERT(byte);   // sentencepiece refuses to load a model with a malformed byte piece
      return std::string(1, *byte);
    }
    case TokenKind::Unknown:
    case TokenKind::UserDefined: return piece.piece;
    case TokenKind::Control:
    case TokenKind::Unused: return {};
  }
  return {};
}

class SpmTokenizer final : public Tokenizer {
 public:
  // `processor` is loaded with the model whose vocabulary is `pieces`.
  SpmTokenizer(std::unique_ptr<SentencePieceProcessor> processor, const std::vector<SpmPiece>& pieces,
               int32_t bos_id, int32_t eos_id, int32_t eot_id, bool add_bos_default)
      : processor_(std::move(processor)) {
    KVDESK_ASSERT(static_cast<size_t>(processor_->GetPieceSize()) == pieces.size());
    vocab_size_ = static_cast<int32_t>(pieces.size());
    bos_id_ = bos_id;
    eos_id_ = eos_id;
    add_bos_default_ = add_bos_default;
    for (const SpmPiece& p : pieces) {
      pieces_.push_back(p.piece);
      kinds_.push_back(token_kind_of_type(p.type));
      bytes_.push_back(printed_bytes(p));
    }
    index_special_tokens(eot_id);
  }

  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override {
    std::vector<int> ids;
    const sentencepiece::util::Status status = processor_->Encode(text, &ids);
    if (!status.ok()) throw Error("cannot tokenize the text: " + status.ToString());
    std::vector<int32_t> out;
    out.reserve(ids.size() + 1);
    if (add_bos && bos_id_ >= 0) out.push_back(bos_id_);
    out.insert(out.end(), ids.begin(), ids.end());
    return out;
  }

 private:
  std::unique_ptr<SentencePieceProcessor> processor_;
};

// Tokens, scores and types from the GGUF, checked to agree with each other.
std::vector<SpmPiece> read_gguf_pieces(const GgufFile& file) {
  const std::vector<std::string>& tokens = file.get_string_array("tokenizer.ggml.tokens");
  const std::vector<double>& scores = file.get_number_array("tokenizer.ggml.scores");
  const std::string where = file.path() + ": ";
  if (tokens.empty()) throw Error(where + "tokenizer.ggml.tokens is empty");
  if (tokens.size() > static_cast<size_t>(INT32_MAX)) throw Error(where + "tokenizer.ggml.tokens has too many entries");
  if (scores.size() != tokens.size()) {
    throw Error(where + "tokenizer.ggml.scores has " + std::to_string(scores.size()) +
                " entries but tokenizer.ggml.tokens has " + std::to_string(tokens.size()));
  }
  const std::vector<int> types = read_token_types(file, tokens.size());
  std::vector<SpmPiece> pieces(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string at = "[" + std::to_string(i) + "]";
    const auto score = static_cast<float>(scores[i]);
    if (!std::isfinite(score)) throw Error(where + "tokenizer.ggml.scores" + at + " is not a finite float");
    pieces[i] = {tokens[i], score, types[i]};
  }
  return pieces;
}

// The id the library gets as its one UNKNOWN piece: tokenizer.ggml.unknown_token_id when
// that token is typed unknown or control (Phi-3 types its <unk> control), else the first
// token typed unknown.
int32_t choose_unknown_id(const GgufFile& file, const std::vector<SpmPiece>& pieces) {
  const int32_t declared = read_token_id(file, "tokenizer.ggml.unknown_token_id", pieces.size(), -1);
  if (declared >= 0) {
    const int type = pieces[static_cast<size_t>(declared)].type;
    if (type == kUnknownTokenType || type == kControlTokenType) return declared;
  }
  const auto first = std::find_if(pieces.begin(), pieces.end(), [](const SpmPiece& p) { return p.type == kUnknownTokenType; });
  if (first == pieces.end()) {
    throw Error(file.path() + ": tokenizer.ggml.token_type marks no token as unknown (type 2) and "
                "tokenizer.ggml.unknown_token_id names no unknown or control token; a SentencePiece vocabulary needs one");
  }
  return static_cast<int32_t>(first - pieces.begin());
}

// The pieces as the library must see them. sentencepiece accepts exactly one UNKNOWN piece,
// but converters type padding entries unknown too (Phi-3's 53 "[PAD32011]".."[PAD32063]"):
// every unknown-typed token but `unknown_id` becomes CONTROL, which the library never
// matches in text, just as Hugging Face and llama.cpp never produce them from text.
std::vector<SpmPiece> library_pieces(std::vector<SpmPiece> pieces, int32_t unknown_id) {
  for (SpmPiece& piece : pieces) {
    if (piece.type == kUnknownTokenType) piece.type = kControlTokenType;
  }
  pieces[static_cast<size_t>(unknown_id)].type = kUnknownTokenType;
  return pieces;
}

}  // namespace

std::unique_ptr<Tokenizer> load_spm_tokenizer(const GgufFile& file) {
  const std::vector<SpmPiece> pieces = read_gguf_pieces(file);
  const bool byte_fallback =
      std::any_of(pieces.begin(), pieces.end(), [](const SpmPiece& p) { return p.type == kByteTokenType; });
  const bool add_space_prefix = file.find_bool("tokenizer.ggml.add_space_prefix").value_or(true);
  auto processor = std::make_unique<SentencePieceProcessor>();
  const sentencepiece::util::Status status = processor->LoadFromSerializedProto(serialize_spm_model_proto(
      library_pieces(pieces, choose_unknown_id(file, pieces)), kBpeModel, byte_fallback, add_space_prefix));
  if (!status.ok()) {
    throw Error(file.path() + ": the tokenizer.ggml vocabulary is not a usable SentencePiece model: " +
                status.ToString());
  }
  const int32_t bos = read_token_id(file, "tokenizer.ggml.bos_token_id", pieces.size(), processor->bos_id());
  const int32_t eos = read_token_id(file, "tokenizer.ggml.eos_token_id", pieces.size(), processor->eos_id());
  const int32_t eot = read_token_id(file, "tokenizer.ggml.eot_token_id", pieces.size(), -1);
  const bool add_bos = file.find_bool("tokenizer.ggml.add_bos_token").value_or(true);
  return std::make_unique<SpmTokenizer>(std::move(processor), pieces, bos, eos, eot, add_bos);
}

std::unique_ptr<SentencePieceProcessor> load_spm_processor(const std::string& path) {
  constexpr uintmax_t kMaxModelBytes = uintmax_t(1) << 30;   // real ones are a few MB
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (error) throw Error(path + ": cannot open the SentencePiece model: " + error.message());
  if (std::filesystem::is_directory(status)) throw Error(path + ": is a directory, not a SentencePiece model");
  if (!std::filesystem::is_regular_file(status)) throw Error(path + ": not a regular file, not a SentencePiece model");
  const uintmax_t size = std::filesystem::file_size(path, error);
  if (error) throw Error(path + ": cannot read the SentencePiece model: " + error.message());
  if (size > kMaxModelBytes) throw Error(path + ": larger than 1 GiB, not a SentencePiece model");
  auto processor = std::make_unique<SentencePieceProcessor>();
  const sentencepiece::util::Status loaded = processor->Load(path);
  if (!loaded.ok()) throw Error(path + ": cannot load the SentencePiece model: " + loaded.ToString());
  return processor;
}

std::unique_ptr<Tokenizer> load_spm_tokenizer_file(const std::string& path) {
  std::unique_ptr<SentencePieceProcessor> processor = load_spm_processor(path);
  const std::vector<SpmPiece> pieces = parse_spm_model_pieces(processor->serialized_model_proto());
  const int32_t bos = processor->bos_id();
  const int32_t eos = processor->eos_id();
  return std::make_unique<SpmTokenizer>(std::move(processor), pieces, bos, eos, -1, true);
}

}  // namespace kvdesk
