// The mapping is built once as two tables: byte -> UTF-8 of its code point, and code point
// (< 0x144) -> byte.
#include "engine/tokenizer/byte_unicode.h"

#include <array>

#include "engine/tokenizer/utf8_decode.h"

namespace kvdesk {
namespace {

constexpr char32_t kShiftBase = 0x100;
constexpr char32_t kCodePointLimit = 0x144;   // the 68 shifted bytes end at U+0143

bool stands_for_itself(int byte) {
  return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE && byte <= 0xFF);
}

struct Tables {
  std::array<std::string, 256> byte_text;                    // [byte] UTF-8 of its code point
  std::array<int16_t, kCodePointLimit> code_point_byte{};    // [code point] byte, -1 if none

  Tables() {
    code_point_byte.fill(-1);
    char32_t next_shifted = kShiftBase;
    for (int byte = 0; byte < 256; ++byte) {
      const char32_t cp = stands_for_itself(byte) ? char32_t(byte) : next_shifted++;
      byte_text[byte] = encode_utf8(cp);
      code_point_byte[cp] = static_cast<int16_t>(byte);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) out += tables().byte_text[static_cast<uint8_t>(c)];
  return out;
}

std::optional<std::string> byte_level_to_bytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    const DecodedChar d = decode_utf8(text, at);
    if (!d.valid || d.code_point >= kCodePointLimit || tables().code_point_byte[d.code_point] < 0) return std::nullopt;
    out.push_back(static_cast<char>(tables().code_point_byte[d.code_point]));
    at += d.length;
  }
  return out;
}

}  // namespace kvdesk
