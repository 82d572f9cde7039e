// Utf8Stream: turns a stream of token byte strings into printable text that never splits a
// UTF-8 character. Bytes of an incomplete character are held until it completes; an invalid
// sequence becomes U+FFFD so a broken model output can never break the display.
#pragma once
#include <string>
#include <string_view>

namespace kvdesk {

class Utf8Stream {
 public:
  // Appends bytes; returns the text that is now complete.
  std::string push(std::string_view bytes);
  // End of stream: whatever is still held, with incomplete characters as U+FFFD.
  std::string flush();

 private:
  // The start of a character whose remaining bytes have not arrived yet: valid so far, at
  // most 3 bytes. Everything before it has been returned.
  std::string pending_;
};

// True when s is entirely valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF).
bool is_valid_utf8(std::string_view s);

}  // namespace kvdesk
