// PreTokenizer and the GPT-2 byte mapping. Every expected split below is derived by hand from
// the pattern's alternatives, tried left to right at each position (leftmost-first, as in
// the Rust regex / Oniguruma engines Hugging Face uses); the derivation is in the comments.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/tokenizer/byte_unicode.h"
#include "engine/error.h"
#include "engine/tokenizer/pretokenizer.h"

using kvdesk::Error;
using kvdesk::PreTokenizer;
using Catch::Matchers::Contains;

namespace {

std::vector<std::string> split(const std::string& pre, const std::string& text) {
  const PreTokenizer p = PreTokenizer::for_name(pre);
  std::vector<std::string> out;
  for (const std::string_view piece : p.split(text)) out.emplace_back(piece);
  return out;
}

using Pieces = std::vector<std::string>;

}  // namespace

TEST_CASE("The GPT-2 byte mapping: printable bytes are themselves, the 68 others shift to U+0100..", "[engine][tokenizer][bpe]") {
  CHECK(kvdesk::bytes_to_byte_level("a") == "a");
  CHECK(kvdesk::bytes_to_byte_level(" ") == "\xC4\xA0");                     // 0x20 -> U+0120 "Ġ"
  CHECK(kvdesk::bytes_to_byte_level("\n") == "\xC4\x8A");                    // 0x0A -> U+010A "Ċ"
  CHECK(kvdesk::bytes_to_byte_level(std::string(1, '\0')) == "\xC4\x80");    // 0x00 -> U+0100 "Ā"
  CHECK(kvdesk::bytes_to_byte_level("\x7F") == "\xC4\xA1");                  // 33 shifted before: U+0121
  CHECK(kvdesk::bytes_to_byte_level("\xA0") == "\xC5\x82");                  // 0x7F..0xA0 -> U+0121..U+0142
  CHECK(kvdesk::bytes_to_byte_level("\xAD") == "\xC5\x83");                  // the 68th: U+0143
  CHECK(kvdesk::bytes_to_byte_level("\xE4") == "\xC3\xA4");                  // 0xE4 stands for itself: "ä"
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  CHECK(kvdesk::byte_level_to_bytes(kvdesk::bytes_to_byte_level(all)) == all);
  CHECK_FALSE(kvdesk::byte_level_to_bytes("\xE2\x82\xAC").has_value());       // "€" U+20AC is no byte
  CHECK_FALSE(kvdesk::byte_level_to_bytes("\xFF").has_value());               // not UTF-8
}

TEST_CASE("llama-bpe (Llama 3) splits numbers in threes and contractions case-insensitively", "[engine][tokenizer][bpe]") {
  // \p{N}{1,3} takes at most three digits at a time.
  CHECK(split("llama-bpe", "12345") == Pieces{"123", "45"});
  CHECK(split("llama-bpe", "1234567") == Pieces{"123", "456", "7"});
  // "don": [^\r\n\p{L}\p{N}]?\p{L}+ (the optional non-letter is absent); "'t": (?i:'t).
  CHECK(split("llama-bpe", "don't") == Pieces{"don", "'t"});
  // (?i:'m) matches "'M" too.
  CHECK(split("llama-bpe", "I'M") == Pieces{"I", "'M"});
  // " world": the optional non-letter is the space.
  CHECK(split("llama-bpe", "Hello world") == Pieces{"Hello", " world"});
  // At the first of three spaces nothing before \s+(?!\S) matches; \s+ grabs "   ", the
  // lookahead sees "b", it backs off to "  " (followed by a space). " b" is then a word.
  CHECK(split("llama-bpe", "a   b") == Pieces{"a", "  ", " b"});
  // Trailing spaces: \s+(?!\S) at the end of the text.
  CHECK(split("llama-bpe", "hi  ") == Pieces{"hi", "  "});
  // Newlines: \s*[\r\n]+ keeps "\n\n" together.
  CHECK(split("llama-bpe", "x\n\ny") == Pieces{"x", "\n\n", "y"});
  // Punctuation keeps the newlines after it: ?[^\s\p{L}\p{N}]+[\r\n]*.
  CHECK(split("llama-bpe", "ok!!\n\nyes") == Pieces{"ok", "!!\n\n", "yes"});
  // CJK characters are letters (\p{Lo}), so Latin and CJK form one word; digits split off.
  CHECK(split("llama-bpe", "Hello\xE4\xB8\x96\xE7\x95\x8C" "123") == Pieces{"Hello\xE4\xB8\x96\xE7\x95\x8C", "123"});
  // Emoji are symbols (\p{So}): ?[^\s\p{L}\p{N}]+ takes the run.
  CHECK(split("llama-bpe", "\xF0\x9F\x98\x80\xF0\x9F\x98\x80 ok") == Pieces{"\xF0\x9F\x98\x80\xF0\x9F\x98\x80", " ok"});
}

