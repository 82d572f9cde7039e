// PreTokenizer and the GPT-2 byte mapping. Every expected split below is derived by hand from
// the pattern's alternatives, tried left to right at each position (leftmost-first, as in
// the Rust regex / Oniguruma engines Hugging Face uses); the derivation is in the comments.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/tokenizer/byte_unicode.h"
#include "engine/error.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/pretokenizer_rules.h"

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

TEST_CASE("gpt-2 keeps digit runs, matches only lowercase contractions and splits newline runs", "[engine][tokenizer][bpe]") {
  CHECK(split("gpt-2", "12345") == Pieces{"12345"});      // ?\p{N}+
  CHECK(split("gpt-2", "don't") == Pieces{"don", "'t"});
  // 's|'t|... is case-sensitive: "'" is punctuation ( ?[^\s\p{L}\p{N}]+), "M" a letter run.
  CHECK(split("gpt-2", "I'M") == Pieces{"I", "'", "M"});
  // "\n\n" before "w": \s+(?!\S) backs off to "\n"; the second "\n" is then followed by "w",
  // so only the final \s+ takes it.
  CHECK(split("gpt-2", "hello\n\nworld") == Pieces{"hello", "\n", "\n", "world"});
  CHECK(split("gpt-2", "a   b") == Pieces{"a", "  ", " b"});
}

TEST_CASE("smollm splits digits first, then runs GPT-2's pattern on each piece", "[engine][tokenizer][bpe]") {
  CHECK(split("smollm", "abc123 x") == Pieces{"abc", "1", "2", "3", " x"});
}

TEST_CASE("Every Llama 3 name splits like llama-bpe, every Qwen2 name like qwen2", "[engine][tokenizer][bpe]") {
  const std::string text = "I'M 1234567 don't\n\n  x";
  for (const char* pre : {"llama3", "llama-v3", "falcon3", "pixtral", "dbrx", "smaug-bpe", "glm4", "chatglm-bpe"}) {
    INFO(pre);
    CHECK(split(pre, text) == split("llama-bpe", text));
  }
  for (const char* pre : {"deepseek-r1-qwen", "stablelm2", "hunyuan", "megrez"}) {
    INFO(pre);
    CHECK(split(pre, text) == split("qwen2", text));
  }
  // Only the digits tell the two apart: threes against singles.
  CHECK(split("llama3", "1234567") == Pieces{"123", "456", "7"});
  CHECK(split("deepseek-r1-qwen", "abc123") == Pieces{"abc", "1", "2", "3"});
}

TEST_CASE("deepseek-v3 isolates digit triples and CJK runs before splitting words", "[engine][tokenizer][bpe]") {
  // Stage 1 \p{N}{1,3}: "123" "45"; stage 2 takes the Han and Katakana runs whole.
  CHECK(split("deepseek-v3", "中文12345テスト") == Pieces{"中文", "123", "45", "テスト"});
  // A Han run before Latin letters is its own piece (gpt-4o would keep "你好world" whole).
  CHECK(split("deepseek-v3", "你好world") == Pieces{"你好", "world"});
  // Hangul is not in the CJK stage: a letter run, with the space before it.
  CHECK(split("deepseek-v3", "a 한국어") == Pieces{"a", " 한국어"});
  // An ASCII punctuation mark leads an ASCII word (".Net", "'t"); other punctuation runs
  // stand alone ( ?[\p{P}\p{S}]+, with one leading space), and a space leads a word.
  CHECK(split("deepseek-v3", "Hello, world!") == Pieces{"Hello", ",", " world", "!"});
  CHECK(split("deepseek-v3", "don't x.Net (x)") == Pieces{"don", "'t", " x", ".Net", " (", "x", ")"});
  CHECK(split("hunyuan-dense", "中文12345") == split("deepseek-v3", "中文12345"));
}

