// BpeTokenizer over a small byte-level vocabulary written here by hand (no Hugging Face files
// on this machine): ids 0..255 are the 256 single bytes, in byte order, so an unmerged byte's
// id is its value; then one token per merge below; then special tokens. Every expected id
// list follows from the pre-tokenizer split (see test_pretokenizer.cpp) and the BPE rule:
// in each word, repeatedly merge the adjacent pair whose merge comes first in the list
// (leftmost on a tie) until no adjacent pair has a merge.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "engine/tokenizer/byte_unicode.h"
#include "engine/chat/chat_template.h"
#include "engine/error.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/lab/gguf_writer.h"
#include "engine/tokenizer/pretokenizer_rules.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/test_support.h"

using kvdesk::Error;
using kvdesk::TokenKind;
using kvdesk::Tokenizer;
using Catch::Matchers::Contains;
using Ids = std::vector<int32_t>;

namespace {

// Merges in rank order, written with real bytes (" " for "Ġ", "\n" for "Ċ"), and the id of
// the token each produces (-1: the vocabulary has no token for the result).
struct Merge {
  std::string left;
  std::string right;
  int32_t id;
};
const std::vector<Merge> kMerges = {
    {" ", "t", 256},                 // rank 0
    {"h", "e", 257},                 // rank 1
    {" t", "he", 258},               // rank 2: " the"
    {"1", "2", 259},                 // rank 3
    {"3", "4", 260},                 // rank 4: outranks "12"+"3"
    {"12", "3", 261},                // rank 5
    {"'", "t", 262},                 // rank 6
    {"d", "o", 263},                 // rank 7
    {"do", "n", 264},                // rank 8
    {" ", " ", 265},                 // rank 9
    {"\n", "\n", 266},               // rank 10
    {"b", "c", 267},                 // rank 11: outranks "a"+"b"
    {"a", "b", 268},                 // rank 12
    {"\xE4", "\xBD", 269},           // rank 13: first two bytes of 你 (E4 BD A0)
    {"\xE4\xBD", "\xA0", 270},       // rank 14: 你
    {"'", "M", 271},                 // rank 15
    {"x", "y", -1},                  // rank 16: "xy" is not in the vocabulary
};
constexpr int32_t kImStart = 272;    // control
constexpr int32_t kImEnd = 273;      // control
constexpr int32_t kEndOfText = 274;  // control, EOS
constexpr int32_t kBeginText = 275;  // control, BOS
constexpr int32_t kTool = 276;       // user defined "<tool>"
constexpr int32_t kZz = 277;         // normal "zz", which no merge makes
constexpr int32_t kVocabSize = 278;

struct BpeVocab {
  std::string pre = "llama-bpe";
  bool with_bos = false;          // BOS id and add_bos_token = true
  bool bos_id_only = false;       // BOS id, no add_bos_token: the family's default decides
  std::vector<std::string> extra_merges;   // appended raw to tokenizer.ggml.merges
  int user_defined_byte = -1;     // this byte's symbol typed user-defined, as DeepSeek LLM types some
  int missing_byte = -1;          // no token for this byte's symbol (its id holds another piece)
  std::vector<std::string> extra_specials;   // control tokens from id kVocabSize on
  std::vector<std::string> extra_user_defined;   // user-defined tokens after extra_specials