TEST_CASE("the regex whitespace class is Unicode White_Space, vertical tab and ideographic space included", "[engine][tokenizer][bpe]") {
  // "\v\v" before "b": \s+(?!\S) backs off to one "\v"; the second is the optional
  // non-letter before "b". (Were \v no space, ?[^\s\p{L}\p{N}]+ would take "\v\v" whole.)
  CHECK(split("llama-bpe", "a\v\vb") == Pieces{"a", "\v", "\vb"});
  // U+3000 (ideographic space) is a space too.
  CHECK(split("llama-bpe", "a\xE3\x80\x80\xE3\x80\x80" "b") == Pieces{"a", "\xE3\x80\x80", "\xE3\x80\x80" "b"});
}

TEST_CASE("qwen2 splits every digit and otherwise splits like Llama 3", "[engine][tokenizer][bpe]") {
  CHECK(split("qwen2", "12345") == Pieces{"1", "2", "3", "4", "5"});
  CHECK(split("qwen2", "I'M") == Pieces{"I", "'M"});
  CHECK(split("qwen2", "a   b") == Pieces{"a", "  ", " b"});
  CHECK(split("qwen2", "x\n\ny") == Pieces{"x", "\n\n", "y"});
}

TEST_CASE("gpt2 keeps digit runs, matches only lowercase contractions and splits newline runs", "[engine][tokenizer][bpe]") {
  CHECK(split("gpt2", "12345") == Pieces{"12345"});      // ?\p{N}+
  CHECK(split("gpt2", "don't") == Pieces{"don", "'t"});
  // 's|'t|... is case-sensitive: "'" is punctuation ( ?[^\s\p{L}\p{N}]+), "M" a letter run.
  CHECK(split("gpt2", "I'M") == Pieces{"I", "'", "M"});
  // "\n\n" before "w": \s+(?!\S) backs off to "\n"; the second "\n" is then followed by "w",
  // so only the final \s+ takes it.
  CHECK(split("gpt2", "hello\n\nworld") == Pieces{"hello", "\n", "\n", "world"});
  CHECK(split("gpt2", "a   b") == Pieces{"a", "  ", " b"});
}

TEST_CASE("smollm splits digits first, then runs GPT-2's pattern on each piece", "[engine][tokenizer][bpe]") {
  CHECK(split("smollm", "abc123 x") == Pieces{"abc", "1", "2", "3", " x"});
}

TEST_CASE("Invalid UTF-8 bytes are pieces of their own and nothing is lost", "[engine][tokenizer][bpe]") {
  CHECK(split("llama-bpe", "ab\xFF" "cd\xC3") == Pieces{"ab", "\xFF", "cd", "\xC3"});
  CHECK(split("gpt2", "\xED\xA0\x80") == Pieces{"\xED", "\xA0", "\x80"});   // a UTF-8 surrogate is invalid
  CHECK(split("qwen2", "").empty());
}

TEST_CASE("An unknown pre-tokenizer name is an error naming it", "[engine][tokenizer][bpe]") {
  CHECK_THROWS_WITH(PreTokenizer::for_name("deepseek-coder"), Contains("'deepseek-coder'") && Contains("llama-bpe"));
  CHECK_THROWS_AS(PreTokenizer({"(unclosed"}), Error);
}
