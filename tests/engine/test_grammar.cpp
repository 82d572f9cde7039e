// Constrained decoding (engine/grammar): GBNF parsing and its errors, the byte-level matcher
// on literals, classes, UTF-8 and repetitions, lazy triggers, the mask against a direct check
// and with its caches off, and JSON schemas: outputs drawn by a random "model" that picks any
// allowed token of the Llama 2 vocabulary always parse and validate. A hand-run benchmark
// ("[.grammar_bench]") prints the mask's cost.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/grammar/gbnf.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/json_schema.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/test_support.h"

using Catch::Matchers::Contains;
using kvdesk::grammar::GrammarMatcher;
using kvdesk::grammar::parse_gbnf;
using kvdesk::grammar::TokenTable;
using json = nlohmann::ordered_json;

namespace {

constexpr int32_t kByteEnd = 256;   // the end-of-generation token of byte_table()

// 256 one-byte tokens and an end-of-generation token that prints nothing.
std::shared_ptr<const TokenTable> byte_table() {
  static const auto table = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, char(b)));
    bytes.push_back("");
    return std::make_shared<const TokenTable>(bytes, std::vector<int32_t>{kByteEnd});
  }();
  return table;
}

std::shared_ptr<const TokenTable> table_of(const kvdesk::Tokenizer& tokenizer) {
  std::vector<std::string> bytes;
  std::vector<int32_t> ends;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    bytes.push_back(tokenizer.token_bytes(id));
    if (tokenizer.is_end_of_generation(id)) ends.push_back(id);
  }
  return std::make_shared<const TokenTable>(bytes, ends);
}

std::shared_ptr<const TokenTable> llama_table() {
  static const auto table = table_of(*kvdesk::Tokenizer::from_spm_file(kvdesk::test::model_path("tokenizer.model")));
  return table;
}

std::shared_ptr<const TokenTable> stories_table() {
  static const auto table =
      table_of(*kvdesk::Tokenizer::from_gguf(*kvdesk::GgufFile::open(kvdesk::test::model_path("stories260K.gguf"))));
  return table;
}

// Whether the whole text matches: every byte accepted and the grammar can end after it.
bool matches(const std::string& grammar, const std::string& text) {
  GrammarMatcher matcher(parse_gbnf(grammar), byte_table());
  try {
    matcher.accept_bytes(text);
  } catch (const kvdesk::Error&) {
    return false;
  }
  return matcher.can_end();
}

std::vector<int32_t> allowed_tokens(const GrammarMatcher& matcher, int32_t vocab) {
  std::vector<float> logits(size_t(vocab), 0.0f);
  matcher.apply_mask(logits.data());
  std::vector<int32_t> allowed;
  for (int32_t t = 0; t < vocab; ++t) {
    if (logits[size_t(t)] == 0.0f) allowed.push_back(t);
  }
  return allowed;
}

// A random "model": any allowed token, more and more often one that closes something (or
// ends) as the output grows, so that nested values finish. Returns the text it printed.
std::string random_generation(const std::shared_ptr<const kvdesk::grammar::Grammar>& grammar,
                              const std::shared_ptr<const TokenTable>& table, std::mt19937& rng) {
  GrammarMatcher matcher(grammar, table);
  std::string out;
  for (int step = 0; step < 4000 && !matcher.must_end(); ++step) {
    const std::vector<int32_t> allowed = allowed_tokens(matcher, table->vocab_size());
    REQUIRE(!allowed.empty());
    std::vector<int32_t> closing;
    for (int32_t t : allowed) {
      const std::string& bytes = table->bytes(t);
      if (table->is_end_of_generation(t) || bytes.find_first_of("\"]}") != std::string::npos) closing.push_back(t);
    }
    const bool finish = std::uniform_real_distribution<double>(0, 1)(rng) < std::min(0.95, step / 100.0);
    const std::vector<int32_t>& pool = finish && !closing.empty() ? closing : allowed;
    const int32_t token = pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)];
    REQUIRE(matcher.allows(token));
    if (table->is_end_of_generation(token)) break;
    matcher.accept(token);
    out += table->bytes(token);
  }
  REQUIRE(matcher.can_end());
  return out;
}

bool has_type(const json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "integer") return v.is_number_integer();
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  return type == "null" && v.is_null();
}