  std::unique_ptr<Tokenizer> load() const {
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    for (int b = 0; b < 256; ++b) {
      tokens.push_back(b == missing_byte ? "<unused>" : kvdesk::bytes_to_byte_level(std::string(1, static_cast<char>(b))));
      types.push_back(b == user_defined_byte ? 4 : b == missing_byte ? 5 : 1);
    }
    std::vector<std::string> merges;
    for (const Merge& m : kMerges) {
      merges.push_back(kvdesk::bytes_to_byte_level(m.left) + " " + kvdesk::bytes_to_byte_level(m.right));
      if (m.id < 0) continue;
      REQUIRE(m.id == static_cast<int32_t>(tokens.size()));
      tokens.push_back(kvdesk::bytes_to_byte_level(m.left + m.right));
      types.push_back(1);
    }
    merges.insert(merges.end(), extra_merges.begin(), extra_merges.end());
    for (const char* special : {"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|begin_of_text|>"}) {
      tokens.push_back(special);
      types.push_back(3);
    }
    tokens.push_back("<tool>");
    types.push_back(4);
    tokens.push_back("zz");
    types.push_back(1);
    REQUIRE(tokens.size() == kVocabSize);
    for (const std::string& special : extra_specials) {
      tokens.push_back(special);
      types.push_back(3);
    }
    for (const std::string& text : extra_user_defined) {
      tokens.push_back(text);
      types.push_back(4);
    }

    const kvdesk::test::TempDir dir;
    kvdesk::GgufWriter w;
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_string("tokenizer.ggml.pre", pre);
    w.add_string_array("tokenizer.ggml.tokens", tokens);
    w.add_int32_array("tokenizer.ggml.token_type", types);
    w.add_string_array("tokenizer.ggml.merges", merges);
    w.add_uint32("tokenizer.ggml.eos_token_id", kEndOfText);
    if (with_bos || bos_id_only) w.add_uint32("tokenizer.ggml.bos_token_id", kBeginText);
    if (with_bos) w.add_bool("tokenizer.ggml.add_bos_token", true);
    w.write(dir.file("bpe.gguf"));
    return Tokenizer::from_gguf(*kvdesk::GgufFile::open(dir.file("bpe.gguf")));
  }
};

std::string decode(const Tokenizer& tok, const Ids& ids) {
  std::string out;
  for (const int32_t id : ids) out += tok.token_bytes(id);
  return out;
}

Ids bytes_of(std::string_view s) {
  Ids out;
  for (const char c : s) out.push_back(static_cast<unsigned char>(c));
  return out;
}

Ids concat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const Ids& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

}  // namespace

TEST_CASE("BPE merges the best-ranked pair first, leftmost on a tie", "[engine][tokenizer][bpe]") {
  const auto tok = BpeVocab{}.load();
  CHECK(tok->vocab_size() == kVocabSize);
  // " the": Ġ t h e -> "Ġ t" (rank 0) -> "h e" (rank 1) -> "Ġt he" (rank 2).
  CHECK(tok->encode(" the", false) == Ids{258});
  // "the" (no leading space): only "h e" applies.
  CHECK(tok->encode("the", false) == Ids{'t', 257});
  // "abc": "b c" (rank 11) beats "a b" (rank 12); "a bc" has no merge.
  CHECK(tok->encode("abc", false) == Ids{'a', 267});
  CHECK(tok->encode("ab", false) == Ids{268});
  // "xy": the merge exists but its result is no token: one token per byte instead.
  CHECK(tok->encode("xy", false) == Ids{'x', 'y'});
}

TEST_CASE("llama-bpe takes a word that is a token as a whole (ignore_merges), others only merge", "[engine][tokenizer][bpe]") {
  CHECK(BpeVocab{"llama-bpe"}.load()->encode("zz", false) == Ids{kZz});
  // Every Llama 3 name and Tekken ignore merges as llama.cpp does; DBRX shares Llama 3's
  // split but merges as usual.
  for (const char* pre : {"llama3", "llama-v3", "falcon3", "pixtral", "tekken", "minicpm5"}) {
    INFO(pre);
    CHECK(BpeVocab{pre}.load()->encode("zz", false) == Ids{kZz});
  }
  CHECK(BpeVocab{"dbrx"}.load()->encode("zz", false) == Ids{'z', 'z'});
  CHECK(BpeVocab{"qwen2"}.load()->encode("zz", false) == Ids{'z', 'z'});
  // "xy" is no token, so merges run as usual for llama-bpe too.
  CHECK(BpeVocab{"llama-bpe"}.load()->encode("xy", false) == Ids{'x', 'y'});
}

