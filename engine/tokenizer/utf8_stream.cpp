// UTF-8 decoding by "maximal subparts" (the Unicode/WHATWG practice): each invalid byte run
// that could not start or continue a character becomes one U+FFFD; a valid but unfinished
// character at the end of the stream is held back until its bytes arrive.
#include "engine/tokenizer/utf8_stream.h"

#include <cstdint>

namespace kvdesk {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// What starts at one position of a byte string.
struct Sequence {
  enum Kind { Valid, Invalid, Truncated } kind;
  size_t length;   // bytes of the character, of the invalid subpart, or present so far
};

// The sequence a lead byte starts: its total length and the range its second byte must lie
// in (narrower than 80..BF for E0, ED, F0, F4: no overlongs, surrogates or > U+10FFFF).
struct LeadByte {
  size_t length;
  uint8_t second_min, second_max;
};

LeadByte lead_byte(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};   // a continuation byte or C0, C1, F5..FF: never starts a character
}

Sequence scan(std::string_view s, size_t at) {
  const LeadByte lead = lead_byte(static_cast<uint8_t>(s[at]));
  if (lead.length == 0) return {Sequence::Invalid, 1};
  for (size_t k = 1; k < lead.length; ++k) {
    if (at + k == s.size()) return {Sequence::Truncated, k};
    const auto b = static_cast<uint8_t>(s[at + k]);
    const uint8_t lo = k == 1 ? lead.second_min : 0x80;
    const uint8_t hi = k == 1 ? lead.second_max : 0xBF;
    if (b < lo || b > hi) return {Sequence::Invalid, k};
  }
  return {Sequence::Valid, lead.length};
}

// Appends the decodable text of s to out; returns how many bytes were consumed. A truncated
// character at the end is consumed (as U+FFFD) only when at_end.
size_t decode(std::string_view s, bool at_end, std::string& out) {
  size_t at = 0;
  while (at < s.size()) {
    const Sequence seq = scan(s, at);
    if (seq.kind == Sequence::Truncated && !at_end) break;
    if (seq.kind == Sequence::Valid) {
      out.append(s.substr(at, seq.length));
    } else {
      out.append(kReplacement);
    }
    at += seq.length;
  }
  return at;
}

}  // namespace

std::string Utf8Stream::push(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  pending_.erase(0, decode(pending_, false, out));
  return out;
}

std::string Utf8Stream::flush() {
  std::string out;
  decode(pending_, true, out);
  pending_.clear();
  return out;
}

bool is_valid_utf8(std::string_view s) {
  for (size_t at = 0; at < s.size();) {
    const Sequence seq = scan(s, at);
    if (seq.kind != Sequence::Valid) return false;
    at += seq.length;
  }
  return true;
}

}  // namespace kvdesk
