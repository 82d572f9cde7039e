// Utf8Stream: token bytes in any chunking come out as whole characters, and broken UTF-8
// becomes U+FFFD instead of reaching the display.
#include <catch2/catch.hpp>

#include <random>
#include <string>

#include "engine/tokenizer/utf8_stream.h"

using kvdesk::is_valid_utf8;
using kvdesk::Utf8Stream;

namespace {

const std::string kFffd = "\xEF\xBF\xBD";

// Pushes `bytes` one byte at a time; returns every non-empty piece the stream gave back.
std::vector<std::string> push_bytewise(Utf8Stream& stream, const std::string& bytes) {
  std::vector<std::string> out;
  for (const char c : bytes) {
    std::string text = stream.push(std::string_view(&c, 1));
    if (!text.empty()) out.push_back(std::move(text));
  }
  return out;
}

std::string decode_all(const std::string& bytes) {
  Utf8Stream stream;
  std::string text = stream.push(bytes);
  return text + stream.flush();
}

}  // namespace

TEST_CASE("Korean and emoji fed byte by byte come out as whole characters", "[engine][tokenizer][utf8]") {
  // 안 녕 (3 bytes each), 😀 (4 bytes), 👩‍💻 (ZWJ sequence: 4 + 3 + 4 bytes), é (2 bytes).
  const std::vector<std::string> chars = {"\xEC\x95\x88", "\xEB\x85\x95", "\xF0\x9F\x98\x80",
                                          "\xF0\x9F\x91\xA9", "\xE2\x80\x8D", "\xF0\x9F\x92\xBB",
                                          "\xC3\xA9", "!"};
  std::string all;
  for (const std::string& c : chars) all += c;
  Utf8Stream stream;
  CHECK(push_bytewise(stream, all) == chars);
  CHECK(stream.flush().empty());
}

TEST_CASE("A character split across two pushes is printed once it completes", "[engine][tokenizer][utf8]") {
  Utf8Stream stream;
  CHECK(stream.push("a\xF0\x9F") == "a");
  CHECK(stream.push("\x98").empty());
  CHECK(stream.push("\x80z") == "\xF0\x9F\x98\x80z");
}

TEST_CASE("Invalid bytes become U+FFFD, one per maximal invalid subpart", "[engine][tokenizer][utf8]") {
  CHECK(decode_all("a\xFF" "b") == "a" + kFffd + "b");
  CHECK(decode_all("\x80") == kFffd);                                    // lone continuation
  CHECK(decode_all("\xC0\xAF") == kFffd + kFffd);                        // overlong '/'
  CHECK(decode_all("\xED\xA0\x80") == kFffd + kFffd + kFffd);            // surrogate U+D800
  CHECK(decode_all("\xF4\x90\x80\x80") == kFffd + kFffd + kFffd + kFffd);  // above U+10FFFF
  CHECK(decode_all("\xE2\x82" "b") == kFffd + "b");                      // cut short by ASCII
  CHECK(decode_all("\xF0\x9F\x98" "\xF0\x9F\x98\x80") == kFffd + "\xF0\x9F\x98\x80");
}

TEST_CASE("Flush turns a truncated character at the end into U+FFFD", "[engine][tokenizer][utf8]") {
  Utf8Stream stream;
  CHECK(stream.push("ok\xE2\x82") == "ok");
  CHECK(stream.flush() == kFffd);
  CHECK(stream.flush().empty());
  CHECK(stream.push("\xAC") == kFffd);  // the held bytes are gone: a lone continuation
}

TEST_CASE("Any chunking of random bytes gives valid UTF-8 equal to decoding it whole", "[engine][tokenizer][utf8]") {
  std::mt19937 rng(1234);
  for (int round = 0; round < 500; ++round) {
    std::string bytes(std::uniform_int_distribution<size_t>(0, 40)(rng), '\0');
    for (char& c : bytes) c = static_cast<char>(std::uniform_int_distribution<int>(0x7C, 0xFF)(rng));
    Utf8Stream stream;
    std::string text;
    for (size_t at = 0; at < bytes.size();) {
      const size_t n = std::uniform_int_distribution<size_t>(1, 5)(rng);
      const std::string piece = stream.push(std::string_view(bytes).substr(at, n));
      CHECK(is_valid_utf8(piece));
      text += piece;
      at += n;
    }
    text += stream.flush();
    CHECK(is_valid_utf8(text));
    CHECK(text == decode_all(bytes));
  }
}

TEST_CASE("is_valid_utf8 accepts well-formed text and rejects everything else", "[engine][tokenizer][utf8]") {
  CHECK(is_valid_utf8(""));
  CHECK(is_valid_utf8("plain ascii\n"));
  CHECK(is_valid_utf8("\xEC\x95\x88\xEB\x85\x95 \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF"));  // incl. U+10FFFF
  CHECK_FALSE(is_valid_utf8("\xFF"));
  CHECK_FALSE(is_valid_utf8("\xC0\x80"));          // overlong NUL
  CHECK_FALSE(is_valid_utf8("\xE0\x80\x80"));      // overlong
  CHECK_FALSE(is_valid_utf8("\xED\xB0\x80"));      // surrogate
  CHECK_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  CHECK_FALSE(is_valid_utf8("abc\xE2\x82"));       // truncated
}
