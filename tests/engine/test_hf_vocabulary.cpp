// hf_vocabulary: a tokenizer.json written here by hand becomes the tokenizer.* keys llama.cpp's
// converter would write (token types, [PAD] holes, merges, pre, BOS/EOS, chat template), and
// kvdesk's tokenizer loaded from them matches its user-defined tokens in typed text. The
// real vocabularies are compared with transformers.js by tests/tokenizers/compare_real_vocab.mjs.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "engine/gguf/gguf_reader.h"
#include "engine/lab/gguf_writer.h"
#include "engine/lab/hf_vocabulary.h"
#include "engine/tokenizer/byte_unicode.h"
#include "engine/tokenizer/pretokenizer_rules.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/test_support.h"

using Catch::Matchers::Contains;
using nlohmann::json;
using Ids = std::vector<int32_t>;

namespace {

// Qwen3's pre-tokenizer regex, as its tokenizer.json writes it.
constexpr const char* kQwenRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr int32_t kImStart = 258;     // special
constexpr int32_t kThink = 259;       // not special: user defined
constexpr int32_t kFimPrefix = 260;   // not special, but <|...|>: control, as the converter types it
constexpr int32_t kTwoSpaces = 261;   // not special, "▁▁": user defined, written "  "
constexpr int32_t kHole = 262;        // no token has this id
constexpr int32_t kEndOfText = 263;   // special

json added(int32_t id, const std::string& content, bool special) {
  return {{"id", id}, {"content", content}, {"special", special}, {"single_word", false},
          {"lstrip", false},  {"rstrip", false},      {"normalized", false}};
}

// Ids 0..255: the bytes' byte-level symbols; 256 "Ġt", 257 "he"; then the added tokens.
json qwen_like_tokenizer() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[kvdesk::bytes_to_byte_level(std::string(1, static_cast<char>(b)))] = b;
  vocab["\xC4\xA0t"] = 256;
  vocab["he"] = 257;
  return {
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array({{{"type", "Split"}, {"pattern", {{"Regex", kQwenRegex}}}, {"behavior", "Isolated"}, {"invert", false}},
                      {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", json::array({{{"SpecialToken", {{"id", "<|im_start|>"}, {"type_id", 0}}}},
                                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"}, {"ignore_merges", false}, {"vocab", vocab},
        {"merges", json::array({json::array({"\xC4\xA0", "t"}), json::array({"h", "e"}), json::array({"a b", "c"})})}}},
      {"added_tokens", json::array({added(kImStart, "<|im_start|>", true), added(kThink, "<think>", false),
                                    added(kFimPrefix, "<|fim_prefix|>", false),
                                    added(kTwoSpaces, "\xE2\x96\x81\xE2\x96\x81", false),
                                    added(kEndOfText, "<|endoftext|>", true)})},
  };
}

void write_json(const std::string& path, const json& value) {
  std::ofstream out(path, std::ios::binary);
  out << value.dump();
}

}  // namespace

TEST_CASE("Every pre-tokenizer family's own rules are recognized as that family or one that splits alike",
          "[engine][tokenizer][hf_vocab]") {
  // Two families split every text as an earlier one does: BailingMoE's pattern is Qwen2's
  // written with possessive quantifiers (kormo: the first with Qwen2's split and no NFC), and
  // MiniCPM5 cuts digits in threes in a stage of its own before Llama 3's split.
  const std::map<std::string_view, std::string_view> alike = {{"bailingmoe", "kormo"}, {"minicpm5", "llama-bpe"}};
  for (const kvdesk::PreTokenizerFamily& family : kvdesk::pre_tokenizer_families()) {
    INFO(family.name);
    const auto expected = alike.count(family.name) ? alike.at(family.name) : family.name;
    CHECK(kvdesk::pre_tokenizer_name_for(family.rules->patterns, family.rules->ignore_merges, family.rules->nfc) ==
          expected);
  }
  CHECK_THROWS_WITH(kvdesk::pre_tokenizer_name_for({"x"}, false, false), Contains("no tokenizer.ggml.pre"));
}

TEST_CASE("A tokenizer.json becomes the converter's keys, and typed text matches its user-defined tokens",
          "[engine][tokenizer][hf_vocab]") {
  const kvdesk::test::TempDir dir;
  write_json(dir.file("tokenizer.json"), qwen_like_tokenizer());
  write_json(dir.file("tokenizer_config.json"), {{"bos_token", "<|im_start|>"},
                                                 {"eos_token", {{"content", "<|endoftext|>"}}},
                                                 {"chat_template", "{{ messages }}"}});
  const kvdesk::HfBpeVocabulary v = kvdesk::read_hf_bpe_vocabulary(dir.file("tokenizer.json"));

  REQUIRE(v.tokens.size() == 264);
  CHECK(v.tokens[256] == "\xC4\xA0t");
  CHECK(v.types[256] == 1);
  CHECK(v.types[kImStart] == 3);
  CHECK(v.types[kThink] == 4);
  CHECK(v.types[kFimPrefix] == 3);
  CHECK(v.tokens[kTwoSpaces] == "  ");
  CHECK(v.types[kTwoSpaces] == 4);
  CHECK(v.tokens[kHole] == "[PAD262]");
  CHECK(v.types[kHole] == 5);
  CHECK(v.merges == std::vector<std::string>{"\xC4\xA0 t", "h e", "a\xC4\xA0" "b c"});
  CHECK(v.pre == "qwen2");   // Qwen2's split and NFC
  CHECK(v.bos == kImStart);
  CHECK(v.eos == kEndOfText);
  CHECK(v.add_bos == true);   // the post-processor's single template starts with BOS
  CHECK_FALSE(v.add_eos.has_value());
  CHECK(v.chat_template == "{{ messages }}");

  kvdesk::GgufWriter w;
  kvdesk::write_hf_bpe_vocabulary(w, v);
  w.write(dir.file("vocab.gguf"));
  const auto tok = kvdesk::Tokenizer::from_gguf(*kvdesk::GgufFile::open(dir.file("vocab.gguf")));
  CHECK(tok->encode("<think>the", false) == Ids{kThink, 't', 257});
  CHECK(tok->encode("a  t", false) == Ids{'a', kTwoSpaces, 't'});
  const Ids typed_control = tok->encode("<|fim_prefix|>", false);
  CHECK(std::find(typed_control.begin(), typed_control.end(), kFimPrefix) == typed_control.end());
  CHECK(tok->encode_segments({{"<|fim_prefix|>", true}}, false) == Ids{kFimPrefix});
}

TEST_CASE("tokenizer.json files the converter's byte-level path cannot take are refused by name",
          "[engine][tokenizer][hf_vocab]") {
  const kvdesk::test::TempDir dir;
  json unigram = qwen_like_tokenizer();
  unigram["model"]["type"] = "Unigram";
  write_json(dir.file("tokenizer.json"), unigram);
  CHECK_THROWS_WITH(kvdesk::read_hf_bpe_vocabulary(dir.file("tokenizer.json")),
                    Contains("tokenizer.json") && Contains("not a byte-level BPE"));
  json metaspace = qwen_like_tokenizer();
  metaspace["pre_tokenizer"] = {{"type", "Metaspace"}};
  write_json(dir.file("tokenizer.json"), metaspace);
  CHECK_THROWS_WITH(kvdesk::read_hf_bpe_vocabulary(dir.file("tokenizer.json")), Contains("\"Metaspace\""));
  CHECK_THROWS_WITH(kvdesk::read_hf_bpe_vocabulary(dir.file("missing.json")), Contains("cannot open"));
}