size_t code_point_count(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (uint8_t(c) & 0xC0) != 0x80;
  return n;
}

bool has_format(const std::string& s, const std::string& format) {
  static const std::string date = R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]))";
  static const std::string time = R"(([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{3})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))";
  if (format == "date") return std::regex_match(s, std::regex(date));
  if (format == "time") return std::regex_match(s, std::regex(time));
  if (format == "date-time") return std::regex_match(s, std::regex(date + "T" + time));
  return std::regex_match(s, std::regex("[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"));
}

// A validator for the keywords json_schema_gbnf covers.
bool validates(const json& v, const json& s, const json& root) {
  if (s.is_boolean()) return s.get<bool>();
  if (s.contains("$ref")) {
    const std::string ref = s["$ref"];
    return validates(v, ref == "#" ? root : root.at(json::json_pointer(ref.substr(1))), root);
  }
  const auto count_valid = [&](const json& list) {
    return std::count_if(list.begin(), list.end(), [&](const json& sub) { return validates(v, sub, root); });
  };
  if (s.contains("anyOf") && count_valid(s["anyOf"]) == 0) return false;
  if (s.contains("oneOf") && count_valid(s["oneOf"]) != 1) return false;
  if (s.contains("allOf") && count_valid(s["allOf"]) != std::ptrdiff_t(s["allOf"].size())) return false;
  if (s.contains("const") && v != s["const"]) return false;
  if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end()) return false;
  if (s.contains("type")) {
    const json types = s["type"].is_array() ? s["type"] : json::array({s["type"]});
    if (std::none_of(types.begin(), types.end(), [&](const json& t) { return has_type(v, t); })) return false;
  }
  if (v.is_object()) {
    const json properties = s.value("properties", json::object());
    for (const auto& item : v.items()) {
      const json& sub = properties.contains(item.key()) ? properties[item.key()] : s.value("additionalProperties", json(true));
      if (!validates(item.value(), sub, root)) return false;
    }
    for (const json& name : s.value("required", json::array())) {
      if (!v.contains(name.get<std::string>())) return false;
    }
  }
  if (v.is_array()) {
    const json prefix = s.value("prefixItems", json::array());
    for (size_t i = 0; i < v.size(); ++i) {
      const json& sub = i < prefix.size() ? prefix[i] : s.value("items", json(true));
      if (!validates(v[i], sub, root)) return false;
    }
    if (v.size() < s.value("minItems", size_t{0}) || v.size() > s.value("maxItems", SIZE_MAX)) return false;
  }
  if (v.is_string()) {
    const size_t length = code_point_count(v.get<std::string>());
    if (length < s.value("minLength", size_t{0}) || length > s.value("maxLength", SIZE_MAX)) return false;
    if (s.contains("format") && !has_format(v.get<std::string>(), s["format"])) return false;
  }
  if (v.is_number()) {
    const double x = v.get<double>();
    if (s.contains("minimum") && x < s["minimum"].get<double>()) return false;
    if (s.contains("maximum") && x > s["maximum"].get<double>()) return false;
    if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>()) return false;
    if (s.contains("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>()) return false;
  }
  return true;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const kvdesk::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("GBNF syntax errors name the line and column", "[grammar]") {
  CHECK(error_of([] { parse_gbnf("root ::= \"a\"\nitem ::= missing"); }) == "grammar line 2, column 10: undefined rule 'missing'");
  CHECK(error_of([] { parse_gbnf("item ::= \"a\""); }) == "grammar line 1, column 1: no rule 'root'");
  CHECK(error_of([] { parse_gbnf("root ::= \"a\" \"b"); }) == "grammar line 1, column 14: unterminated string literal");
  CHECK(error_of([] { parse_gbnf("root ::= [a-z"); }) == "grammar line 1, column 10: unterminated character class");
  CHECK(error_of([] { parse_gbnf("root ::= \"\\q\""); }) == "grammar line 1, column 11: unknown escape '\\q'");
  CHECK(error_of([] { parse_gbnf("root ::= (\"a\""); }) == "grammar line 1, column 14: expected ')'");
  CHECK(error_of([] { parse_gbnf("root = \"a\""); }) == "grammar line 1, column 6: expected '::=' after rule name 'root'");
  CHECK(error_of([] { parse_gbnf("root ::= *"); }) == "grammar line 1, column 10: a repetition needs something before it");
  CHECK(error_of([] { parse_gbnf("root ::= \"a\"\nroot ::= \"b\""); }) == "grammar line 2, column 1: rule 'root' is defined twice");
  CHECK(error_of([] { parse_gbnf("root ::= \"a\"{3,2}"); }) == "grammar line 1, column 13: repetition maximum is below its minimum");
  CHECK(error_of([] { parse_gbnf("root ::= [z-a]"); }) == "grammar line 1, column 14: character range is backwards");
  CHECK_THAT(error_of([] { parse_gbnf("root ::= \"a\"", "start"); }), Contains("no rule 'start'"));
}

TEST_CASE("GBNF refuses left recursion, dead rules and hostile sizes", "[grammar]") {
  CHECK(error_of([] { parse_gbnf("root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\""); }) ==
        "grammar line 2, column 1: rule 'expr' is left-recursive (it can reach itself before reading a character)");
  CHECK_THAT(error_of([] { parse_gbnf("root ::= opt root \"x\" | \"y\"\nopt ::= \"a\" |"); }), Contains("rule 'root' is left-recursive"));
  CHECK_THAT(error_of([] { parse_gbnf("root ::= (\"a\"?)* \"b\""); }), Contains("rule 'root' is left-recursive"));
  CHECK_THAT(error_of([] { parse_gbnf("root ::= \"[\" root \"]\""); }), Contains("rule 'root' can match no finite text"));
  CHECK_THAT(error_of([] { parse_gbnf("root ::= \"a\"{10001}"); }), Contains("repetition count over 10000"));
  CHECK_THAT(error_of([] { parse_gbnf("root ::= " + std::string(201, '(') + "\"a\"" + std::string(201, ')')); }),
             Contains("groups nested deeper than 200"));
  CHECK_THAT(error_of([] { parse_gbnf("root ::= \"" + std::string(size_t(1) << 20, 'a') + "\""); }), Contains("over 1 MiB"));
  CHECK_THAT(error_of([] { parse_gbnf("root ::= (((\"a\"{0,5000}){0,5000}){0,5000})"); }), Contains("more than 10000 rules"));
  // A dead alternative is dropped, the rest still matches.
  CHECK(matches("root ::= \"a\" | loop\nloop ::= \"(\" loop \")\"", "a"));
}

TEST_CASE("GBNF matcher accepts exactly the language", "[grammar]") {
  const std::string chess = R"(# a comment line
root ::= move (" " move)*   # moves separated by spaces
move ::= piece? [a-h] [1-8] ("+" | "#")?
piece ::= [KQRBN])";
  CHECK(matches(chess, "e4"));
  CHECK(matches(chess, "e4 Nf3 Bb5+"));
  CHECK_FALSE(matches(chess, "e9"));
  CHECK_FALSE(matches(chess, "e4 "));
  CHECK_FALSE(matches(chess, ""));
  CHECK(matches("root ::= [^\"\\\\]* \"!\"", "hello \xC3\xA9!"));
  CHECK_FALSE(matches("root ::= [^\"\\\\]* \"!\"", "say \"hi\"!"));
  CHECK(matches("root ::= . . .", "a\n\xE2\x82\xAC"));
  CHECK(matches("root ::= \"\\x41\\u00e9\\U0001F600\\t\\\\\\\"\"", "A\xC3\xA9\xF0\x9F\x98\x80\t\\\""));
  CHECK(matches("root ::= (\n  \"a\"\n  | \"b\"\n)+", "abba"));
  CHECK(matches("root ::= | \"x\"", ""));
}

