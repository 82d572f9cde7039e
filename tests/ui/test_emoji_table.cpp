// Tests of ui/emoji_table: emoji become Private Use points and come back exactly, and nothing
// else changes: invalid UTF-8, genuine Private Use characters, long text, random bytes, and a
// table too small for the emoji met (the rest stay as they are).
#include <catch2/catch.hpp>

#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "engine/tokenizer/utf8_decode.h"
#include "ui/emoji_clusters.h"
#include "ui/emoji_table.h"

using namespace kvdesk;
using namespace kvdesk::ui;

namespace {

const std::string kSmile = "\xF0\x9F\x98\x80";
const std::string kThumbsMedium = "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD";
const std::string kFamily = "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7";
const std::string kKorea = "\xF0\x9F\x87\xB0\xF0\x9F\x87\xB7";
const std::string kHangul = "\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4";

// Whether `text` is valid UTF-8 whose characters fit ImGui's 16 bits.
bool fits_16_bits(const std::string& text) {
  for (size_t i = 0; i < text.size();) {
    const DecodedChar c = decode_utf8(text, i);
    if (!c.valid || c.code_point > 0xFFFF) return false;
    i += c.length;
  }
  return true;
}

}  // namespace

TEST_CASE("each emoji cluster becomes one private use point and comes back", "[ui][emoji]") {
  EmojiTable table;
  const std::string real = kSmile + " " + kThumbsMedium + " " + kFamily + " " + kKorea + " " + kHangul;
  const std::string display = table.to_display(real);
  CHECK(display == "\xEE\x80\x80 \xEE\x80\x81 \xEE\x80\x82 \xEE\x80\x83 " + kHangul);
  CHECK(table.size() == 4);
  CHECK(table.to_real(display) == real);
  CHECK(table.to_display(kFamily) == "\xEE\x80\x82");   // the same cluster keeps its point
  CHECK(*table.cluster_at(0xE001) == kThumbsMedium);
  CHECK(table.cluster_at(0xE004) == nullptr);
}

TEST_CASE("genuine private use characters are kept apart from the emoji points", "[ui][emoji]") {
  EmojiTable table;
  const std::string e000 = "\xEE\x80\x80", e001 = "\xEE\x80\x81";
  const std::string real = kSmile + e000 + e001 + e000;
  const std::string display = table.to_display(real);
  CHECK(table.to_real(display) == real);
  // Three entries: the smile and the two genuine characters, each drawn as itself.
  CHECK(table.size() == 3);
  CHECK(*table.cluster_at(0xE000) == kSmile);
  // Private use characters outside the table's range pass through untouched.
  const std::string f000 = "\xEF\x80\x80";
  EmojiTable small(0xE000, 16);
  CHECK(small.to_display(f000) == f000);
  CHECK(small.size() == 0);
}

TEST_CASE("invalid UTF-8 and lone joiners survive the round trip byte for byte", "[ui][emoji]") {
  EmojiTable bytes;
  const std::string invalid = "a\xFF" "b\xC0";
  const std::string display = bytes.to_display(invalid);
  CHECK(display == "a\xEE\x80\x80" "b\xEE\x80\x81");   // each invalid byte a point of its own
  CHECK(bytes.to_real(display) == invalid);
  EmojiTable table;
  for (const std::string& real : std::vector<std::string>{std::string("\xF0\x9F\x98") + kSmile, std::string("\xE2\x80\x8D\xE2\x80\x8D"),
                                 "\xF0\x9F\x87\xB0 alone", "\xFF\xFE" + kSmile + "\x80", kSmile + "\xE2\x80\x8D",
                                 std::string("\xEE\x80") + kSmile, std::string("a\0b", 3)}) {
    const std::string display = table.to_display(real);
    CHECK(table.to_real(display) == real);
    CHECK(table.round_trips(real));
  }
}

TEST_CASE("random bytes always round-trip and display text fits 16-bit characters", "[ui][emoji]") {
  EmojiTable table;
  std::mt19937 random(7);
  const std::string pieces[] = {kSmile, kFamily, kKorea, "\xE2\x80\x8D", "\xEF\xB8\x8F", "\xEE\x80\x80", "\xEF\xA3\xBF", "a", " "};
  for (int round = 0; round < 2000; ++round) {
    std::string real;
    const int length = int(random() % 24);
    for (int i = 0; i < length; ++i) {
      if (random() % 2) {
        real += char(random() % 256);
      } else {
        real += pieces[random() % std::size(pieces)];
      }
    }
    const std::string display = table.to_display(real);
    REQUIRE(table.to_real(display) == real);
    CHECK(fits_16_bits(display));
  }
}

TEST_CASE("a long message converts in one pass and comes back", "[ui][emoji]") {
  EmojiTable table;
  std::string real;
  for (int i = 0; i < 20000; ++i) real += (i % 10 == 0 ? kThumbsMedium : std::string("word "));
  const std::string display = table.to_display(real);
  CHECK(table.size() == 1);
  CHECK(display.size() < real.size());
  CHECK(table.to_real(display) == real);
}

TEST_CASE("a full table leaves new emoji as they are and never misreads text", "[ui][emoji]") {
  EmojiTable table(0xE000, 2);
  const std::string grin = "\xF0\x9F\x98\x81", joy = "\xF0\x9F\x98\x82";
  CHECK(table.to_display(kSmile + grin) == "\xEE\x80\x80\xEE\x80\x81");
  CHECK(table.to_display(joy) == joy);                 // no room: left as it is
  CHECK(table.point_for(joy) == std::nullopt);
  CHECK(table.to_real(table.to_display(kSmile + joy)) == kSmile + joy);
  // A genuine character in the range, with no room for it, shows as U+FFFD and is reported.
  const std::string e000 = "\xEE\x80\x80";
  CHECK(table.to_display(e000) == "\xEF\xBF\xBD");
  CHECK_FALSE(table.round_trips(e000));
  CHECK(table.round_trips(kSmile + " text"));
}

TEST_CASE("more distinct emoji than the private use area holds", "[ui][emoji]") {
  EmojiTable table;
  std::string real;
  for (char32_t c = 0x1F000; c < 0x1F000 + char32_t(EmojiTable::kPrivateUseSize) + 100; ++c) real += encode_utf8(c);
  const std::string display = table.to_display(real);
  CHECK(table.size() == EmojiTable::kPrivateUseSize);
  CHECK(table.to_real(display) == real);
}
