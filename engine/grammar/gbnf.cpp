// The parser builds rules as lists of alternatives while it reads (a group or a repetition
// adds a rule on the spot), then checks the whole: every rule defined, the root present, no
// left recursion, and drops alternatives that can never finish before flattening everything
// into Grammar's one element array.
#include "engine/grammar/gbnf.h"

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "engine/error.h"
#include "engine/grammar/utf8_ranges.h"

namespace kvdesk::grammar {
namespace {

constexpr uint32_t kUnbounded = UINT32_MAX;
constexpr size_t kNowhere = SIZE_MAX;

using Sequence = std::vector<Element>;

struct RuleDraft {
  std::string name;
  std::vector<Sequence> alternatives;
  size_t defined_at = kNowhere;     // text offset of the definition (or the construct that made it)
  size_t first_used_at = kNowhere;  // text offset of the first reference
};

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  std::shared_ptr<const Grammar> parse(std::string_view root) {
    if (text_.size() > kMaxGrammarBytes) fail_at(0, "grammar text is over 1 MiB");
    skip_space(true);
    while (at_ < text_.size()) {
      parse_rule();
      skip_space(true);
    }
    check_defined();
    const auto root_id = ids_.find(std::string(root));
    if (root_id == ids_.end()) fail_at(0, "no rule '" + std::string(root) + "'");
    check_left_recursion();
    drop_unfinishable(root_id->second);
    return flatten(root_id->second);
  }