TEST_CASE("GBNF repetition bounds are exact", "[grammar]") {
  const std::string g = "root ::= [0-9]{2,4} \"x\"{3} (\"ab\"){0,2} [a]{1,}";
  CHECK(matches(g, "12xxxa"));
  CHECK(matches(g, "1234xxxababaaaa"));
  CHECK_FALSE(matches(g, "1xxxa"));
  CHECK_FALSE(matches(g, "12345xxxa"));
  CHECK_FALSE(matches(g, "12xxa"));
  CHECK_FALSE(matches(g, "12xxxabababa"));
  CHECK_FALSE(matches(g, "12xxx"));
  CHECK(matches("root ::= \"a\"{0}", ""));
}

TEST_CASE("GBNF classes match whole UTF-8 characters byte by byte", "[grammar]") {
  const std::string korean = "root ::= [가-힣]+";
  CHECK(matches(korean, "한국어"));
  CHECK_FALSE(matches(korean, "abc"));
  CHECK_FALSE(matches(korean, "\xE3\x81\x82"));   // あ
  CHECK(matches("root ::= [😀-🙏]+", "😀🙏"));
  CHECK_FALSE(matches("root ::= [😀-🙏]+", "🚀"));
  CHECK(matches("root ::= [^a]", "\xF0\x9F\x9A\x80"));
  CHECK_FALSE(matches("root ::= [^a]", "\xED\xA0\x80"));   // a surrogate is not a character

  // A character split across tokens: the first two bytes leave the matcher mid-character.
  GrammarMatcher matcher(parse_gbnf(korean), byte_table());
  matcher.accept_bytes("\xED\x95");
  CHECK_FALSE(matcher.can_end());
  CHECK_FALSE(matcher.allows('a'));
  CHECK(matcher.allows(0x9C));
  CHECK_FALSE(matcher.allows(0xC0));
  matcher.accept(0x9C);
  CHECK(matcher.can_end());
  CHECK(matcher.allows(kByteEnd));
}

