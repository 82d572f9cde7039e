// Tests of ui/emoji_clusters: the strict UTF-8 decoder and where emoji sequences begin and end
// (single emoji, skin tones, ZWJ families, flags, keycaps, subdivision flags), and that hostile
// input (invalid UTF-8, lone ZWJ, lone regional indicator, endless ZWJ chains) stays bounded.
#include <catch2/catch.hpp>

#include <string>

#include "ui/emoji_clusters.h"

using namespace kvdesk;
using namespace kvdesk::ui;

namespace {

// The clusters of a text, in order (bytes outside clusters are skipped).
std::vector<std::string> clusters(std::string_view text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size();) {
    const size_t n = emoji_cluster_length(text, i);
    if (n > 0) {
      out.emplace_back(text.substr(i, n));
      i += n;
    } else {
      i += decode_utf8(text, i).length;
    }
  }
  return out;
}

}  // namespace

TEST_CASE("the decoder accepts valid UTF-8 and takes one byte of anything else", "[ui][emoji]") {
  CHECK(decode_utf8("A", 0).code_point == 'A');
  const DecodedChar smile = decode_utf8("\xF0\x9F\x98\x80", 0);
  CHECK(smile.valid);
  CHECK(smile.code_point == 0x1F600);
  CHECK(smile.length == 4);
  for (const std::string bad : {"\xC0\xAF", "\xE0\x80\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xF0\x9F\x98", "\x80", "\xFF"}) {
    const DecodedChar c = decode_utf8(bad, 0);
    CHECK_FALSE(c.valid);
    CHECK(c.length == 1);
  }
}

TEST_CASE("single emoji, skin tones, families, flags and keycaps are one cluster each", "[ui][emoji]") {
  const std::string smile = "\xF0\x9F\x98\x80";                               // U+1F600
  const std::string thumbs_medium = "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD";       // U+1F44D U+1F3FD
  const std::string family = "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7";
  const std::string korea = "\xF0\x9F\x87\xB0\xF0\x9F\x87\xB7";               // U+1F1F0 U+1F1F7
  const std::string heart = "\xE2\x9D\xA4\xEF\xB8\x8F";                        // U+2764 U+FE0F
  const std::string keycap = "1\xEF\xB8\x8F\xE2\x83\xA3";                      // 1 U+FE0F U+20E3
  const std::string star = "\xE2\xAD\x90";                                     // U+2B50
  const std::string england = "\xF0\x9F\x8F\xB4\xF3\xA0\x81\xA7\xF3\xA0\x81\xA2\xF3\xA0\x81\xA5\xF3\xA0\x81\xAE"
                              "\xF3\xA0\x81\xA7\xF3\xA0\x81\xBF";
  const std::string text = "a " + smile + " " + thumbs_medium + " " + family + " " + korea + " " + heart + " " + keycap +
                           " " + star + " " + england + " \xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4";
  CHECK(clusters(text) == std::vector<std::string>{smile, thumbs_medium, family, korea, heart, keycap, star, england});
}

TEST_CASE("plain text, Korean and symbols without a variation selector are no clusters", "[ui][emoji]") {
  CHECK(clusters("hello 123 #*").empty());
  CHECK(clusters("\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4 \xE6\x97\xA5\xE6\x9C\xAC \xE4\xB8\xAD\xE6\x96\x87").empty());
  CHECK(clusters("\xE2\x9D\xA4 \xE2\x86\x92").empty());   // U+2764 and U+2192 alone are text
}

TEST_CASE("lone joiners and regional indicators, and a joiner at the end, stay bounded", "[ui][emoji]") {
  const std::string zwj = "\xE2\x80\x8D";
  const std::string k = "\xF0\x9F\x87\xB0";
  const std::string smile = "\xF0\x9F\x98\x80";
  CHECK(clusters(zwj + zwj).empty());
  CHECK(clusters(k) == std::vector<std::string>{k});
  CHECK(clusters(k + k + k) == std::vector<std::string>{k + k, k});
  CHECK(clusters(smile + zwj) == std::vector<std::string>{smile});   // the trailing ZWJ is left out
  CHECK(clusters(smile + zwj + "a") == std::vector<std::string>{smile});
  std::string chain = smile;
  for (int i = 0; i < 1000; ++i) chain += zwj + smile;
  const std::vector<std::string> parts = clusters(chain);
  REQUIRE(parts.size() > 1);
  for (const std::string& p : parts) {
    size_t code_points = 0;
    for (size_t i = 0; i < p.size(); i += decode_utf8(p, i).length) ++code_points;
    CHECK(code_points <= kMaxClusterCodePoints);
  }
  CHECK(chain.find(parts.front()) == 0);
}

TEST_CASE("code points above U+FFFF that are not emoji are clusters of their own", "[ui][emoji]") {
  const std::string ext_b = "\xF0\xA0\x80\x80";   // U+20000, a CJK ideograph
  CHECK(clusters("x" + ext_b + "y") == std::vector<std::string>{ext_b});
}

TEST_CASE("invalid UTF-8 never starts a cluster or runs past the end", "[ui][emoji]") {
  const std::string text = "\xF0\x9F\x98";   // a cut-off emoji
  for (size_t i = 0; i < text.size(); ++i) CHECK(emoji_cluster_length(text, i) == 0);
  CHECK(emoji_cluster_length("", 0) == 0);
  CHECK(emoji_cluster_length("a", 5) == 0);
}