TEST_CASE("Numbers: Llama 3 groups three digits, Qwen2 one, GPT-2 the whole run", "[engine][tokenizer][bpe]") {
  // llama-bpe: "123" "45". 1 2 3 -> "12" (rank 3) -> "12 3" (rank 5); "45" has no merge.
  CHECK(BpeVocab{"llama-bpe"}.load()->encode("12345", false) == Ids{261, '4', '5'});
  // qwen2: every digit alone.
  CHECK(BpeVocab{"qwen2"}.load()->encode("12345", false) == Ids{'1', '2', '3', '4', '5'});
  // gpt-2: one word 1 2 3 4 5 -> "1 2" (rank 3) -> "3 4" (rank 4) beats "12 3" (rank 5) ->
  // "12" "34" "5", no merge between them.
  CHECK(BpeVocab{"gpt-2"}.load()->encode("12345", false) == Ids{259, 260, '5'});
}

TEST_CASE("Contractions follow each pre-tokenizer's rule", "[engine][tokenizer][bpe]") {
  // "don" -> d o (rank 7) -> do n (rank 8); "'t" -> rank 6.
  CHECK(BpeVocab{"llama-bpe"}.load()->encode("don't", false) == Ids{264, 262});
  // Llama 3 keeps "'M" one word (merge rank 15); GPT-2 splits "'" from "M".
  CHECK(BpeVocab{"llama-bpe"}.load()->encode("I'M", false) == Ids{'I', 271});
  CHECK(BpeVocab{"gpt-2"}.load()->encode("I'M", false) == Ids{'I', '\'', 'M'});
}

TEST_CASE("Whitespace runs, trailing spaces and newlines", "[engine][tokenizer][bpe]") {
  const auto tok = BpeVocab{}.load();
  // "a" "  " " b": the two-space word merges "Ġ Ġ" (rank 9); " b" has no merge.
  CHECK(tok->encode("a   b", false) == Ids{'a', 265, ' ', 'b'});
  CHECK(tok->encode("hi  ", false) == Ids{'h', 'i', 265});
  // "\n\n" is one word, merged by "Ċ Ċ" (rank 10).
  CHECK(tok->encode("x\n\ny", false) == Ids{'x', 266, 'y'});
  // GPT-2 splits the newlines into two words, so no merge can join them.
  CHECK(BpeVocab{"gpt-2"}.load()->encode("x\n\ny", false) == Ids{'x', '\n', '\n', 'y'});
}

TEST_CASE("CJK, emoji and mixed scripts encode their UTF-8 bytes", "[engine][tokenizer][bpe]") {
  const auto tok = BpeVocab{}.load();
  // 你好 = E4 BD A0 E5 A5 BD, one word: E4 BD (rank 13), then + A0 (rank 14) = 你; 好 stays bytes.
  CHECK(tok->encode("\xE4\xBD\xA0\xE5\xA5\xBD", false) == Ids{270, 0xE5, 0xA5, 0xBD});
  // 😀 = F0 9F 98 80, no merges.
  CHECK(tok->encode("\xF0\x9F\x98\x80", false) == Ids{0xF0, 0x9F, 0x98, 0x80});
  // "the你123": one letter word "the你" (h e, then E4 BD A0), then "123".
  CHECK(tok->encode("the\xE4\xBD\xA0" "123", false) == Ids{'t', 257, 270, 261});
}

TEST_CASE("Invalid UTF-8 encodes as its bytes and decodes back exactly", "[engine][tokenizer][bpe]") {
  const auto tok = BpeVocab{}.load();
  const std::string text = "ab\xFF" "c\xC3";
  // "ab" (rank 12), 0xFF alone, "c", 0xC3 alone.
  CHECK(tok->encode(text, false) == Ids{268, 0xFF, 'c', 0xC3});
  CHECK(decode(*tok, tok->encode(text, false)) == text);
}

TEST_CASE("A byte whose symbol is typed user-defined still encodes", "[engine][tokenizer][bpe]") {
  const auto tok = BpeVocab{.user_defined_byte = 0xFF}.load();
  CHECK(tok->encode("ab\xFF", false) == Ids{268, 0xFF});
}