TEST_CASE("GrammarMatcher masks, accepts and ends", "[grammar]") {
  const std::vector<std::string> bytes = {"ab", "a", "b", "abc", "", "c", "x", ""};
  const auto table = std::make_shared<const TokenTable>(bytes, std::vector<int32_t>{7});
  GrammarMatcher matcher(parse_gbnf("root ::= \"ab\" \"c\"?"), table);
  std::vector<float> logits(bytes.size(), 1.0f);
  matcher.apply_mask(logits.data());
  CHECK(logits == std::vector<float>{1, 1, -INFINITY, 1, -INFINITY, -INFINITY, -INFINITY, -INFINITY});
  CHECK_THAT(error_of([&] { matcher.accept(6); }), Contains("does not allow \"x\""));
  CHECK_THAT(error_of([&] { matcher.accept(4); }), Contains("prints nothing"));
  matcher.accept(1);
  CHECK_FALSE(matcher.can_end());
  matcher.accept(2);
  CHECK(matcher.can_end());
  CHECK_FALSE(matcher.must_end());
  CHECK(matcher.allows(7));
  matcher.accept(5);
  CHECK(matcher.must_end());
  CHECK(allowed_tokens(matcher, table->vocab_size()) == std::vector<int32_t>{7});
  matcher.accept(7);
}

