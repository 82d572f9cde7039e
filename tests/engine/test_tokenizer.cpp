// Tokenizer: ids must be exactly sentencepiece's own (the spm_encode tool, the library on the
// Llama-2 tokenizer.model), whether the model comes from a .model file or from a GGUF
// vocabulary turned into a hand-serialized ModelProto; printing follows llama.cpp.
#include <catch2/catch.hpp>

#include <sentencepiece_processor.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>

#include "engine/error.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/lab/gguf_writer.h"
#include "engine/tokenizer/spm_model_proto.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8_stream.h"

using kvdesk::Error;
using kvdesk::GgufFile;
using kvdesk::SpmPiece;
using kvdesk::TokenKind;
using kvdesk::Tokenizer;
using Catch::Matchers::Contains;

namespace {

const std::string kModelsDir = KVDESK_MODELS_DIR;
const std::string kLlamaModel = kModelsDir + "/tokenizer.model";
const std::string kStoriesGguf = kModelsDir + "/stories260K.gguf";

// Single-line text that is hard to tokenize (spm_encode reads one sentence per line).
const std::vector<std::string> kTrickyLines = {
    "",
    "Hello world",
    " leading space",
    "trailing space ",
    "double  space and   triple",
    "   ",
    "tab\there and\t\tthere\t",
    "\ttab first",
    "carriage\rreturn",
    "digits 1234567890, 3.14159 and 2024-05-01",
    "accents: café, naïve, Ångström, résumé, façade",
    "decomposed e\xCC\x81 (e + U+0301) stays decomposed",
    "안녕하세요, 세계!",
    "日本語のテキストと中文的句子",
    "emoji 😀 and ❤️ and 🦙",
    "ZWJ sequences: 👩‍💻 👨‍👩‍👧‍👦 🏳️‍🌈",
    "rare CJK 𠜎𠜱𡃁 needs byte fallback",
    "newer emoji 🫠🪿 need byte fallback",
    "<s> and </s> typed as text",
    "<s>",
    "</s><unk>",
    "a literal \xE2\x96\x81 lower one eighth block",
};

// Text with newlines: checked against the sentencepiece library itself.
const std::vector<std::string> kTrickyMultiline = {
    "line one\nline two",
    "\n\nstarts with newlines",
    "ends with a newline\n",
    "windows\r\nline end",
    "안녕\n😀\n<s>\n",
};

std::string read_all(FILE* f) {
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  return out;
}

// A file in the temp folder, removed when this goes out of scope.
struct TempFile {
  std::filesystem::path path;
  explicit TempFile(const std::string& name, const std::string& contents = "") {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("kvdesk_tok_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + "_" + name);
    std::ofstream(path, std::ios::binary) << contents;
  }
  ~TempFile() { std::filesystem::remove(path); }
};

std::vector<int32_t> parse_ids(const std::string& line) {
  std::istringstream in(line);
  std::vector<int32_t> ids;
  for (int32_t id; in >> id;) ids.push_back(id);
  REQUIRE(in.eof());
  return ids;
}

// The ids spm_encode (sentencepiece's command-line encoder) gives for each line, no BOS.
// Fails, never skips, when the tool is missing.
std::vector<std::vector<int32_t>> spm_encode_lines(const std::vector<std::string>& lines) {
  std::string input;
  for (const std::string& line : lines) {
    REQUIRE(line.find('\n') == std::string::npos);
    input += line + "\n";
  }
  const TempFile in("input.txt", input);
  const TempFile err("stderr.txt");
  const std::string command = "spm_encode --model='" + kLlamaModel + "' --output_format=id < '" +
                              in.path.string() + "' 2> '" + err.path.string() + "'";
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  const std::string output = read_all(pipe);
  const int status = pclose(pipe);
  std::ifstream err_in(err.path);
  const std::string err_text((std::istreambuf_iterator<char>(err_in)), std::istreambuf_iterator<char>());
  INFO("spm_encode (Debian package sentencepiece) must be installed; stderr: " << err_text);
  REQUIRE(status == 0);
  std::vector<std::vector<int32_t>> ids;
  std::istringstream out(output);
  for (std::string line; std::getline(out, line);) ids.push_back(parse_ids(line));
  REQUIRE(ids.size() == lines.size());
  return ids;
}

std::unique_ptr<sentencepiece::SentencePieceProcessor> load_processor(const std::string& path) {
  auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
  REQUIRE(processor->Load(path).ok());
  return processor;
}

std::vector<int32_t> library_encode(const sentencepiece::SentencePieceProcessor& processor,
                                    const std::string& text) {
  std::vector<int> ids;
  REQUIRE(processor.Encode(text, &ids).ok());
  return {ids.begin(), ids.end()};
}

// Pieces, scores and types as the sentencepiece API reports them.
std::vector<SpmPiece> pieces_via_api(const sentencepiece::SentencePieceProcessor& processor) {
  std::vector<SpmPiece> pieces;
  for (int id = 0; id < processor.GetPieceSize(); ++id) {
    const int type = processor.IsUnknown(id) ? 2 : processor.IsControl(id) ? 3
                   : processor.IsUnused(id)  ? 5 : processor.IsByte(id)    ? 6 : 1;
    pieces.push_back({processor.IdToPiece(id), processor.GetScore(id), type});
  }
  return pieces;
}

std::string printed(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::string bytes;
  for (const int32_t id : ids) bytes += tok.token_bytes(id);
  return bytes;
}

nlohmann::json stories_reference() {
  std::ifstream in(kModelsDir + "/stories260K.reference.json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

// A small GGUF vocabulary: BPE merges ▁a, ab, ▁ab; no byte pieces. Tests break one field.
struct VocabGguf {
  std::string model = "llama";
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a", "ab",
                                     "\xE2\x96\x81" "ab"};
  std::vector<float> scores = {0, 0, 0, -1, -2, -3, -4, -5, -6};
  std::vector<int32_t> types = {2, 3, 3, 1, 1, 1, 1, 1, 1};
  uint32_t bos = 1;
  bool add_bos = false;
  std::optional<uint32_t> unk;   // tokenizer.ggml.unknown_token_id

  std::unique_ptr<Tokenizer> load() const {
    const TempFile file("vocab.gguf");
    kvdesk::GgufWriter w;
    w.add_string("general.architecture", "llama");
    w.add_string("tokenizer.ggml.model", model);
    w.add_string_array("tokenizer.ggml.tokens", tokens);
    w.add_float32_array("tokenizer.ggml.scores", scores);
    w.add_int32_array("tokenizer.ggml.token_type", types);
    w.add_uint32("tokenizer.ggml.bos_token_id", bos);
    w.add_uint32("tokenizer.ggml.eos_token_id", 2);
    w.add_bool("tokenizer.ggml.add_bos_token", add_bos);
    if (unk) w.add_uint32("tokenizer.ggml.unknown_token_id", *unk);
    w.write(file.path.string());
    return Tokenizer::from_gguf(*GgufFile::open(file.path.string()));
  }
};

}  // namespace

TEST_CASE("The Llama tokenizer.model encodes tricky text exactly like spm_encode", "[engine][tokenizer]") {
  const auto tok = Tokenizer::from_spm_file(kLlamaModel);
  const auto expected = spm_encode_lines(kTrickyLines);
  for (size_t i = 0; i < kTrickyLines.size(); ++i) {
    INFO("text: \"" << kTrickyLines[i] << "\"");
    CHECK(tok->encode(kTrickyLines[i], false) == expected[i]);
  }
}

TEST_CASE("Text with newlines encodes like the sentencepiece library, newline as <0x0A>", "[engine][tokenizer]") {
  const auto tok = Tokenizer::from_spm_file(kLlamaModel);
  const auto library = load_processor(kLlamaModel);
  for (const std::string& text : kTrickyMultiline) {
    INFO("text: \"" << text << "\"");
    CHECK(tok->encode(text, false) == library_encode(*library, text));
  }
  const std::vector<int32_t> ids = tok->encode("Hello\nworld", false);
  REQUIRE(ids.size() == 3);
  CHECK(tok->piece(ids[0]) == "\xE2\x96\x81Hello");
  CHECK(tok->piece(ids[1]) == "<0x0A>");
  CHECK(tok->piece(ids[2]) == "world");
}

TEST_CASE("BOS is prepended only when asked", "[engine][tokenizer]") {
  const auto tok = Tokenizer::from_spm_file(kLlamaModel);
  CHECK(tok->vocab_size() == 32000);
  CHECK(tok->bos_id() == 1);
  CHECK(tok->eos_id() == 2);
  CHECK(tok->add_bos_default());
  const std::vector<int32_t> plain = tok->encode("Hello world", false);
  std::vector<int32_t> with_bos = {1};
  with_bos.insert(with_bos.end(), plain.begin(), plain.end());
  CHECK(tok->encode("Hello world", true) == with_bos);
  CHECK(tok->encode("", true) == std::vector<int32_t>{1});
  CHECK(tok->is_end_of_generation(2));
  CHECK_FALSE(tok->is_end_of_generation(1));
}

TEST_CASE("Typed <s> and </s> are plain text, never BOS or EOS", "[engine][tokenizer]") {
  const auto tok = Tokenizer::from_spm_file(kLlamaModel);
  const std::vector<int32_t> ids = tok->encode("<s>hi</s>", false);
  CHECK(std::find(ids.begin(), ids.end(), tok->bos_id()) == ids.end());
  CHECK(std::find(ids.begin(), ids.end(), tok->eos_id()) == ids.end());
  CHECK(ids.size() > 2);
  CHECK(printed(*tok, ids) == " <s>hi</s>");
}

TEST_CASE("Printing the encoded ids gives back the text after the dummy-prefix space", "[engine][tokenizer]") {
  const auto tok = Tokenizer::from_spm_file(kLlamaModel);
  std::vector<std::string> texts = kTrickyLines;
  texts.insert(texts.end(), kTrickyMultiline.begin(), kTrickyMultiline.end());
  for (const std::string& text : texts) {
    if (text.empty() || text.find("\xE2\x96\x81") != std::string::npos) continue;  // a typed U+2581 prints as a space
    INFO("text: \"" << text << "\"");
    CHECK(printed(*tok, tok->encode(text, false)) == " " + text);
  }
}

TEST_CASE("Characters missing from the vocabulary fall back to byte tokens", "[engine][tokenizer]") {
  const auto tok = Tokenizer::from_spm_file(kLlamaModel);
  for (const std::string ch : {"𠜎", "🫠"}) {
    const std::vector<int32_t> ids = tok->encode(ch, false);
    REQUIRE(ids.size() == 5);   // "▁" then the four UTF-8 bytes
    CHECK(tok->piece(ids[0]) == "\xE2\x96\x81");
    for (size_t i = 1; i < ids.size(); ++i) CHECK(tok->kind(ids[i]) == TokenKind::Byte);
    CHECK(printed(*tok, ids) == " " + ch);
  }
}

TEST_CASE("token_bytes, piece and kind describe tokens the way llama.cpp prints them", "[engine][tokenizer]") {
  const auto tok = Tokenizer::from_spm_file(kLlamaModel);
  CHECK(tok->piece(0) == "<unk>");
  CHECK(tok->kind(0) == TokenKind::Unknown);
  CHECK(tok->token_bytes(0) == "<unk>");
  CHECK(tok->piece(1) == "<s>");
  CHECK(tok->kind(1) == TokenKind::Control);
  CHECK(tok->token_bytes(1).empty());
  CHECK(tok->token_bytes(2).empty());
  CHECK(tok->piece(13) == "<0x0A>");
  CHECK(tok->kind(13) == TokenKind::Byte);
  CHECK(tok->token_bytes(13) == "\n");
  CHECK(tok->token_bytes(3 + 0xE2) == "\xE2");
  const int32_t hello = tok->encode("Hello", false).at(0);
  CHECK(tok->piece(hello) == "\xE2\x96\x81Hello");
  CHECK(tok->kind(hello) == TokenKind::Normal);
  CHECK(tok->token_bytes(hello) == " Hello");
}

TEST_CASE("Out-of-range ids are harmless everywhere", "[engine][tokenizer]") {
  const auto tok = Tokenizer::from_spm_file(kLlamaModel);
  for (const int32_t id : {-1, tok->vocab_size(), INT32_MAX, INT32_MIN}) {
    CHECK(tok->token_bytes(id).empty());
    CHECK(tok->piece(id).empty());
    CHECK(tok->kind(id) == TokenKind::Unused);
    CHECK_FALSE(tok->is_end_of_generation(id));
  }
}

TEST_CASE("Invalid UTF-8 and random bytes encode to ids in the vocabulary and print as valid UTF-8",
          "[engine][tokenizer]") {
  const auto tok = Tokenizer::from_spm_file(kLlamaModel);
  std::mt19937 rng(9);
  std::vector<std::string> texts = {"\xff\xfe", "a\x80" "b", "\xc3", "\xe2\x82", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                                    std::string("nul\0inside", 10), "\xc0\xaf"};
  for (int i = 0; i < 50; ++i) {
    std::string random(size_t(rng() % 64), '\0');
    for (char& c : random) c = char(rng());
    texts.push_back(random);
  }
  for (const std::string& text : texts) {
    const std::vector<int32_t> ids = tok->encode(text, true);
    kvdesk::Utf8Stream stream;
    std::string printed;
    for (const int32_t id : ids) {
      CHECK((id >= 0 && id < tok->vocab_size()));
      printed += stream.push(tok->token_bytes(id));
    }
    printed += stream.flush();
    CHECK(kvdesk::is_valid_utf8(printed));
  }
}

TEST_CASE("A ModelProto serialized from tokenizer.model's pieces encodes like the file", "[engine][tokenizer]") {
  const auto file = load_processor(kLlamaModel);
  sentencepiece::SentencePieceProcessor built;
  const auto status = built.LoadFromSerializedProto(kvdesk::serialize_spm_model_proto(pieces_via_api(*file), 2, true, true));
  INFO(status.ToString());
  REQUIRE(status.ok());
  CHECK(built.GetPieceSize() == file->GetPieceSize());
  CHECK(built.unk_id() == file->unk_id());
  CHECK(built.bos_id() == file->bos_id());
  CHECK(built.eos_id() == file->eos_id());
  CHECK(built.pad_id() == file->pad_id());
  std::vector<std::string> texts = kTrickyLines;
  texts.insert(texts.end(), kTrickyMultiline.begin(), kTrickyMultiline.end());
  for (const std::string& text : texts) {
    INFO("text: \"" << text << "\"");
    CHECK(library_encode(built, text) == library_encode(*file, text));
  }
}

TEST_CASE("parse_spm_model_pieces reads back what the serializer wrote, types included", "[engine][tokenizer]") {
  const std::vector<SpmPiece> pieces = {{"<unk>", 0, 2}, {"<s>", 0, 3},      {"</s>", 0, 3},
                                        {"<tool>", 0, 4}, {"<0x41>", 0, 6}, {"\xE2\x96\x81x", -1.5f, 1},
                                        {"old", -1e9f, 5}};
  const std::vector<SpmPiece> back = kvdesk::parse_spm_model_pieces(kvdesk::serialize_spm_model_proto(pieces, 2, true, false));
  REQUIRE(back.size() == pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    CHECK(back[i].piece == pieces[i].piece);
    CHECK(back[i].score == pieces[i].score);
    CHECK(back[i].type == pieces[i].type);
  }
}

TEST_CASE("parse_spm_model_pieces rejects truncated protobuf", "[engine][tokenizer]") {
  const std::string bytes = kvdesk::serialize_spm_model_proto({{"<unk>", 0, 2}, {"hello", -1, 1}}, 2, false, true);
  CHECK_THROWS_AS(kvdesk::parse_spm_model_pieces(bytes.substr(0, 12)), Error);
  CHECK_THROWS_AS(kvdesk::parse_spm_model_pieces("\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF"), Error);
}

TEST_CASE("parse_spm_model_pieces survives corrupted bytes: pieces or an Error, nothing else", "[engine][tokenizer]") {
  const std::string good = kvdesk::serialize_spm_model_proto({{"<unk>", 0, 2}, {"<s>", 0, 3}, {"hi", -1, 1}}, 2, false, true);
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    std::string bytes = good.substr(0, std::uniform_int_distribution<size_t>(0, good.size())(rng));
    for (int flips = 0; flips < 3 && !bytes.empty(); ++flips) {
      bytes[std::uniform_int_distribution<size_t>(0, bytes.size() - 1)(rng)] = static_cast<char>(rng());
    }
    try {
      kvdesk::parse_spm_model_pieces(bytes);
    } catch (const Error&) {
    }
  }
}

TEST_CASE("A missing or garbage .model file gives an error naming the path", "[engine][tokenizer]") {
  const std::string missing = "/nonexistent/kvdesk/tokenizer.model";
  CHECK_THROWS_WITH(Tokenizer::from_spm_file(missing), Contains(missing));
  const TempFile garbage("garbage.model", "this is not a protobuf \xFF\xFF\xFF");
  CHECK_THROWS_WITH(Tokenizer::from_spm_file(garbage.path.string()), Contains(garbage.path.string()));
}

TEST_CASE("The stories260K GGUF tokenizer gives the reference prompt ids", "[engine][tokenizer]") {
  const nlohmann::json ref = stories_reference();
  const auto tok = Tokenizer::from_gguf(*GgufFile::open(kStoriesGguf));
  CHECK(tok->vocab_size() == 512);
  CHECK(tok->bos_id() == 1);
  CHECK(tok->eos_id() == 2);
  CHECK(tok->add_bos_default());
  CHECK(tok->encode(ref.at("prompt").get<std::string>(), true) == ref.at("prompt_ids").get<std::vector<int32_t>>());
  CHECK(tok->encode("Once upon a time", true) == std::vector<int32_t>{1, 403, 407, 261, 378});
}

TEST_CASE("Streaming the stories260K reference ids reproduces the reference text", "[engine][tokenizer]") {
  const nlohmann::json ref = stories_reference();
  const auto tok = Tokenizer::from_gguf(*GgufFile::open(kStoriesGguf));
  kvdesk::Utf8Stream stream;
  std::string text;
  for (const int32_t id : ref.at("generated_ids").get<std::vector<int32_t>>()) text += stream.push(tok->token_bytes(id));
  text += stream.flush();
  CHECK(text == ref.at("text").get<std::string>());
  const auto pieces = ref.at("generated_pieces").get<std::vector<std::string>>();
  const auto ids = ref.at("generated_ids").get<std::vector<int32_t>>();
  for (size_t i = 0; i < ids.size(); ++i) CHECK(tok->token_bytes(ids[i]) == pieces[i]);
}

TEST_CASE("A GGUF vocabulary without byte pieces uses its merges, <unk> and add_bos_token", "[engine][tokenizer]") {
  const auto tok = VocabGguf{}.load();
  CHECK(tok->vocab_size() == 9);
  CHECK_FALSE(tok->add_bos_default());
  CHECK(tok->encode("ab", false) == std::vector<int32_t>{8});
  CHECK(tok->encode("ab a", true) == std::vector<int32_t>{1, 8, 6});
  CHECK(tok->encode("c", false) == std::vector<int32_t>{3, 0});
  CHECK(tok->token_bytes(0) == "<unk>");
}

TEST_CASE("Padding tokens typed unknown load and never come out of text", "[engine][tokenizer]") {
  // Converters pad a vocabulary with "[PADn]" entries typed unknown (Phi-3 has 53); the
  // library accepts one unknown piece, so the others must never match instead of failing.
  VocabGguf padded;
  for (const char* pad : {"[PAD9]", "[PAD10]", "[PAD11]"}) {
    padded.tokens.push_back(pad);
    padded.scores.push_back(-10000);
    padded.types.push_back(2);
  }
  const auto tok = padded.load();
  CHECK(tok->vocab_size() == 12);
  CHECK(tok->encode("ab a", false) == std::vector<int32_t>{8, 6});
  CHECK(tok->encode("c", false) == std::vector<int32_t>{3, 0});   // <unk> stays the unknown token
  for (const int32_t id : tok->encode("[PAD9] [PAD10]", false)) CHECK(id < 9);
  CHECK(tok->kind(10) == TokenKind::Unknown);
}

TEST_CASE("A <unk> typed control is the unknown token when unknown_token_id names it", "[engine][tokenizer]") {
  // Phi-3's vocabulary types <unk> control and </s> user defined.
  VocabGguf phi3_like;
  phi3_like.types[0] = 3;
  phi3_like.types[2] = 4;
  phi3_like.unk = 0;
  const auto tok = phi3_like.load();
  CHECK(tok->encode("c", false) == std::vector<int32_t>{3, 0});
  CHECK(tok->kind(0) == TokenKind::Control);
  // A user-defined piece matches in text, as in the family's own tokenizer.
  CHECK(tok->encode("</s>", false) == std::vector<int32_t>{3, 2});
}

TEST_CASE("Broken GGUF vocabularies are rejected with the offending key", "[engine][tokenizer]") {
  VocabGguf bert;
  bert.model = "bert";
  CHECK_THROWS_WITH(bert.load(), Contains("unsupported tokenizer model 'bert'"));

  VocabGguf short_scores;
  short_scores.scores.pop_back();
  CHECK_THROWS_WITH(short_scores.load(), Contains("tokenizer.ggml.scores"));

  VocabGguf short_types;
  short_types.types.pop_back();
  CHECK_THROWS_WITH(short_types.load(), Contains("tokenizer.ggml.token_type"));

  VocabGguf bad_type;
  bad_type.types[4] = 9;
  CHECK_THROWS_WITH(bad_type.load(), Contains("tokenizer.ggml.token_type[4]"));

  VocabGguf no_unknown;
  no_unknown.types[0] = 1;
  CHECK_THROWS_WITH(no_unknown.load(), Contains("tokenizer.ggml.token_type") && Contains("unknown"));

  VocabGguf bos_out_of_range;
  bos_out_of_range.bos = 9;
  CHECK_THROWS_WITH(bos_out_of_range.load(), Contains("tokenizer.ggml.bos_token_id"));

  VocabGguf duplicate;
  duplicate.tokens[5] = "a";
  CHECK_THROWS_WITH(duplicate.load(), Contains("already defined"));

  VocabGguf nan_score;
  nan_score.scores[4] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(nan_score.load(), Contains("tokenizer.ggml.scores[4]"));
}
