// GBNF, llama.cpp's grammar format, compiled into a context-free grammar over BYTES for
// constrained decoding (grammar_matcher.h).
//
// The text: rules `name ::= alternatives`, alternatives separated by `|`, sequences of string
// literals ("..." with \n \t \r \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH), character classes
// ([a-z], negated [^...]), `.` (any character), rule names (letters, digits, '-'), groups
// ( ... ), and the postfix repetitions * + ? {m} {m,} {m,n}. `#` starts a comment; a newline
// ends a rule except inside a group or after `|` (so an empty alternative goes first:
// `x ::= | "a"`).
//
// Why bytes: a token can end in the middle of a UTF-8 character (byte-fallback tokens, BPE
// merges that split a character), so the matcher must step one byte at a time. Each character
// class, a set of code-point ranges, is compiled into alternatives of UTF-8 byte-range
// sequences (utf8_ranges.h, the RE2 technique); a token ending inside a character then just
// leaves the matcher part-way through such a sequence, and the token trie walk of the mask is
// byte by byte with no decoding state. Literals become their UTF-8 bytes.
//
// Everything else compiles to rules too: a group is a rule, x* is `r ::= x r |`, x{m,n} is m
// copies of x then a chain of n-m nested optional rules. Generated rules are named after the
// rule they came from with '_' and a number ('_' cannot appear in a written name).
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kvdesk::grammar {

// A set of byte values, one bit each.
struct ByteSet {
  std::array<uint64_t, 4> words{};

  bool has(uint8_t b) const { return (words[b >> 6] >> (b & 63)) & 1; }
  void add(uint8_t b) { words[b >> 6] |= uint64_t{1} << (b & 63); }
  void add_range(uint8_t first, uint8_t last) {
    for (int b = first; b <= last; ++b) add(uint8_t(b));
  }
  void add_all(const ByteSet& other) {
    for (size_t i = 0; i < words.size(); ++i) words[i] |= other.words[i];
  }
  bool empty() const { return (words[0] | words[1] | words[2] | words[3]) == 0; }
  bool operator==(const ByteSet& other) const { return words == other.words; }
};

// One step of an alternative: a byte from a set, a rule to match, or the alternative's end.
struct Element {
  enum class Kind : uint8_t { Bytes, Rule, End };
  Kind kind;
  int32_t value;   // Bytes: index in Grammar::byte_sets; Rule: the rule's id; End: 0
};

// A grammar over bytes, immutable once parsed and shared by every matcher using it.
// Invariants (parse_gbnf establishes them): each alternative is a run of `elements` closed by
// an End element; no rule can reach itself before reading a byte (no left recursion, also not
// through rules that can match empty text), so expanding rule references always ends; every
// alternative left can match some finite text (those that cannot were dropped).
struct Grammar {
  std::vector<Element> elements;
  std::vector<ByteSet> byte_sets;                    // deduplicated
  std::vector<std::vector<int32_t>> alternatives;    // [rules][its alternatives]: first element's index
  std::vector<std::string> rule_names;               // [rules]
  int32_t root = 0;

  int32_t rule_count() const { return int32_t(alternatives.size()); }
};

// The same elements, byte sets, alternatives and root (the rule names aside): a recognizer
// state of one is the same state of the other.
bool same_rules(const Grammar& a, const Grammar& b);

// Limits that keep a hostile grammar (from an HTTP request) cheap to compile.
constexpr size_t kMaxGrammarBytes = size_t{1} << 20;
constexpr size_t kMaxGrammarRules = 10'000;       // written and generated
constexpr size_t kMaxGrammarElements = 200'000;
constexpr uint32_t kMaxRepetition = 10'000;       // m and n of {m,n}
constexpr int kMaxGrammarNesting = 200;           // groups inside groups

// Throws kvdesk::Error "grammar line L, column C: <what>" for a syntax error, a rule defined
// twice, an undefined rule (named), a missing root rule, left recursion (the rule named), a
// rule that can match no finite text, and the limits above.
std::shared_ptr<const Grammar> parse_gbnf(std::string_view text, std::string_view root = "root");

}  // namespace kvdesk::grammar