TEST_CASE("GrammarMatcher refuses a grammar too ambiguous to follow", "[grammar]") {
  GrammarMatcher matcher(parse_gbnf("root ::= item*\nitem ::= \"a\" | \"a\" item \"b\""), byte_table());
  const auto start = std::chrono::steady_clock::now();
  CHECK_THAT(error_of([&] { matcher.accept_bytes(std::string(6000, 'a')); }), Contains("grammar too ambiguous"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
}

TEST_CASE("A lazy grammar starts at its trigger, across token borders", "[grammar]") {
  const std::vector<std::string> bytes = {"Sure", " <to", "ol>", "{\"a\"", "}", "<tool>{", "x", "", "ok <tool>{}"};
  const auto table = std::make_shared<const TokenTable>(bytes, std::vector<int32_t>{7});
  const auto grammar = parse_gbnf("root ::= \"<tool>\" \"{\" [\"a]* \"}\"");

  GrammarMatcher matcher(grammar, table, {"<tool>"});
  std::vector<float> logits(bytes.size(), 0.0f);
  matcher.apply_mask(logits.data());
  CHECK(std::all_of(logits.begin(), logits.end(), [](float l) { return l == 0.0f; }));
  matcher.accept(0);
  matcher.accept(1);
  CHECK_FALSE(matcher.triggered());
  matcher.accept(2);
  CHECK(matcher.triggered());
  CHECK_FALSE(matcher.can_end());
  CHECK(allowed_tokens(matcher, table->vocab_size()) == std::vector<int32_t>{3});
  matcher.accept(3);
  matcher.accept(4);
  CHECK(matcher.must_end());

  // The trigger in the middle of one token: the grammar gets the token's bytes from it on.
  GrammarMatcher inside(grammar, table, {"<tool>"});
  inside.accept(8);
  CHECK(inside.triggered());
  CHECK(inside.must_end());

  // Bytes after the trigger that the grammar refuses: an error, and still untriggered.
  GrammarMatcher refused(parse_gbnf("root ::= \"<tool>[\""), table, {"<tool>"});
  CHECK_THAT(error_of([&] { refused.accept(5); }), Contains("does not allow"));
  CHECK_FALSE(refused.triggered());
}

TEST_CASE("The memoized mask equals a fresh walk and the per-token check", "[grammar]") {
  const auto table = llama_table();
  const auto grammar = parse_gbnf(kvdesk::grammar::json_object_gbnf());
  GrammarMatcher cached(grammar, table), fresh(grammar, table);
  fresh.set_memoize(false);
  std::mt19937 rng(7);
  for (int step = 0; step < 60 && !cached.must_end(); ++step) {
    const std::vector<int32_t> allowed = allowed_tokens(cached, table->vocab_size());
    REQUIRE(allowed == allowed_tokens(fresh, table->vocab_size()));
    for (int k = 0; k < 200; ++k) {
      const int32_t t = std::uniform_int_distribution<int32_t>(0, table->vocab_size() - 1)(rng);
      REQUIRE(cached.allows(t) == std::binary_search(allowed.begin(), allowed.end(), t));
    }
    const int32_t token = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
    if (table->is_end_of_generation(token)) break;
    cached.accept(token);
    fresh.accept(token);
  }
}

TEST_CASE("A matcher started from a finished one's tables masks as a fresh one", "[grammar]") {
  const auto table = llama_table();
  const auto grammar = parse_gbnf(kvdesk::grammar::json_object_gbnf());
  std::mt19937 rng(11);
  GrammarMatcher::Tables tables;
  for (int run = 0; run < 3; ++run) {
    // The same rules parsed again (another Grammar object) take the tables; a warm run meets
    // states the one before computed.
    GrammarMatcher warm(parse_gbnf(kvdesk::grammar::json_object_gbnf()), table), fresh(grammar, table);
    warm.reuse_tables(std::move(tables));
    fresh.set_memoize(false);
    for (int step = 0; step < 40 && !warm.must_end(); ++step) {
      if (step == 0) CHECK_FALSE(warm.mask_known());   // inherited masks are not this matcher's own
      const std::vector<int32_t> allowed = allowed_tokens(warm, table->vocab_size());
      REQUIRE(allowed == allowed_tokens(fresh, table->vocab_size()));
      CHECK(warm.mask_known());
      const int32_t token = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
      if (table->is_end_of_generation(token)) break;
      warm.accept(token);
      fresh.accept(token);
    }
    tables = warm.take_tables();
    REQUIRE(tables.sets != nullptr);
  }
  // Tables over another vocabulary are ignored (their masks would be another vocabulary's bits).
  GrammarMatcher::Tables elsewhere;
  {
    GrammarMatcher bytes(grammar, byte_table());
    allowed_tokens(bytes, byte_table()->vocab_size());
    elsewhere = bytes.take_tables();
  }
  GrammarMatcher own(grammar, table), own_fresh(grammar, table);
  own.reuse_tables(std::move(elsewhere));
  CHECK(allowed_tokens(own, table->vocab_size()) == allowed_tokens(own_fresh, table->vocab_size()));
  // Tables of other rules are ignored: the matcher starts from nothing and masks its own language.
  GrammarMatcher other(parse_gbnf("root ::= \"[\" [0-9]* \"]\""), table);
  other.reuse_tables(std::move(tables));
  GrammarMatcher other_fresh(parse_gbnf("root ::= \"[\" [0-9]* \"]\""), table);
  CHECK(allowed_tokens(other, table->vocab_size()) == allowed_tokens(other_fresh, table->vocab_size()));
}

TEST_CASE("A matcher keeps its place and its masks through the tables' compaction", "[grammar]") {
  // Nested parentheses 300,000 deep: each depth a state of its own, past the recognizer's budget
  // of sets, so the tables are compacted on the way in and on the way out.
  const auto grammar = parse_gbnf("root ::= \"(\" root \")\" | \"x\"");
  const auto table = byte_table();
  GrammarMatcher matcher(grammar, table), fresh(grammar, table);
  fresh.set_memoize(false);
  constexpr int kDepth = 300'000;
  auto step = [&](int i, char byte) {
    if (i % 60'000 == 0) {
      REQUIRE(allowed_tokens(matcher, table->vocab_size()) == allowed_tokens(fresh, table->vocab_size()));
      CHECK(matcher.mask_known());
    }
    matcher.accept(uint8_t(byte));
    fresh.accept(uint8_t(byte));
  };
  for (int i = 0; i < kDepth; ++i) step(i, '(');
  CHECK(allowed_tokens(matcher, table->vocab_size()) == std::vector<int32_t>{'(', 'x'});
  matcher.accept('x');
  fresh.accept('x');
  for (int i = 0; i < kDepth; ++i) step(i, ')');
  CHECK(matcher.must_end());
  CHECK(matcher.can_end());
}

TEST_CASE("Compaction stays bounded when the masked states alone are many stacks", "[grammar]") {
  // Every depth's set holds 301 stacks (300 alternatives of x start with the same byte), so the
  // states whose masks were asked for fill the recognizer's budget by themselves: compaction
  // must drop what it can and go on, not compact again at every step.
  std::string x = "x ::= \"a0\"";
  for (int i = 1; i < 300; ++i) x += " | \"a" + std::to_string(i) + "\"";
  const auto grammar = parse_gbnf("root ::= \"(\" root \")\" | x\n" + x);
  const auto table = byte_table();
  GrammarMatcher matcher(grammar, table);
  for (int depth = 0; depth < 6000; ++depth) {
    REQUIRE(allowed_tokens(matcher, table->vocab_size()) == std::vector<int32_t>{'(', 'a'});
    matcher.accept('(');
  }
  for (const char byte : std::string("a299")) matcher.accept(uint8_t(byte));
  CHECK(allowed_tokens(matcher, table->vocab_size()) == std::vector<int32_t>{')'});
}

TEST_CASE("JSON schema outputs of a random model always parse and validate", "[grammar]") {
  const std::vector<json> schemas = {
      json::parse(R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 150}}, "required": ["name", "age"], "additionalProperties": false})"),
      json::parse(R"({"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "null"}, "c": {"type": "number"}}, "additionalProperties": false})"),
      json::parse(R"({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]})"),
      json::parse(R"({"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": {"type": "integer", "exclusiveMinimum": -5, "exclusiveMaximum": 1234}})"),
      json::parse(R"({"type": "array", "items": {"type": "string", "minLength": 2, "maxLength": 5}, "minItems": 1, "maxItems": 3})"),
      json::parse(R"({"type": "array", "prefixItems": [{"type": "integer"}, {"enum": ["x", 2, null, {"k": [1]}]}], "items": false})"),
      json::parse(R"({"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}, "day": {"type": "string", "format": "date"}, "at": {"type": "string", "format": "time"}, "id": {"type": "string", "format": "uuid"}}, "required": ["when", "day", "at", "id"]})"),
      json::parse(R"({"type": ["string", "null", "integer"], "minimum": -20, "maximum": 99999})"),
      json::parse(R"({"anyOf": [{"type": "integer", "minimum": 10, "maximum": 99}, {"const": "none"}]})"),
      json::parse(R"({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}, {"properties": {"b": {"type": "string", "maxLength": 3}}, "required": ["b"]}]})"),
      json::parse(R"({"allOf": [{"properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}}, "additionalProperties": false}, {"properties": {"a": {"type": "integer"}, "c": {"type": "null"}}, "required": ["a"]}]})"),
      json::parse(R"({"$defs": {"node": {"type": "object", "properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}}, "required": ["value"], "additionalProperties": false}}, "$ref": "#/$defs/node"})"),
      json::parse(R"({"definitions": {"name": {"type": "string", "maxLength": 8}}, "type": "object", "properties": {"first": {"$ref": "#/definitions/name"}, "tags": {"type": "array", "items": {"enum": ["a", "b\"c", "한"]}}}, "required": ["first"]})"),
      json::parse(R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": -1000000000000, "maximum": -7}, "m": {"type": "integer", "minimum": 3}}, "required": ["n", "m"], "additionalProperties": false})"),
      json::parse(R"({"type": "object"})"),
      json::parse(R"({"oneOf": [{"type": "object", "properties": {"k": {"const": 1}}, "required": ["k"], "additionalProperties": false}, {"type": "array", "maxItems": 0}]})"),
  };
  const auto table = llama_table();
  std::mt19937 rng(1234);
  for (const json& schema : schemas) {
    INFO("schema: " << schema.dump());
    const std::string text = kvdesk::grammar::json_schema_gbnf(schema);
    INFO("grammar:\n" << text);
    const auto grammar = parse_gbnf(text);
    for (int sample = 0; sample < 4; ++sample) {
      const std::string out = random_generation(grammar, table, rng);
      INFO("output: " << out);
      json value;
      REQUIRE_NOTHROW(value = json::parse(out));
      CHECK(validates(value, schema, schema));
    }
  }
}