 private:
  [[noreturn]] void fail_at(size_t offset, const std::string& what) const {
    int line = 1, column = 1;
    for (size_t i = 0; i < offset && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else if ((uint8_t(text_[i]) & 0xC0) != 0x80) {
        ++column;
      }
    }
    throw Error("grammar line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + what);
  }
  [[noreturn]] void fail(const std::string& what) const { fail_at(at_, what); }

  bool at_end() const { return at_ >= text_.size(); }
  char peek(size_t ahead = 0) const { return at_ + ahead < text_.size() ? text_[at_ + ahead] : '\0'; }

  // Spaces, tabs and comments; newlines too where a rule goes on (inside groups, after '|').
  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t') {
        ++at_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n' && peek() != '\r') ++at_;
      } else if (newlines && (c == '\n' || c == '\r')) {
        ++at_;
      } else {
        return;
      }
    }
  }

  std::string parse_name() {
    const size_t start = at_;
    while (!at_end() && is_word_char(peek())) ++at_;
    if (at_ == start) fail("expected a rule name");
    return std::string(text_.substr(start, at_ - start));
  }

  int32_t rule_id(const std::string& name) {
    const auto found = ids_.find(name);
    if (found != ids_.end()) return found->second;
    const int32_t id = new_rule(name, at_);
    ids_.emplace(name, id);
    return id;
  }

  int32_t new_rule(std::string name, size_t offset) {
    if (rules_.size() >= kMaxGrammarRules) fail_at(offset, "more than 10000 rules (with those groups and repetitions make)");
    rules_.push_back({std::move(name), {}, kNowhere, kNowhere});
    return int32_t(rules_.size() - 1);
  }

  // A rule made by the parser for a construct inside `owner`, named owner_N.
  int32_t generated_rule(int32_t owner, std::vector<Sequence> alternatives, size_t offset) {
    const std::string name = rules_[size_t(owner)].name + "_" + std::to_string(rules_.size());
    const int32_t id = new_rule(name, offset);
    rules_[size_t(id)].alternatives = std::move(alternatives);
    rules_[size_t(id)].defined_at = offset;
    return id;
  }

  void count_elements(size_t n) {
    element_count_ += n + 1;
    if (element_count_ > kMaxGrammarElements) fail("more than 200000 grammar elements");
  }

  void parse_rule() {
    const size_t start = at_;
    const std::string name = parse_name();
    skip_space(false);
    if (text_.substr(at_, 3) != "::=") fail("expected '::=' after rule name '" + name + "'");
    at_ += 3;
    skip_space(true);
    const int32_t id = rule_id(name);
    if (rules_[size_t(id)].defined_at != kNowhere) fail_at(start, "rule '" + name + "' is defined twice");
    rules_[size_t(id)].defined_at = start;
    std::vector<Sequence> alternatives = parse_alternatives(id, false);
    rules_[size_t(id)].alternatives = std::move(alternatives);
    if (!at_end() && peek() != '\n' && peek() != '\r') fail("expected the end of the rule");
  }

  std::vector<Sequence> parse_alternatives(int32_t owner, bool nested) {
    std::vector<Sequence> alternatives;
    alternatives.push_back(parse_sequence(owner, nested));
    while (peek() == '|') {
      ++at_;
      skip_space(true);
      alternatives.push_back(parse_sequence(owner, nested));
    }
    return alternatives;
  }

  Sequence parse_sequence(int32_t owner, bool nested) {
    Sequence sequence;
    size_t item_start = kNowhere;   // where in `sequence` the last item begins, for a repetition
    while (!at_end()) {
      const char c = peek();
      const size_t before = sequence.size();
      if (c == '"') {
        parse_literal(sequence);
      } else if (c == '[') {
        sequence.push_back(parse_class(owner));
      } else if (c == '.') {
        ++at_;
        sequence.push_back(any_character(owner));
      } else if (is_word_char(c)) {
        const size_t use_at = at_;
        const int32_t id = rule_id(parse_name());
        if (rules_[size_t(id)].first_used_at == kNowhere) rules_[size_t(id)].first_used_at = use_at;
        sequence.push_back({Element::Kind::Rule, id});
      } else if (c == '(') {
        sequence.push_back(parse_group(owner));
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (item_start == kNowhere) fail("a repetition needs something before it");
        apply_repetition(owner, sequence, item_start);
        item_start = kNowhere;
        skip_space(nested);
        continue;
      } else {
        break;
      }
      count_elements(sequence.size() - before);
      item_start = before;
      skip_space(nested);
    }
    return sequence;
  }

  Element parse_group(int32_t owner) {
    const size_t start = at_;
    if (++depth_ > kMaxGrammarNesting) fail("groups nested deeper than 200");
    ++at_;
    skip_space(true);
    std::vector<Sequence> alternatives = parse_alternatives(owner, true);
    if (peek() != ')') fail("expected ')'");
    ++at_;
    --depth_;
    return {Element::Kind::Rule, generated_rule(owner, std::move(alternatives), start)};
  }

  // One character of a literal or class: a UTF-8 character or an escape.
  uint32_t parse_char() {
    if (at_end()) fail("unexpected end of grammar");
    if (peek() == '\\') {
      const char e = peek(1);
      at_ += 2;
      switch (e) {
        case 'n': return '\n';
        case 't': return '\t';
        case 'r': return '\r';
        case '\\': case '"': case '[': case ']': return uint8_t(e);
        case 'x': return parse_hex(2);
        case 'u': return parse_hex(4);
        case 'U': return parse_hex(8);
        default: at_ -= 2; fail("unknown escape '\\" + std::string(1, e) + "'");
      }
    }
    return parse_utf8();
  }

  uint32_t parse_hex(int digits) {
    uint32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      const int v = hex_value(peek());
      if (v < 0) fail("expected " + std::to_string(digits) + " hex digits");
      value = value * 16 + uint32_t(v);
      ++at_;
    }
    if (value > kMaxCodePoint || (value >= 0xD800 && value <= 0xDFFF)) fail("escape is not a Unicode character");
    return value;
  }

  uint32_t parse_utf8() {
    const uint8_t lead = uint8_t(peek());
    const int length = lead < 0x80 ? 1 : (lead & 0xE0) == 0xC0 ? 2 : (lead & 0xF0) == 0xE0 ? 3 : (lead & 0xF8) == 0xF0 ? 4 : 0;
    if (length == 0) fail("invalid UTF-8");
    uint32_t cp = length == 1 ? lead : lead & (0x7F >> length);
    for (int i = 1; i < length; ++i) {
      const uint8_t b = uint8_t(peek(size_t(i)));
      if ((b & 0xC0) != 0x80) fail("invalid UTF-8");
      cp = (cp << 6) | (b & 0x3F);
    }
    static constexpr uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kSmallest[length] || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) fail("invalid UTF-8");
    at_ += size_t(length);
    return cp;
  }

  void parse_literal(Sequence& sequence) {
    const size_t start = at_++;
    std::vector<uint8_t> bytes;
    while (peek() != '"') {
      if (at_end() || peek() == '\n') fail_at(start, "unterminated string literal");
      append_utf8(bytes, parse_char());
    }
    ++at_;
    for (uint8_t b : bytes) {
      ByteSet one;
      one.add(b);
      sequence.push_back({Element::Kind::Bytes, byte_set_id(one)});
    }
  }

  Element parse_class(int32_t owner) {
    const size_t start = at_;
    ++at_;
    const bool negated = peek() == '^';
    if (negated) ++at_;
    std::vector<CodePointRange> ranges;
    while (peek() != ']') {
      if (at_end() || peek() == '\n') fail_at(start, "unterminated character class");
      const uint32_t first = parse_char();
      uint32_t last = first;
      if (peek() == '-' && peek(1) != ']' && at_ + 1 < text_.size()) {
        ++at_;
        last = parse_char();
        if (last < first) fail("character range is backwards");
      }
      ranges.push_back({first, last});
    }
    ++at_;
    std::vector<CodePointRange> set = normalize_ranges(std::move(ranges));
    if (negated) set = complement_ranges(set);
    if (set.empty()) fail_at(start, "character class matches no character");
    return characters(owner, set, start);
  }

  Element any_character(int32_t owner) {
    if (any_character_rule_ < 0) any_character_rule_ = characters(owner, {{0, kMaxCodePoint}}, at_).value;
    return {Element::Kind::Rule, any_character_rule_};
  }

  // One element matching one character of `set`: a byte set when all are ASCII, else a rule
  // whose alternatives are the UTF-8 sequences; sequences that differ only in their first
  // byte share one alternative, so the rule has few (a negated ASCII class has 8).
  Element characters(int32_t owner, const std::vector<CodePointRange>& set, size_t offset) {
    std::vector<std::vector<ByteSet>> merged;
    for (const std::vector<ByteRange>& sequence : utf8_sequences(set)) {
      std::vector<ByteSet> sets(sequence.size());
      for (size_t i = 0; i < sequence.size(); ++i) sets[i].add_range(sequence[i].first, sequence[i].last);
      const auto same_tail = std::find_if(merged.begin(), merged.end(), [&](const std::vector<ByteSet>& m) {
        return m.size() == sets.size() && std::equal(m.begin() + 1, m.end(), sets.begin() + 1);
      });
      if (same_tail != merged.end()) {
        (*same_tail)[0].add_all(sets[0]);
      } else {
        merged.push_back(std::move(sets));
      }
    }
    if (merged.size() == 1 && merged[0].size() == 1) return {Element::Kind::Bytes, byte_set_id(merged[0][0])};
    std::vector<Sequence> alternatives;
    for (const std::vector<ByteSet>& sets : merged) {
      Sequence sequence;
      for (const ByteSet& s : sets) sequence.push_back({Element::Kind::Bytes, byte_set_id(s)});
      count_elements(sequence.size());
      alternatives.push_back(std::move(sequence));
    }
    return {Element::Kind::Rule, generated_rule(owner, std::move(alternatives), offset)};
  }

  int32_t byte_set_id(const ByteSet& set) {
    const std::string key(reinterpret_cast<const char*>(set.words.data()), sizeof(set.words));
    const auto [found, added] = byte_set_ids_.emplace(key, int32_t(byte_sets_.size()));
    if (added) byte_sets_.push_back(set);
    return found->second;
  }

  uint32_t parse_count() {
    if (peek() < '0' || peek() > '9') fail("expected a number");
    uint64_t value = 0;
    while (peek() >= '0' && peek() <= '9') {
      value = value * 10 + uint64_t(peek() - '0');
      if (value > kMaxRepetition) fail("repetition count over 10000");
      ++at_;
    }
    return uint32_t(value);
  }

  // The operator at at_ applied to sequence[item_start..]: the item (wrapped in a rule when
  // it is several elements, as a literal is) repeated min times, then up to max - min more.
  void apply_repetition(int32_t owner, Sequence& sequence, size_t item_start) {
    const size_t start = at_;
    uint32_t min = 0, max = kUnbounded;
    const char op = peek();
    ++at_;
    if (op == '+') {
      min = 1;
    } else if (op == '?') {
      max = 1;
    } else if (op == '{') {
      skip_space(false);
      min = parse_count();
      skip_space(false);
      max = min;
      if (peek() == ',') {
        ++at_;
        skip_space(false);
        max = peek() == '}' ? kUnbounded : parse_count();
        skip_space(false);
      }
      if (peek() != '}') fail("expected '}'");
      ++at_;
      if (max < min) fail_at(start, "repetition maximum is below its minimum");
    }
    Sequence item(sequence.begin() + std::ptrdiff_t(item_start), sequence.end());
    sequence.resize(item_start);
    const Element one = item.size() == 1 ? item[0] : Element{Element::Kind::Rule, generated_rule(owner, {item}, start)};
    count_elements(min);
    sequence.insert(sequence.end(), min, one);
    if (max == kUnbounded) {
      const int32_t star = generated_rule(owner, {}, start);
      rules_[size_t(star)].alternatives = {{one, {Element::Kind::Rule, star}}, {}};
      count_elements(2);
      sequence.push_back({Element::Kind::Rule, star});
    } else if (max > min) {
      std::optional<int32_t> inner;
      for (uint32_t i = min; i < max; ++i) {
        Sequence more = {one};
        if (inner) more.push_back({Element::Kind::Rule, *inner});
        inner = generated_rule(owner, {more, {}}, start);
        count_elements(more.size());
      }
      sequence.push_back({Element::Kind::Rule, *inner});
    }
  }

  void check_defined() const {
    for (const RuleDraft& rule : rules_) {
      if (rule.defined_at == kNowhere) fail_at(rule.first_used_at, "undefined rule '" + rule.name + "'");
    }
  }

  // [rules]: whether the rule can match empty text.
  std::vector<bool> nullable_rules() const {
    std::vector<bool> nullable(rules_.size(), false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < rules_.size(); ++r) {
        if (nullable[r]) continue;
        for (const Sequence& alternative : rules_[r].alternatives) {
          const bool empty = std::all_of(alternative.begin(), alternative.end(), [&](const Element& e) {
            return e.kind == Element::Kind::Rule && nullable[size_t(e.value)];
          });
          if (empty) {
            nullable[r] = changed = true;
            break;
          }
        }
      }
    }
    return nullable;
  }

  // A cycle of rule references that read no byte in between; named by its first written rule
  // (a generated one stands for the rule it was made in).
  void check_left_recursion() const {
    const std::vector<bool> nullable = nullable_rules();
    std::vector<std::vector<int32_t>> leads(rules_.size());   // [rules]: rules it can start with
    for (size_t r = 0; r < rules_.size(); ++r) {
      for (const Sequence& alternative : rules_[r].alternatives) {
        for (const Element& e : alternative) {
          if (e.kind != Element::Kind::Rule) break;
          leads[r].push_back(e.value);
          if (!nullable[size_t(e.value)]) break;
        }
      }
    }
    enum class Mark : uint8_t { New, Open, Done };
    std::vector<Mark> marks(rules_.size(), Mark::New);
    std::vector<std::pair<int32_t, size_t>> path;   // (rule, next lead to follow)
    for (size_t start = 0; start < rules_.size(); ++start) {
      if (marks[start] != Mark::New) continue;
      path.push_back({int32_t(start), 0});
      marks[start] = Mark::Open;
      while (!path.empty()) {
        auto& [rule, next] = path.back();
        if (next == leads[size_t(rule)].size()) {
          marks[size_t(rule)] = Mark::Done;
          path.pop_back();
          continue;
        }
        const int32_t lead = leads[size_t(rule)][next++];
        if (marks[size_t(lead)] == Mark::Open) {
          const RuleDraft& named = rules_[size_t(lead)];
          const std::string written = named.name.substr(0, named.name.find('_'));
          fail_at(named.defined_at, "rule '" + written + "' is left-recursive (it can reach itself before reading a character)");
        }
        if (marks[size_t(lead)] == Mark::New) {
          marks[size_t(lead)] = Mark::Open;
          path.push_back({lead, 0});
        }
      }
    }
  }

  // Removes the alternatives that use a rule which can match no finite text (a recursion
  // without a base case), so a matcher never walks into a dead end it cannot finish.
  void drop_unfinishable(int32_t root) {
    std::vector<bool> finishes(rules_.size(), false);
    const auto alternative_finishes = [&](const Sequence& alternative) {
      return std::all_of(alternative.begin(), alternative.end(), [&](const Element& e) {
        return e.kind != Element::Kind::Rule || finishes[size_t(e.value)];
      });
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < rules_.size(); ++r) {
        if (finishes[r]) continue;
        const auto& alternatives = rules_[r].alternatives;
        if (std::any_of(alternatives.begin(), alternatives.end(), alternative_finishes)) finishes[r] = changed = true;
      }
    }
    if (!finishes[size_t(root)]) {
      fail_at(rules_[size_t(root)].defined_at, "rule '" + rules_[size_t(root)].name + "' can match no finite text");
    }
    for (RuleDraft& rule : rules_) {
      auto& alternatives = rule.alternatives;
      alternatives.erase(std::remove_if(alternatives.begin(), alternatives.end(),
                                        [&](const Sequence& a) { return !alternative_finishes(a); }),
                         alternatives.end());
    }
  }

  std::shared_ptr<const Grammar> flatten(int32_t root) {
    auto grammar = std::make_shared<Grammar>();
    grammar->byte_sets = std::move(byte_sets_);
    grammar->root = root;
    grammar->elements.reserve(element_count_);
    for (RuleDraft& rule : rules_) {
      grammar->rule_names.push_back(std::move(rule.name));
      std::vector<int32_t>& starts = grammar->alternatives.emplace_back();
      for (const Sequence& alternative : rule.alternatives) {
        starts.push_back(int32_t(grammar->elements.size()));
        grammar->elements.insert(grammar->elements.end(), alternative.begin(), alternative.end());
        grammar->elements.push_back({Element::Kind::End, 0});
      }
    }
    return grammar;
  }

  std::string_view text_;
  size_t at_ = 0;
  int depth_ = 0;
  size_t element_count_ = 0;
  std::vector<RuleDraft> rules_;
  std::unordered_map<std::string, int32_t> ids_;   // written rule names
  std::vector<ByteSet> byte_sets_;
  std::unordered_map<std::string, int32_t> byte_set_ids_;   // ByteSet's words as bytes -> index
  int32_t any_character_rule_ = -1;
};

}  // namespace

std::shared_ptr<const Grammar> parse_gbnf(std::string_view text, std::string_view root) {
  return Parser(text).parse(root);
}

bool same_rules(const Grammar& a, const Grammar& b) {
  auto same_element = [](const Element& x, const Element& y) { return x.kind == y.kind && x.value == y.value; };
  return a.root == b.root && a.byte_sets == b.byte_sets && a.alternatives == b.alternatives &&
         std::equal(a.elements.begin(), a.elements.end(), b.elements.begin(), b.elements.end(), same_element);
}

}  // namespace kvdesk::grammar