TEST_CASE("A byte the vocabulary has no token for becomes U+FFFD", "[engine][tokenizer][bpe]") {
  const auto tok = BpeVocab{.missing_byte = 0xFF}.load();
  CHECK(tok->encode("ab\xFF", false) == Ids{268, 0xEF, 0xBF, 0xBD});
  CHECK(decode(*tok, tok->encode("ab\xFF", false)) == "ab\xEF\xBF\xBD");
  const auto no_replacement = BpeVocab{.missing_byte = 0xEF}.load();
  CHECK_THROWS_WITH(no_replacement->encode("ab\xEF", false), Catch::Contains("no token for the byte-level symbol"));
}

TEST_CASE("decode(encode(s)) == s for tricky and random byte strings", "[engine][tokenizer][bpe]") {
  for (const std::string_view pre : kvdesk::known_pre_tokenizer_names()) {
    INFO(pre);
    const auto tok = BpeVocab{std::string(pre)}.load();
    std::vector<std::string> texts = {
        "", " ", "Hello world", "  leading and trailing  ", "tab\there\r\nwindows", "\n\n\n",
        "don't I'M you're WE'LL", "3.14159 and 1,000,000", "caf\xC3\xA9 na\xC3\xAFve",
        "\xEC\x95\x88\xEB\x85\x95 \xE4\xB8\x96\xE7\x95\x8C", "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB zwj",
        "<|im_start|>typed<|im_end|>", std::string("nul\0byte", 8), "\xC0\x80 overlong \xF5 high",
    };
    std::mt19937 rng(42);
    for (int i = 0; i < 200; ++i) {
      std::string s(rng() % 24, '\0');
      for (char& c : s) c = static_cast<char>(rng() % 256);
      texts.push_back(s);
    }
    for (const std::string& s : texts) {
      INFO(pre << ": " << s);
      CHECK(decode(*tok, tok->encode(s, false)) == s);
    }
  }
}

TEST_CASE("Special tokens: matched in template segments only, never in plain text", "[engine][tokenizer][bpe]") {
  const auto tok = BpeVocab{}.load();
  // Typed text: "<|" "im" "_start" "|>" "user" are ordinary words.
  const Ids typed = tok->encode("<|im_start|>user", false);
  CHECK(typed == concat({bytes_of("<|im_start|>"), bytes_of("user")}));
  CHECK(decode(*tok, typed) == "<|im_start|>user");
  // The same text as a template segment: the control token, then "user" as text.
  CHECK(tok->encode_segments({{"<|im_start|>user", true}}, false) == concat({{kImStart}, bytes_of("user")}));
  // A special token split across a template and a content segment is not matched.
  CHECK(tok->encode_segments({{"<|im_", true}, {"end|>", false}}, false) == bytes_of("<|im_end|>"));
  // User-defined tokens are special too; the longest special text wins at a position.
  CHECK(tok->encode_segments({{"<tool><|im_end|>", true}}, false) == Ids{kTool, kImEnd});
  // Control tokens print nothing, user-defined ones their text.
  CHECK(tok->token_bytes(kImStart).empty());
  CHECK(tok->token_bytes(kTool) == "<tool>");
  CHECK(tok->kind(kImStart) == TokenKind::Control);
  CHECK(tok->piece(258) == "\xC4\xA0the");
  CHECK(tok->token_bytes(258) == " the");
}

TEST_CASE("User-defined tokens are matched in typed text, control tokens never", "[engine][tokenizer][bpe]") {
  const auto tok = BpeVocab{}.load();
  // "<tool>" is user-defined (as Qwen3's <think> and <tool_call>): its text is the token.
  CHECK(tok->encode("ab<tool>ab", false) == Ids{268, kTool, 268});
  CHECK(tok->encode("<tool>", true) == Ids{kTool});   // no BOS in this vocabulary
  CHECK(decode(*tok, tok->encode("x<tool>y", false)) == "x<tool>y");
  // "<|im_end|>" is a control token: typed, it is text.
  CHECK(tok->encode("ab<|im_end|>", false) == concat({{268}, bytes_of("<|im_end|>")}));
  // In a chat, typed content matches user-defined tokens and never control ones.
  CHECK(tok->encode_segments({{"<|im_start|>", true}, {"<tool><|im_end|>", false}}, false) ==
        concat({{kImStart, kTool}, bytes_of("<|im_end|>")}));
}