TEST_CASE("deepseek-llm and deepseek-coder split by their staged character classes", "[engine][tokenizer][bpe]") {
  // Letters (with one leading space), then " " is left between the words and the Han run,
  // which stage 5 isolates; stage 6 keeps the digit run whole.
  CHECK(split("deepseek-llm", "Hello world 你好123") == Pieces{"Hello", " world", " ", "你好", "123"});
  // Cyrillic is in the cased-letter class; fullwidth punctuation in the punctuation class.
  CHECK(split("deepseek-llm", "мир！！ok") == Pieces{"мир", "！！", "ok"});
  // Each newline alone (stage 1); trailing spaces are one piece (\s+$).
  CHECK(split("deepseek-llm", "a\n\nb  ") == Pieces{"a", "\n", "\n", "b", "  "});
  // deepseek-coder: any letters, then digits one by one.
  CHECK(split("deepseek-coder", "abc123 x") == Pieces{"abc", "1", "2", "3", " x"});
}

TEST_CASE("gpt-4o splits words at case changes and keeps contractions on the word", "[engine][tokenizer][bpe]") {
  // Capitals then lowercase form a word: "Hello" "World"; a run of capitals followed by
  // lowercase stays whole (the greedy capitals give back none: "HTMLP" + "arser").
  CHECK(split("gpt-4o", "HelloWorld HTMLParser") == Pieces{"Hello", "World", " HTMLParser"});
  // Contractions stay on the word, in either case.
  CHECK(split("gpt-4o", "don't I'M") == Pieces{"don't", " I'M"});
  // Han characters are \p{Lo}, in both letter classes: a CJK run joins the letters after it.
  CHECK(split("gpt-4o", "你好world 12345") == Pieces{"你好world", " ", "123", "45"});
  // "/" joins the newlines after punctuation.
  CHECK(split("gpt-4o", "a/\n\nb") == Pieces{"a", "/\n\n", "b"});
  CHECK(split("llama4", "HelloWorld") == Pieces{"Hello", "World"});
}

TEST_CASE("kimi-k2 takes Han runs apart from the letters around them", "[engine][tokenizer][bpe]") {
  CHECK(split("kimi-k2", "你好world") == Pieces{"你好", "world"});
  CHECK(split("kimi-k2", "world你好") == Pieces{"world", "你好"});
  // Hiragana is a letter but not Han: one word.
  CHECK(split("kimi-k2", "ひらがな 123456") == Pieces{"ひらがな", " ", "123", "456"});
}

TEST_CASE("tekken and the letter-case families", "[engine][tokenizer][bpe]") {
  // Tekken: GPT-4o's words without contractions, every digit apart.
  CHECK(split("tekken", "HelloWorld 123") == Pieces{"Hello", "World", " ", "1", "2", "3"});
  CHECK(split("tekken", "don't") == Pieces{"don", "'t"});
  // Qwen3.5 keeps a combining mark (U+0301) on its letter; for Qwen2 the mark is no letter,
  // so it ends "e" and becomes the optional non-letter that leads the next word.
  CHECK(split("qwen35", "e\xCC\x81t\xC3\xA9") == Pieces{"e\xCC\x81t\xC3\xA9"});
  CHECK(split("qwen2", "e\xCC\x81t\xC3\xA9") == Pieces{"e", "\xCC\x81t\xC3\xA9"});
  // EXAONE MoE: a word runs on across single spaces between letters.
  CHECK(split("exaone-moe", "New York  city") == Pieces{"New York", " ", " city"});
}

TEST_CASE("Digit rules: from the right in threes, one at a time, or isolated runs", "[engine][tokenizer][bpe]") {
  // superbpe: number runs, then an empty lookahead match cuts before each final group of three.
  CHECK(split("superbpe", "1234567 x") == Pieces{"1", "234", "567", " x"});
  CHECK(split("superbpe", "123456") == Pieces{"123", "456"});
  // tiny_aya: \d{1,3} only where a whole number of triples follows to the word's end.
  CHECK(split("tiny_aya", "1234567") == Pieces{"1", "234", "567"});
  // starcoder (and smollm, refact, command-r): digits one by one, then GPT-2's pattern.
  CHECK(split("starcoder", "x=12;") == Pieces{"x", "=", "1", "2", ";"});
  // falcon: punctuation runs first, GPT-2's pattern, then three-digit groups from the left.
  CHECK(split("falcon", "Hello, 12345") == Pieces{"Hello", ",", " ", "123", "45"});
  // default: like falcon, plus whole digit runs before the three-digit cut.
  CHECK(split("default", "a 12345") == Pieces{"a", " ", "123", "45"});
}

