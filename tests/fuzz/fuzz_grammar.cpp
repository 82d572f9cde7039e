// Fuzz target: constrained decoding on hostile grammars, as an HTTP request could bring them.
// The input is a grammar text, a NUL, then bytes to feed. A text starting with '{' is a JSON
// schema (converted with json_schema_gbnf), anything else GBNF. Parsing and converting may
// refuse with kvdesk::Error; then the bytes go through a matcher (a refused byte is an Error
// too) with masks over a small token table along the way, which must agree with allows().
// A second matcher takes the tables the first left (its masks then looked up, not walked) and
// sees the same bytes; a lazy matcher sees them with a trigger.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/grammar/gbnf.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/json_schema.h"

namespace {

using kvdesk::grammar::GrammarMatcher;
using kvdesk::grammar::TokenTable;

// Single bytes, some multi-byte pieces (a split UTF-8 character among them), an empty
// control token and an end-of-generation token.
std::shared_ptr<const TokenTable> small_table() {
  static const auto table = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, char(b)));
    for (const char* piece : {"{\"", "\":", "\",", "true", "null", " \"", "\xED\x95", "\x9C\xEA", "<tool>", "ab", "abc"}) {
      bytes.push_back(piece);
    }
    bytes.push_back("");
    bytes.push_back("");
    return std::make_shared<const TokenTable>(bytes, std::vector<int32_t>{int32_t(bytes.size() - 1)});
  }();
  return table;
}

std::shared_ptr<const kvdesk::grammar::Grammar> grammar_of(std::string_view text) {
  if (!text.empty() && text[0] == '{') {
    const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(text, nullptr, false);
    if (schema.is_discarded()) return nullptr;
    return kvdesk::grammar::parse_gbnf(kvdesk::grammar::json_schema_gbnf(schema));
  }
  return kvdesk::grammar::parse_gbnf(text);
}

void check_mask(const GrammarMatcher& matcher, const TokenTable& table) {
  std::vector<float> logits(size_t(table.vocab_size()), 0.0f);
  matcher.apply_mask(logits.data());
  for (int32_t t = 0; t < table.vocab_size(); ++t) {
    if ((logits[size_t(t)] == 0.0f) != matcher.allows(t)) std::abort();
  }
}

void run_matcher(GrammarMatcher& matcher, std::string_view bytes, const TokenTable& table) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i < 64 || i % 64 == 0) check_mask(matcher, table);
    matcher.accept_bytes(bytes.substr(i, 1));
  }
  check_mask(matcher, table);
  if (matcher.must_end() && !matcher.can_end()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view text = input.substr(0, nul);
  const std::string_view bytes = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  const auto table = small_table();
  try {
    const auto grammar = grammar_of(text);
    if (!grammar) return 0;
    try {
      GrammarMatcher matcher(grammar, table);
      try {
        run_matcher(matcher, bytes, *table);
      } catch (const kvdesk::Error&) {
      }
      // The same bytes again from the tables the first left: its masks against fresh steps.
      GrammarMatcher warm(grammar, table);
      warm.reuse_tables(matcher.take_tables());
      run_matcher(warm, bytes, *table);
    } catch (const kvdesk::Error&) {
    }
    GrammarMatcher lazy(grammar, table, {"<tool>"});
    run_matcher(lazy, bytes, *table);
  } catch (const kvdesk::Error&) {
  }
  return 0;
}