TEST_CASE("JSON schema grammars accept and refuse by hand", "[grammar]") {
  const auto accepts = [](const char* schema, const std::string& text) {
    return matches(kvdesk::grammar::json_schema_gbnf(json::parse(schema)), text);
  };
  const char* range = R"({"type": "integer", "minimum": -12, "maximum": 345})";
  for (int i = -12; i <= 345; ++i) CHECK(accepts(range, std::to_string(i)));
  for (int i : {-13, -100, 346, 999, 1000}) CHECK_FALSE(accepts(range, std::to_string(i)));
  CHECK_FALSE(accepts(range, "007"));
  CHECK_FALSE(accepts(range, "-0"));
  const char* names = R"({"type": "object", "properties": {"ab": {"type": "integer"}}, "additionalProperties": {"type": "string"}})";
  CHECK(accepts(names, R"({"ab": 1, "a": "x", "abc": "y", "b": "z"})"));
  CHECK_FALSE(accepts(names, R"({"ab": 1, "ab": "x"})"));
  CHECK(accepts(R"({"type": "string"})", "\"tab\\t \\u00e9 \xED\x95\x9C\""));
  CHECK_FALSE(accepts(R"({"type": "string"})", "\"raw\ncontrol\""));
  CHECK(accepts(R"({"type": "boolean"})", "true\n    "));
  CHECK_FALSE(accepts(R"({"type": "boolean"})", "true\n" + std::string(21, ' ')));
  CHECK_FALSE(accepts(R"({"type": "boolean"})", "true \n"));
  // Two schemas' grammars concatenate without a clash.
  const std::string both = kvdesk::grammar::json_schema_gbnf(json::parse(names), "first") +
                           kvdesk::grammar::json_schema_gbnf(json::parse(range), "second") + "root ::= first | second\n";
  CHECK(matches(both, "-12"));
  CHECK(matches(both, "{}"));
}