TEST_CASE("The longest user-defined token wins where several start (GPT-NeoX's runs of spaces)",
          "[engine][tokenizer][bpe]") {
  BpeVocab neox{"gpt-2"};
  neox.extra_user_defined = {"  ", "   ", "    ", "<tool>x"};
  const auto tok = neox.load();
  const int32_t two = kVocabSize, three = kVocabSize + 1, four = kVocabSize + 2, tool_x = kVocabSize + 3;
  // "   Hello": three spaces are one token, and "Hello" loses its leading space.
  CHECK(tok->encode("   Hello", false) == concat({{three}, bytes_of("Hello")}));
  // Five spaces: the longest first (four), then one space left as text, joined to "x".
  CHECK(tok->encode("     x", false) == concat({{four}, bytes_of(" x")}));
  CHECK(tok->encode("a  b", false) == Ids{'a', two, 'b'});
  // "<tool>x" is longer than "<tool>" at the same position.
  CHECK(tok->encode("<tool>xy", false) == Ids{tool_x, 'y'});
  CHECK(tok->encode("<tool>y", false) == Ids{kTool, 'y'});
  // One space is no token of its own: GPT-2's split as before.
  CHECK(tok->encode(" the", false) == Ids{258});
}

TEST_CASE("qwen2 and mpt put text in NFC before splitting, as their tokenizer.json does, and others keep it",
          "[engine][tokenizer][bpe]") {
  const std::string decomposed = "e\xCC\x81";   // e + COMBINING ACUTE ACCENT
  for (const char* pre : {"qwen2", "deepseek-r1-qwen", "mpt"}) {
    INFO(pre);
    CHECK(BpeVocab{pre}.load()->encode(decomposed, false) == Ids{0xC3, 0xA9});   // é
  }
  for (const char* pre : {"llama-bpe", "gpt-2", "deepseek-v3", "gpt-4o"}) {
    INFO(pre);
    CHECK(BpeVocab{pre}.load()->encode(decomposed, false) == Ids{'e', 0xCC, 0x81});
  }
  // Bytes that are not UTF-8 stay as they are around the normalized text.
  CHECK(BpeVocab{"qwen2"}.load()->encode("\xFF" "e\xCC\x81\xFE", false) == Ids{0xFF, 0xC3, 0xA9, 0xFE});
}

TEST_CASE("A rendered ChatML prompt tokenizes with control tokens for the template only", "[engine][tokenizer][bpe][chat]") {
  const auto tok = BpeVocab{"qwen2"}.load();
  const kvdesk::ChatTemplate chatml = kvdesk::builtin_chat_template("chatml");
  // Rendered: "<|im_start|>user\n" + "<|im_start|>x" (typed) + "<|im_end|>\n<|im_start|>assistant\n".
  // The text between the first two template control tokens is one piece of text,
  // "user\n<|im_start|>x", split by qwen2 into "user" "\n" "<|" "im" "_start" "|>" "x".
  const Ids expected = concat({{kImStart},
                               bytes_of("user"), bytes_of("\n"), bytes_of("<|"), bytes_of("im"), bytes_of("_start"),
                               bytes_of("|>"), bytes_of("x"),
                               {kImEnd}, bytes_of("\n"), {kImStart}, bytes_of("assistant"), bytes_of("\n")});
  CHECK(kvdesk::encode_chat(*tok, chatml, {{"user", "<|im_start|>x"}}) == expected);
}

