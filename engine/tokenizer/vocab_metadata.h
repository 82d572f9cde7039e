// GGUF vocabulary metadata every tokenizer reads the same way: token types
// (tokenizer.ggml.token_type) and special token ids (tokenizer.ggml.*_token_id).
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace kvdesk {

class GgufFile;

constexpr int kUnknownTokenType = 2;
constexpr int kControlTokenType = 3;
constexpr int kByteTokenType = 6;

// GGUF's token type number (1 normal .. 6 byte) as a TokenKind.
TokenKind token_kind_of_type(int type);

// tokenizer.ggml.token_type checked to hold `count` whole numbers in 1..6; throws
// kvdesk::Error naming the key (and the entry) otherwise.
std::vector<int> read_token_types(const GgufFile& file, size_t count);

// A special token id from the GGUF, `fallback` when the key is absent, -1 when it says
// "none" (0xFFFFFFFF). Throws kvdesk::Error for an id outside the vocabulary.
int32_t read_token_id(const GgufFile& file, std::string_view key, size_t vocab_size, int32_t fallback);

}  // namespace kvdesk