TEST_CASE("Other families: BLOOM-style, BailingMoE, Seed-Coder, Jais 2", "[engine][tokenizer][bpe]") {
  // poro-chat / bloom: runs up to whitespace or sentence punctuation; "(" and ")" are in the
  // excluded class, so "!", " " and "(" match nothing and form one gap between two matches.
  CHECK(split("poro-chat", "Hello, world! (ok)") == Pieces{"Hello", ",", " world", "! (", "ok", ")"});
  // viking: the same, then every digit apart.
  CHECK(split("viking", "abc 123") == Pieces{"abc", " ", "1", "2", "3"});
  // bailingmoe: the possessive optional space before letters never gives the space back.
  CHECK(split("bailingmoe", "I'M 12") == Pieces{"I", "'M", " ", "1", "2"});
  // seed-coder: punctuation never takes the newlines after it.
  CHECK(split("seed-coder", "ok!!\n\nyes") == Pieces{"ok", "!!", "\n\n", "yes"});
  CHECK(split("qwen2", "ok!!\n\nyes") == Pieces{"ok", "!!\n\n", "yes"});
  // jais-2: whitespace runs in power-of-two lengths; five spaces before "b" give 4 + " b".
  CHECK(split("jais-2", "a     b") == Pieces{"a", "    ", " b"});
}

TEST_CASE("Every known name compiles and its pieces rebuild the text", "[engine][tokenizer][bpe]") {
  const std::string text = "Hello, y'all! 3.14 \xE4\xBD\xA0\xE5\xA5\xBD 한국어 \n\n\t ok \xF0\x9F\x98\x80 e\xCC\x81 x\xFF";
  for (const std::string_view name : kvdesk::known_pre_tokenizer_names()) {
    INFO(name);
    std::string joined;
    for (const std::string& piece : split(std::string(name), text)) {
      CHECK_FALSE(piece.empty());
      joined += piece;
    }
    CHECK(joined == text);
  }
}

TEST_CASE("The byte-level BPE chat families of llama.cpp are all known", "[engine][tokenizer][bpe]") {
  for (const char* name :
       {"default", "llama3", "llama-v3", "llama-bpe", "qwen2", "qwen35", "deepseek-llm", "deepseek-coder", "deepseek-v3",
        "deepseek-r1-qwen", "falcon", "falcon3", "mpt", "starcoder", "gpt-2", "phi-2", "refact", "command-r", "olmo",
        "dbrx", "smaug-bpe", "stablelm2", "tekken", "smollm", "exaone", "exaone4", "gpt-4o", "glm4", "chatglm-bpe",
        "llama4", "kimi-k2", "seed-coder", "hunyuan", "pixtral", "superbpe", "trillion", "bailingmoe", "minerva-7b",
        "poro-chat", "viking", "jais"}) {
    INFO(name);
    CHECK_NOTHROW(PreTokenizer::for_name(name));
  }
}

TEST_CASE("Invalid UTF-8 bytes are pieces of their own and nothing is lost", "[engine][tokenizer][bpe]") {
  CHECK(split("llama-bpe", "ab\xFF" "cd\xC3") == Pieces{"ab", "\xFF", "cd", "\xC3"});
  CHECK(split("gpt-2", "\xED\xA0\x80") == Pieces{"\xED", "\xA0", "\x80"});   // a UTF-8 surrogate is invalid
  CHECK(split("qwen2", "").empty());
}

TEST_CASE("An unknown pre-tokenizer name is an error naming it", "[engine][tokenizer][bpe]") {
  CHECK_THROWS_WITH(PreTokenizer::for_name("no-such-family"), Contains("'no-such-family'") && Contains("llama-bpe"));
  // llama.cpp's name is "gpt-2"; "gpt2" is the tokenizer model, not a pre-tokenizer.
  CHECK_THROWS_WITH(PreTokenizer::for_name("gpt2"), Contains("'gpt2'"));
  CHECK_THROWS_AS(PreTokenizer({"(unclosed"}), Error);
}