TEST_CASE("Without add_bos_token, Llama 3 and Tekken add BOS by default and other families do not", "[engine][tokenizer][bpe]") {
  for (const char* pre : {"llama-bpe", "llama3", "pixtral", "tekken"}) {
    INFO(pre);
    BpeVocab vocab{pre};
    vocab.bos_id_only = true;
    CHECK(vocab.load()->add_bos_default());
    CHECK_FALSE(BpeVocab{pre}.load()->add_bos_default());   // no BOS token at all
  }
  for (const char* pre : {"qwen2", "gpt-2", "deepseek-v3"}) {
    INFO(pre);
    BpeVocab vocab{pre};
    vocab.bos_id_only = true;
    CHECK_FALSE(vocab.load()->add_bos_default());
  }
}

TEST_CASE("BOS is added when the vocabulary asks for it, never twice", "[engine][tokenizer][bpe][chat]") {
  BpeVocab vocab;
  vocab.with_bos = true;
  const auto tok = vocab.load();
  CHECK(tok->add_bos_default());
  CHECK(tok->encode("ab", true) == Ids{kBeginText, 268});
  // Llama 3's template writes bos_token itself: no second BOS.
  const Ids llama3 = kvdesk::encode_chat(*tok, kvdesk::builtin_chat_template("llama3"), {{"user", "ab"}});
  CHECK(std::count(llama3.begin(), llama3.end(), kBeginText) == 1);
  CHECK(llama3.front() == kBeginText);
  // ChatML writes none: the vocabulary's add_bos_token adds it.
  const Ids chatml = kvdesk::encode_chat(*tok, kvdesk::builtin_chat_template("chatml"), {{"user", "ab"}});
  CHECK(chatml.front() == kBeginText);
  CHECK(chatml[1] == kImStart);
}

TEST_CASE("End of generation: EOS, the GGUF's EOT and the families' end-of-turn tokens", "[engine][tokenizer][bpe]") {
  const auto tok = BpeVocab{}.load();
  CHECK(tok->is_end_of_generation(kEndOfText));
  CHECK(tok->is_end_of_generation(kImEnd));          // <|im_end|> is ChatML's end of turn
  CHECK_FALSE(tok->is_end_of_generation(kImStart));
  CHECK_FALSE(tok->is_end_of_generation('a'));
  CHECK_FALSE(tok->is_end_of_generation(-1));
}

TEST_CASE("A harmony vocabulary ends generation at <|return|> and <|call|>, and prints its structure tokens",
          "[engine][tokenizer][bpe]") {
  // gpt-oss's answer: <|channel|>analysis<|message|>...<|end|><|start|>assistant<|channel|>final...
  BpeVocab harmony;
  harmony.extra_specials = {"<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>"};
  const auto tok = harmony.load();
  const int32_t start = kVocabSize, channel = kVocabSize + 1, end = kVocabSize + 3;
  CHECK(tok->is_end_of_generation(kVocabSize + 4));   // <|return|>
  CHECK(tok->is_end_of_generation(kVocabSize + 5));   // <|call|>
  CHECK_FALSE(tok->is_end_of_generation(end));
  CHECK(decode(*tok, {channel, 'a', end, start}) == "<|channel|>a<|end|><|start|>");
  // Phi-3's <|end|>, in a vocabulary without <|return|> and <|call|>, ends a turn and prints nothing.
  BpeVocab phi3;
  phi3.extra_specials = {"<|end|>"};
  const auto phi3_tok = phi3.load();
  CHECK(phi3_tok->is_end_of_generation(kVocabSize));
  CHECK(decode(*phi3_tok, {'a', kVocabSize}) == "a");
}

TEST_CASE("Broken BPE vocabularies are rejected with the offending key or value", "[engine][tokenizer][bpe]") {
  CHECK_THROWS_WITH(BpeVocab{"gpt2"}.load(), Contains("'gpt2'") && Contains("tokenizer.ggml.pre"));
  BpeVocab bad_merge;
  bad_merge.extra_merges = {"nospace"};
  CHECK_THROWS_WITH(bad_merge.load(), Contains("tokenizer.ggml.merges[17]"));
}
