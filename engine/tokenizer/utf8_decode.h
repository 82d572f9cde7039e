// One UTF-8 character at a time, strictly: overlong forms, surrogates, code points above
// U+10FFFF and truncated sequences are invalid, and an invalid sequence counts as one byte
// so callers can keep that byte as it is and go on.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace kvdesk {

struct DecodedChar {
  char32_t code_point = 0;   // meaningful only when valid
  size_t length = 1;         // bytes consumed: 1..4 when valid, 1 when invalid
  bool valid = false;
};

// The character starting at text[at] (at < text.size()).
DecodedChar decode_utf8(std::string_view text, size_t at);

// UTF-8 of a code point <= U+10FFFF.
std::string encode_utf8(char32_t code_point);

}  // namespace kvdesk