TEST_CASE("JSON schema refusals name the keyword and place", "[grammar]") {
  const auto refusal = [](const char* schema) {
    return error_of([&] { kvdesk::grammar::json_schema_gbnf(json::parse(schema)); });
  };
  CHECK(refusal(R"({"type": "object", "properties": {"a": {"type": "string", "pattern": "^a+$"}}})") ==
        "unsupported JSON schema keyword 'pattern' at #/properties/a");
  CHECK_THAT(refusal(R"({"type": "string", "format": "email"})"), Contains("keyword 'format' at #"));
  CHECK_THAT(refusal(R"({"type": "number", "minimum": 0.5})"), Contains("keyword 'minimum' at #"));
  CHECK_THAT(refusal(R"({"type": "integer", "multipleOf": 3})"), Contains("keyword 'multipleOf' at #"));
  CHECK_THAT(refusal(R"({"items": {"uniqueItems": true}})"), Contains("keyword 'uniqueItems' at #/items"));
  CHECK_THAT(refusal(R"({"allOf": [{"type": "string"}]})"), Contains("keyword 'allOf' at #"));
  CHECK_THAT(refusal(R"({"$ref": "https://example.com/s.json"})"), Contains("keyword '$ref' at #"));
  CHECK_THAT(refusal(R"({"$ref": "#/$defs/missing"})"), Contains("does not resolve"));
  CHECK_THAT(refusal(R"({"type": "integer", "minimum": 5, "maximum": 4})"), Contains("allows no integer"));
  CHECK_THAT(refusal(R"({"type": "array", "maxItems": 20000})"), Contains("over 10000"));
}

TEST_CASE("Hostile JSON schemas are refused or bounded quickly", "[grammar]") {
  const auto start = std::chrono::steady_clock::now();
  json deep = {{"type", "integer"}};
  for (int i = 0; i < 100; ++i) deep = {{"type", "array"}, {"items", deep}};
  CHECK_THAT(error_of([&] { kvdesk::grammar::json_schema_gbnf(deep); }), Contains("nested deeper than 64"));
  json huge_enum = {{"enum", json::array()}};
  for (int i = 0; i < 10001; ++i) huge_enum["enum"].push_back(i);
  CHECK_THAT(error_of([&] { kvdesk::grammar::json_schema_gbnf(huge_enum); }), Contains("over 10000 values"));
  const json endless = json::parse(R"({"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}, "required": ["next"]}}, "$ref": "#/$defs/n"})");
  CHECK_THAT(error_of([&] { parse_gbnf(kvdesk::grammar::json_schema_gbnf(endless)); }), Contains("can match no finite text"));
  json wide = {{"type", "object"}, {"properties", json::object()}};
  for (int i = 0; i < 3000; ++i) wide["properties"]["p" + std::to_string(i)] = {{"type", "string"}, {"maxLength", 10000}};
  CHECK_THROWS_AS(parse_gbnf(kvdesk::grammar::json_schema_gbnf(wide)), kvdesk::Error);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
}

