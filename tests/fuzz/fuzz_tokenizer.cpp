// Fuzz target: the stories260K SentencePiece vocabulary (loaded from its GGUF as the app does)
// encodes arbitrary bytes, and arbitrary int32 ids (negative and past the vocabulary too) are
// printed through token_bytes, piece, kind and Utf8Stream. Checked: ids stay inside the
// vocabulary, printed text is always valid UTF-8, and text of plain words comes back as it went in.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/error.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8_stream.h"

namespace {

const kvdesk::Tokenizer& tokenizer() {
  static const std::unique_ptr<kvdesk::Tokenizer> instance = [] {
    const char* dir = std::getenv("KVDESK_MODELS_DIR");
    const std::string models = dir ? dir : KVDESK_MODELS_DIR;
    return kvdesk::Tokenizer::from_gguf(*kvdesk::GgufFile::open(models + "/stories260K.gguf"));
  }();
  return *instance;
}

// Text the tokenizer must give back unchanged: lowercase words separated by single spaces.
bool plain_words(std::string_view text) {
  if (text.empty() || text.front() == ' ' || text.back() == ' ') return false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' ? text[i - 1] == ' ' : (c < 'a' || c > 'z')) return false;
  }
  return true;
}

std::string print(const kvdesk::Tokenizer& tok, const std::vector<int32_t>& ids) {
  kvdesk::Utf8Stream stream;
  std::string out;
  for (const int32_t id : ids) {
    out += stream.push(tok.token_bytes(id));
    (void)tok.piece(id);
    (void)tok.kind(id);
  }
  out += stream.flush();
  if (!kvdesk::is_valid_utf8(out)) std::abort();
  return out;
}

void encode_and_print(const kvdesk::Tokenizer& tok, std::string_view text) {
  const std::vector<int32_t> ids = tok.encode(text, true);
  for (const int32_t id : ids) {
    if (id < 0 || id >= tok.vocab_size()) std::abort();
  }
  const std::string back = print(tok, ids);
  if (plain_words(text) && back != " " + std::string(text)) std::abort();
}

void print_raw_ids(const kvdesk::Tokenizer& tok, const uint8_t* data, size_t size) {
  std::vector<int32_t> ids(size / sizeof(int32_t));
  if (!ids.empty()) std::memcpy(ids.data(), data, ids.size() * sizeof(int32_t));
  print(tok, ids);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const kvdesk::Tokenizer& tok = tokenizer();
  try {
    encode_and_print(tok, std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const kvdesk::Error&) {
  }
  print_raw_ids(tok, data, size);
  return 0;
}
