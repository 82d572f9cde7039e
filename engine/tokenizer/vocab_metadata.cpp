// Token types and special token ids out of GGUF metadata, with errors naming the key.
#include "engine/tokenizer/vocab_metadata.h"

#include <cmath>
#include <optional>
#include <string>

#include "engine/error.h"
#include "engine/gguf/gguf_reader.h"

namespace kvdesk {
namespace {

constexpr uint64_t kNoTokenId = 0xFFFFFFFF;  // GGUF writers' "none" for a uint32 token id

}  // namespace

TokenKind token_kind_of_type(int type) {
  switch (type) {
    case 2: return TokenKind::Unknown;
    case 3: return TokenKind::Control;
    case 4: return TokenKind::UserDefined;
    case 5: return TokenKind::Unused;
    case 6: return TokenKind::Byte;
    default: return TokenKind::Normal;
  }
}

std::vector<int> read_token_types(const GgufFile& file, size_t count) {
  const std::vector<double>& types = file.get_number_array("tokenizer.ggml.token_type");
  const std::string where = file.path() + ": ";
  if (types.size() != count) {
    throw Error(where + "tokenizer.ggml.token_type has " + std::to_string(types.size()) +
                " entries but tokenizer.ggml.tokens has " + std::to_string(count));
  }
  std::vector<int> out(count);
  for (size_t i = 0; i < count; ++i) {
    if (types[i] != std::floor(types[i]) || types[i] < 1 || types[i] > kByteTokenType) {
      throw Error(where + "tokenizer.ggml.token_type[" + std::to_string(i) + "] is " + std::to_string(types[i]) +
                  ", not a token type (1 normal, 2 unknown, 3 control, 4 user defined, 5 unused, 6 byte)");
    }
    out[i] = static_cast<int>(types[i]);
  }
  return out;
}

int32_t read_token_id(const GgufFile& file, std::string_view key, size_t vocab_size, int32_t fallback) {
  const std::optional<uint64_t> id = file.find_uint(key);
  if (!id) return fallback;
  if (*id == kNoTokenId) return -1;
  if (*id >= vocab_size) {
    throw Error(file.path() + ": " + std::string(key) + " is " + std::to_string(*id) +
                ", outside the vocabulary of " + std::to_string(vocab_size) + " tokens");
  }
  return static_cast<int32_t>(*id);
}

}  // namespace kvdesk