// Hand-run: build/kvdesk_engine_tests "[.grammar_bench]". The mask's cost per token, with the
// caches and without, along a random walk through a tool-call-like schema.
TEST_CASE("Grammar mask benchmark", "[.grammar_bench]") {
  const json schema = json::parse(R"({"type": "object", "properties": {"location": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}, "days": {"type": "integer", "minimum": 1, "maximum": 14}, "details": {"type": "object"}}, "required": ["location", "unit"], "additionalProperties": false})");
  const auto grammar = parse_gbnf(kvdesk::grammar::json_schema_gbnf(schema));
  for (const auto& [name, table] : {std::pair{"Llama 2 (32000 tokens)", llama_table()}, std::pair{"stories260K (512 tokens)", stories_table()}}) {
    double cached_us = 0, fresh_us = 0, slow_us = 0;
    int masks = 0, slow = 0;   // slow: memoized masks over 100 us, the bitset cache's misses
    std::mt19937 rng(99);
    std::vector<float> logits(size_t(table->vocab_size()));
    for (int run = 0; run < 20; ++run) {
      GrammarMatcher cached(grammar, table), fresh(grammar, table);
      fresh.set_memoize(false);
      for (int step = 0; step < 400 && !cached.must_end(); ++step) {
        std::fill(logits.begin(), logits.end(), 0.0f);
        auto t0 = std::chrono::steady_clock::now();
        cached.apply_mask(logits.data());
        auto t1 = std::chrono::steady_clock::now();
        const double us = std::chrono::duration<double, std::micro>(t1 - t0).count();
        cached_us += us;
        if (us > 100) {
          slow_us += us;
          ++slow;
        }
        std::vector<float> fresh_logits(logits.size(), 0.0f);
        t0 = std::chrono::steady_clock::now();
        fresh.apply_mask(fresh_logits.data());
        t1 = std::chrono::steady_clock::now();
        fresh_us += std::chrono::duration<double, std::micro>(t1 - t0).count();
        ++masks;
        std::vector<int32_t> allowed;
        for (int32_t t = 0; t < table->vocab_size(); ++t) {
          if (logits[size_t(t)] == 0.0f) allowed.push_back(t);
        }
        const int32_t token = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
        if (table->is_end_of_generation(token)) break;
        cached.accept(token);
        fresh.accept(token);
      }
    }
    std::printf("%s: %d masks, memoized %.1f us/mask (%d over 100 us, %.0f us each), without caches %.1f us/mask\n", name,
                masks, cached_us / masks, slow, slow ? slow_us / slow : 0.0, fresh_us / masks);
  }
}
