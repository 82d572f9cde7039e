// The converter walks the schema once, turning each subschema into a GBNF expression that
// matches one JSON value and the whitespace after it; containers and references become named
// rules. Primitive rules (string, number, space, ...) are added the first time they are used.
#include "engine/grammar/json_schema.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/grammar/gbnf.h"

namespace kvdesk::grammar {
namespace {

using json = nlohmann::ordered_json;

constexpr size_t kMaxVisits = 100'000;
constexpr size_t kMaxPropertyNameBytes = 4096;
constexpr int64_t kLargestInteger = 9'999'999'999'999'999;   // 16 digits

// Primitive rules; '@' stands for the prefix and '-'.
const std::map<std::string, std::string>& primitives() {
  static const std::map<std::string, std::string> rules = {
      {"space", R"(| " " | "\n" [ \t]{0,20})"},
      {"boolean", R"(("true" | "false") @space)"},
      {"null", R"("null" @space)"},
      {"char", R"([^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))"},
      {"string", R"("\"" @char* "\"" @space)"},
      {"integer", R"("-"? ([0-9] | [1-9] [0-9]{1,15}) @space)"},
      {"number", R"("-"? ([0-9] | [1-9] [0-9]{1,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})? @space)"},
      {"value", R"(@object | @array | @string | @number | @boolean | @null)"},
      {"object", R"("{" @space (@string ":" @space @value ("," @space @string ":" @space @value)*)? "}" @space)"},
      {"array", R"("[" @space (@value ("," @space @value)*)? "]" @space)"},
      {"date", R"([0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [1-2] [0-9] | "3" [0-1]))"},
      {"time", R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{3})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))"},
      {"date-time", R"(@date "T" @time)"},
      {"uuid", R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})"},
  };
  return rules;
}

const std::set<std::string>& annotations() {
  static const std::set<std::string> words = {"title", "description", "default", "examples", "$schema", "$id",
                                              "$comment", "deprecated", "readOnly", "writeOnly", "$defs", "definitions"};
  return words;
}

const std::set<std::string>& supported_keywords() {
  static const std::set<std::string> words = {
      "type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "properties", "required", "additionalProperties",
      "items", "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "format", "minimum", "maximum",
      "exclusiveMinimum", "exclusiveMaximum"};
  return words;
}

[[noreturn]] void unsupported(const std::string& keyword, const std::string& at, const std::string& why = "") {
  throw Error("unsupported JSON schema keyword '" + keyword + "' at " + at + (why.empty() ? "" : ": " + why));
}

std::string pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

// A GBNF string literal of these bytes.
std::string literal(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out = "\"";
  for (char c : bytes) {
    const uint8_t b = uint8_t(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (b < 0x20 || b == 0x7F) {
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// A code point inside a GBNF character class.
std::string class_char(uint32_t cp) {
  char buffer[16];
  if (cp < 0x80 && !std::isalnum(int(cp))) {
    std::snprintf(buffer, sizeof(buffer), "\\x%02X", unsigned(cp));
  } else if (cp < 0x80) {
    std::snprintf(buffer, sizeof(buffer), "%c", char(cp));
  } else {
    std::snprintf(buffer, sizeof(buffer), "\\U%08X", unsigned(cp));
  }
  return buffer;
}

// The code points of a UTF-8 string (nlohmann::json keeps strings valid UTF-8).
std::vector<uint32_t> code_points(const std::string& text, const std::string& at) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < text.size();) {
    const uint8_t lead = uint8_t(text[i]);
    const int length = lead < 0x80 ? 1 : (lead & 0xE0) == 0xC0 ? 2 : (lead & 0xF0) == 0xE0 ? 3 : (lead & 0xF8) == 0xF0 ? 4 : 0;
    if (length == 0 || i + size_t(length) > text.size()) throw Error("JSON schema at " + at + " has a name that is not UTF-8");
    uint32_t cp = length == 1 ? lead : lead & (0x7F >> length);
    for (int k = 1; k < length; ++k) cp = (cp << 6) | (uint8_t(text[i + size_t(k)]) & 0x3F);
    out.push_back(cp);
    i += size_t(length);
  }
  return out;
}

bool has_type(const json& value, const std::string& type) {
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "integer") return value.is_number_integer() || (value.is_number_float() && std::nearbyint(value.get<double>()) == value.get<double>());
  if (type == "number") return value.is_number();
  if (type == "boolean") return value.is_boolean();
  if (type == "null") return value.is_null();
  return false;
}

// Digit strings of the same length, first <= last: an expression for the numbers between.
std::string digit_range(const std::string& first, const std::string& last) {
  if (first.empty()) return "";
  if (first == last) return literal(first);
  const size_t rest = first.size() - 1;
  const std::string tail = rest == 0 ? "" : " [0-9]{" + std::to_string(rest) + "}";
  if (first[0] == last[0]) return literal(first.substr(0, 1)) + " " + digit_range(first.substr(1), last.substr(1));
  std::vector<std::string> alternatives;
  char low = first[0], high = last[0];
  if (first.substr(1) != std::string(rest, '0')) {
    alternatives.push_back(literal(first.substr(0, 1)) + " " + digit_range(first.substr(1), std::string(rest, '9')));
    ++low;
  }
  const bool partial_high = last.substr(1) != std::string(rest, '9');
  if (partial_high) --high;
  if (low <= high) alternatives.push_back("[" + std::string(1, low) + "-" + std::string(1, high) + "]" + tail);
  if (partial_high) alternatives.push_back(literal(last.substr(0, 1)) + " " + digit_range(std::string(rest, '0'), last.substr(1)));
  std::string out = "(";
  for (size_t i = 0; i < alternatives.size(); ++i) out += (i ? " | " : "") + alternatives[i];
  return out + ")";
}

// Non-negative integers first..last without leading zeros.
std::string natural_range(int64_t first, int64_t last) {
  std::vector<std::string> alternatives;
  int64_t smallest = 0, largest = 9;   // of the current digit count
  for (int digits = 1; smallest <= last; ++digits) {
    if (largest >= first) {
      alternatives.push_back(digit_range(std::to_string(std::max(first, smallest)), std::to_string(std::min(last, largest))));
    }
    if (digits == 16) break;
    smallest = digits == 1 ? 10 : smallest * 10;
    largest = largest * 10 + 9;
  }
  std::string out = "(";
  for (size_t i = 0; i < alternatives.size(); ++i) out += (i ? " | " : "") + alternatives[i];
  return out + ")";
}

class Converter {
 public:
  Converter(const json& root, std::string_view prefix) : root_(root), prefix_(prefix) {
    if (prefix_.empty() || !std::all_of(prefix_.begin(), prefix_.end(), [](char c) { return std::isalnum(uint8_t(c)) || c == '-'; })) {
      throw Error("grammar rule name '" + prefix_ + "' must be letters, digits and '-'");
    }
  }

  std::string grammar(const std::string& root_body) {
    std::string out = prefix_ + " ::= " + root_body + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    if (out.size() > kMaxSchemaGrammarBytes) throw Error("the JSON schema's grammar is over 1 MiB");
    return out;
  }

  std::string primitive(const std::string& name) {
    const std::string full = prefix_ + "-" + name;
    if (rule_index_.count(full)) return full;
    std::string body;
    const std::string& pattern = primitives().at(name);
    rule_index_[full] = rules_.size();
    rules_.push_back({full, ""});
    for (size_t i = 0; i < pattern.size(); ++i) {
      if (pattern[i] != '@') {
        body += pattern[i];
        continue;
      }
      size_t end = i + 1;
      while (end < pattern.size() && (std::isalnum(uint8_t(pattern[end])) || pattern[end] == '-')) ++end;
      body += primitive(pattern.substr(i + 1, end - i - 1));
      i = end - 1;
    }
    rules_[rule_index_[full]].second = body;
    return full;
  }

  // An expression for one value valid under `schema`, with the whitespace after it.
  std::string visit(const json& schema, const std::string& at, int depth) {
    if (depth > kMaxSchemaDepth) throw Error("JSON schema nested deeper than " + std::to_string(kMaxSchemaDepth) + " at " + at);
    if (++visits_ > kMaxVisits) throw Error("JSON schema too large: over 100000 subschemas to convert");
    if (schema.is_boolean()) {
      if (schema.get<bool>()) return primitive("value");
      throw Error("JSON schema at " + at + " is false: no value validates");
    }
    if (!schema.is_object()) throw Error("JSON schema at " + at + " is not an object");
    std::vector<std::string> constraints;   // keywords beside annotations
    for (const auto& item : schema.items()) {
      if (annotations().count(item.key())) continue;
      if (!supported_keywords().count(item.key())) unsupported(item.key(), at);
      constraints.push_back(item.key());
    }
    for (const char* only : {"$ref", "anyOf", "oneOf"}) {
      if (!schema.contains(only)) continue;
      for (const std::string& k : constraints) {
        if (k != only) unsupported(k, at, std::string("beside '") + only + "'");
      }
    }
    if (schema.contains("$ref")) return reference(schema["$ref"], at, depth);
    if (schema.contains("anyOf")) return any_of(schema["anyOf"], at + "/anyOf", depth);
    if (schema.contains("oneOf")) return any_of(schema["oneOf"], at + "/oneOf", depth);
    if (schema.contains("allOf")) return visit(merge_all_of(schema, at), at, depth + 1);
    if (schema.contains("const")) return value_literal(schema["const"], at);
    if (schema.contains("enum")) return enumeration(schema, at);
    if (!schema.contains("type")) return typed(schema, implied_type(schema), at, depth);
    const json& type = schema["type"];
    if (type.is_string()) return typed(schema, type.get<std::string>(), at, depth);
    if (!type.is_array() || type.empty()) unsupported("type", at, "not a type name or a list of them");
    std::vector<std::string> alternatives;
    for (const json& t : type) {
      if (!t.is_string()) unsupported("type", at, "not a type name");
      alternatives.push_back(typed(schema, t.get<std::string>(), at, depth));
    }
    return join_alternatives(alternatives);
  }

 private:
  static std::string join_alternatives(const std::vector<std::string>& alternatives) {
    if (alternatives.size() == 1) return alternatives[0];
    std::string out = "(";
    for (size_t i = 0; i < alternatives.size(); ++i) out += (i ? " | " : "") + alternatives[i];
    return out + ")";
  }

  static std::string implied_type(const json& schema) {
    for (const char* k : {"properties", "required", "additionalProperties"}) {
      if (schema.contains(k)) return "object";
    }
    for (const char* k : {"items", "prefixItems", "minItems", "maxItems"}) {
      if (schema.contains(k)) return "array";
    }
    for (const char* k : {"minLength", "maxLength", "format"}) {
      if (schema.contains(k)) return "string";
    }
    for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      if (schema.contains(k)) return "number";
    }
    return "any";
  }

  // A new rule named after `hint` (made unique); its body can be set later.
  std::string add_rule(const std::string& hint, std::string body) {
    std::string name = prefix_ + "-";
    for (char c : hint.substr(0, 60)) name += std::isalnum(uint8_t(c)) ? c : '-';
    const std::string base = name;
    for (int n = 2; rule_index_.count(name); ++n) name = base + "-" + std::to_string(n);
    rule_index_[name] = rules_.size();
    bytes_ += name.size() + body.size() + 6;
    if (bytes_ > kMaxSchemaGrammarBytes) throw Error("the JSON schema's grammar is over 1 MiB");
    rules_.push_back({name, std::move(body)});
    return name;
  }

  // Named after where they are in the schema, which never clashes with a primitive's name.
  static std::string hint_of(const std::string& at) { return at.size() > 2 ? at.substr(2) : "schema"; }

  std::string typed(const json& schema, const std::string& type, const std::string& at, int depth) {
    if (type == "object") return object(schema, at, depth);
    if (type == "array") return array(schema, at, depth);
    if (type == "string") return string(schema, at);
    if (type == "integer") return integer(schema, at);
    if (type == "number") {
      for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
        if (schema.contains(k)) unsupported(k, at, "bounds on a number (bounds on an integer are supported)");
      }
      return primitive("number");
    }
    if (type == "boolean") return primitive("boolean");
    if (type == "null") return primitive("null");
    if (type == "any") return primitive("value");
    unsupported("type", at, "unknown type '" + type + "'");
  }

  std::string value_literal(const json& value, const std::string& at) {
    try {
      return literal(value.dump()) + " " + primitive("space");
    } catch (const json::exception&) {
      throw Error("JSON schema at " + at + " has a value that is not UTF-8");
    }
  }

  std::string enumeration(const json& schema, const std::string& at) {
    const json& values = schema["enum"];
    if (!values.is_array()) unsupported("enum", at, "not a list");
    if (values.size() > kMaxEnumValues) throw Error("JSON schema enum at " + at + " has over 10000 values");
    std::vector<std::string> alternatives;
    for (const json& value : values) {
      const json* type = schema.contains("type") ? &schema["type"] : nullptr;
      const bool fits = !type || (type->is_string() && has_type(value, type->get<std::string>())) ||
                        (type->is_array() && std::any_of(type->begin(), type->end(), [&](const json& t) {
                           return t.is_string() && has_type(value, t.get<std::string>());
                         }));
      if (fits) alternatives.push_back(value_literal(value, at));
    }
    if (alternatives.empty()) throw Error("JSON schema enum at " + at + " has no value of its type");
    return add_rule(hint_of(at), join_alternatives(alternatives));
  }

  std::string any_of(const json& list, const std::string& at, int depth) {
    if (!list.is_array() || list.empty()) throw Error("JSON schema at " + at + " is not a list of schemas");
    std::vector<std::string> alternatives;
    for (size_t i = 0; i < list.size(); ++i) alternatives.push_back(visit(list[i], at + "/" + std::to_string(i), depth + 1));
    return add_rule(hint_of(at), join_alternatives(alternatives));
  }

  const json& resolve(const json& ref, const std::string& at) {
    if (!ref.is_string()) unsupported("$ref", at, "not a string");
    const std::string text = ref.get<std::string>();
    if (text == "#") return root_;
    if (text.rfind("#/", 0) != 0) unsupported("$ref", at, "only references inside the schema (#/...) resolve");
    try {
      return root_.at(json::json_pointer(text.substr(1)));
    } catch (const json::exception&) {
      throw Error("JSON schema $ref '" + text + "' at " + at + " does not resolve");
    }
  }

  // A rule per referenced schema, named before it is converted so that a reference back to
  // it (recursion) finds the name.
  std::string reference(const json& ref, const std::string& at, int depth) {
    const json& target = resolve(ref, at);
    const std::string text = ref.get<std::string>();
    if (text == "#") return prefix_;
    const auto known = ref_rules_.find(text);
    if (known != ref_rules_.end()) return known->second;
    const std::string name = add_rule("ref" + text.substr(1), "");
    ref_rules_[text] = name;
    std::string body = visit(target, text, depth + 1);
    bytes_ += body.size();
    rules_[rule_index_[name]].second = std::move(body);
    return name;
  }

  // allOf of object schemas (or references to them) and the schema's own keywords, as one
  // object schema: properties and required joined. A part with additionalProperties false
  // admits only its own properties, so the merge keeps only names every such part declares.
  json merge_all_of(const json& schema, const std::string& at) {
    const json& list = schema["allOf"];
    if (!list.is_array() || list.empty()) unsupported("allOf", at, "not a list of schemas");
    std::vector<std::pair<const json*, std::string>> parts = {{&schema, at}};   // (part, where)
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string part_at = at + "/allOf/" + std::to_string(i);
      parts.push_back({list[i].is_object() && list[i].contains("$ref") ? &resolve(list[i]["$ref"], part_at) : &list[i], part_at});
    }
    json properties = json::object(), required = json::array();
    std::optional<std::set<std::string>> allowed;   // names every closed part declares
    for (const auto& [part, part_at] : parts) {
      if (!part->is_object() || (part->contains("type") && (*part)["type"] != "object")) unsupported("allOf", at, "only objects merge");
      for (const auto& item : part->items()) {
        const std::string& k = item.key();
        if (k == "allOf" && part == &schema) continue;
        if (k == "additionalProperties" && item.value() != false) unsupported(k, part_at, "inside allOf");
        if (k != "type" && k != "properties" && k != "required" && k != "additionalProperties" && !annotations().count(k)) {
          unsupported(k, part_at, "inside allOf");
        }
      }
      const json own = part->value("properties", json::object());
      for (const auto& p : own.items()) {
        if (properties.contains(p.key()) && properties[p.key()] != p.value()) unsupported("allOf", at, "property '" + p.key() + "' defined twice");
        properties[p.key()] = p.value();
      }
      for (const json& r : part->value("required", json::array())) required.push_back(r);
      if (part->value("additionalProperties", json(true)) != false) continue;
      std::set<std::string> names;
      for (const auto& p : own.items()) {
        if (!allowed || allowed->count(p.key())) names.insert(p.key());
      }
      allowed = std::move(names);
    }
    json merged = {{"type", "object"}, {"properties", json::object()}, {"required", required}};
    for (const auto& p : properties.items()) {
      if (!allowed || allowed->count(p.key())) merged["properties"][p.key()] = p.value();
    }
    for (const json& r : required) {
      if (r.is_string() && allowed && !allowed->count(r.get<std::string>())) {
        throw Error("JSON schema allOf at " + at + " requires property " + r.dump() + " that additionalProperties false forbids");
      }
    }
    if (allowed) merged["additionalProperties"] = false;
    return merged;
  }

  std::string object(const json& schema, const std::string& at, int depth) {
    const json properties = schema.value("properties", json::object());
    if (!properties.is_object()) unsupported("properties", at, "not an object");
    std::set<std::string> required;
    if (schema.contains("required")) {
      if (!schema["required"].is_array()) unsupported("required", at, "not a list");
      for (const json& r : schema["required"]) {
        if (!r.is_string()) unsupported("required", at, "not a list of names");
        required.insert(r.get<std::string>());
      }
    }
    const json extra = schema.value("additionalProperties", json(true));
    if (properties.empty() && required.empty() && extra == true) return primitive("object");

    std::vector<std::string> names;   // properties' order, then required names not among them
    for (const auto& p : properties.items()) names.push_back(p.key());
    for (const std::string& r : required) {
      if (!properties.contains(r)) names.push_back(r);
    }
    const std::string space = primitive("space");
    const std::string comma = "\",\" " + space + " ";
    std::vector<std::string> pairs;   // [names]: the rule for "name": value
    for (const std::string& name : names) {
      if (name.size() > kMaxPropertyNameBytes) throw Error("JSON schema at " + at + " has a property name over 4096 bytes");
      const std::string value_at = at + "/properties/" + pointer_token(name);
      const std::string value = properties.contains(name) ? visit(properties[name], value_at, depth + 1) : primitive("value");
      pairs.push_back(add_rule(hint_of(value_at) + "-kv", value_literal(json(name), at) + " \":\" " + space + " " + value));
    }
    std::optional<std::string> extra_pair;
    if (extra != false) {
      const std::string value = extra == true ? primitive("value") : visit(extra, at + "/additionalProperties", depth + 1);
      extra_pair = add_rule(hint_of(at) + "-extra-kv", other_name(names, at) + " \":\" " + space + " " + value);
    }
    // after[i]: properties i.. once something is written (each needs its comma); first[i]:
    // properties i.. before anything is written.
    std::string after = extra_pair ? add_rule(hint_of(at) + "-after", "(" + comma + *extra_pair + ")*") : "";
    std::string first = extra_pair ? add_rule(hint_of(at) + "-first", "(" + *extra_pair + " " + after + ")?") : "";
    for (size_t i = names.size(); i-- > 0;) {
      const std::string pair = pairs[i] + " " + after;
      if (required.count(names[i])) {
        first = add_rule(hint_of(at) + "-first", pair);
        after = add_rule(hint_of(at) + "-after", comma + pair);
      } else {
        first = add_rule(hint_of(at) + "-first", first.empty() ? "| " + pair : pair + " | " + first);
        after = add_rule(hint_of(at) + "-after", "(" + comma + pairs[i] + ")? " + after);
      }
    }
    return add_rule(hint_of(at), "\"{\" " + space + " " + first + " \"}\" " + space);
  }

  // A quoted property name that is none of `names`: it follows a name's characters while it
  // is a prefix of one and leaves them with a different plain character or ends early.
  std::string other_name(const std::vector<std::string>& names, const std::string& at) {
    struct TrieNode {
      std::map<uint32_t, size_t> children;
      bool is_name = false;
    };
    std::vector<TrieNode> trie(1);
    for (const std::string& name : names) {
      size_t node = 0;
      for (uint32_t cp : code_points(name, at)) {
        const auto found = trie[node].children.find(cp);
        if (found != trie[node].children.end()) {
          node = found->second;
          continue;
        }
        trie[node].children[cp] = trie.size();
        node = trie.size();
        trie.emplace_back();
      }
      trie[node].is_name = true;
    }
    const std::string character = primitive("char");
    std::vector<std::string> node_rules(trie.size());
    for (size_t node = trie.size(); node-- > 0;) {
      if (trie[node].children.empty()) {
        node_rules[node] = character + (trie[node].is_name ? "+" : "*");
        continue;
      }
      std::string others = "[^\"\\\\\\x00-\\x1F";
      std::string body = trie[node].is_name ? "" : "| ";   // ending here is another name
      for (const auto& [cp, child] : trie[node].children) {
        others += class_char(cp);
        if (cp >= 0x20 && cp != '"' && cp != '\\') body += class_char_literal(cp) + " " + node_rules[child] + " | ";
      }
      body += others + "] " + character + "*";
      node_rules[node] = add_rule(hint_of(at) + "-other-name", body);
    }
    return "\"\\\"\" " + node_rules[0] + " \"\\\"\" " + primitive("space");
  }

  static std::string class_char_literal(uint32_t cp) { return "[" + class_char(cp) + "]"; }

  std::string array(const json& schema, const std::string& at, int depth) {
    const std::string space = primitive("space");
    const std::string comma = "\",\" " + space + " ";
    const json* prefix = schema.contains("prefixItems") ? &schema["prefixItems"]
                         : schema.contains("items") && schema["items"].is_array() ? &schema["items"] : nullptr;
    if (prefix) {
      if (!prefix->is_array()) unsupported("prefixItems", at, "not a list of schemas");
      for (const char* k : {"minItems", "maxItems"}) {
        if (schema.contains(k)) unsupported(k, at, "beside prefixItems");
      }
      std::string body = "\"[\" " + space;
      for (size_t i = 0; i < prefix->size(); ++i) {
        body += (i ? " " + comma : " ") + visit((*prefix)[i], at + "/prefixItems/" + std::to_string(i), depth + 1);
      }
      const bool more = schema.contains("prefixItems") && schema.contains("items") && schema["items"] != false;
      if (more) {
        const std::string item = visit(schema["items"], at + "/items", depth + 1);
        body += prefix->empty() ? " (" + item + " (" + comma + item + ")*)?" : " (" + comma + item + ")*";
      }
      return add_rule(hint_of(at), body + " \"]\" " + space);
    }
    const bool no_items = schema.contains("items") && schema["items"] == false;
    const std::string item = no_items ? "" : schema.contains("items") ? visit(schema["items"], at + "/items", depth + 1) : primitive("value");
    const uint64_t min = count(schema, "minItems", at, 0);
    const std::optional<uint64_t> max = no_items ? 0 : schema.contains("maxItems") ? std::optional(count(schema, "maxItems", at, 0)) : std::nullopt;
    if (max && *max < min) throw Error("JSON schema at " + at + " has maxItems below minItems");
    std::string list;
    if (!max || *max > 0) {
      const std::string more = "(" + comma + item + ")" + repeat(min == 0 ? 0 : min - 1, max ? std::optional(*max - 1) : std::nullopt);
      list = min == 0 ? "(" + item + " " + more + ")?" : item + " " + more;
    }
    return add_rule(hint_of(at), "\"[\" " + space + " " + list + " \"]\" " + space);
  }

  static std::string repeat(uint64_t min, std::optional<uint64_t> max) {
    if (!max) return "{" + std::to_string(min) + ",}";
    return "{" + std::to_string(min) + "," + std::to_string(*max) + "}";
  }

  static uint64_t count(const json& schema, const char* keyword, const std::string& at, uint64_t absent) {
    if (!schema.contains(keyword)) return absent;
    const json& v = schema[keyword];
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) unsupported(keyword, at, "not a count");
    if (v.get<uint64_t>() > kMaxRepetition) throw Error("JSON schema " + std::string(keyword) + " at " + at + " is over 10000");
    return v.get<uint64_t>();
  }

  std::string string(const json& schema, const std::string& at) {
    if (schema.contains("format")) {
      const json& format = schema["format"];
      const std::string name = format.is_string() ? format.get<std::string>() : "";
      if (name != "date" && name != "time" && name != "date-time" && name != "uuid") unsupported("format", at, "format " + format.dump());
      return "\"\\\"\" " + primitive(name) + " \"\\\"\" " + primitive("space");
    }
    if (!schema.contains("minLength") && !schema.contains("maxLength")) return primitive("string");
    const uint64_t min = count(schema, "minLength", at, 0);
    const std::optional<uint64_t> max = schema.contains("maxLength") ? std::optional(count(schema, "maxLength", at, 0)) : std::nullopt;
    if (max && *max < min) throw Error("JSON schema at " + at + " has maxLength below minLength");
    return add_rule(hint_of(at), "\"\\\"\" " + primitive("char") + repeat(min, max) + " \"\\\"\" " + primitive("space"));
  }

  std::string integer(const json& schema, const std::string& at) {
    double low = -double(kLargestInteger), high = double(kLargestInteger);
    bool bounded = false;
    const auto bound = [&](const char* keyword) -> std::optional<double> {
      if (!schema.contains(keyword)) return std::nullopt;
      const json& v = schema[keyword];
      if (v.is_boolean()) return std::nullopt;   // draft 4's exclusive flags, read below
      if (!v.is_number()) unsupported(keyword, at, "not a number");
      bounded = true;
      return v.get<double>();
    };
    const bool draft4_exclusive_min = schema.value("exclusiveMinimum", json()) == true;
    const bool draft4_exclusive_max = schema.value("exclusiveMaximum", json()) == true;
    if (const auto v = bound("minimum")) low = std::max(low, draft4_exclusive_min ? std::floor(*v) + 1 : std::ceil(*v));
    if (const auto v = bound("exclusiveMinimum")) low = std::max(low, std::floor(*v) + 1);
    if (const auto v = bound("maximum")) high = std::min(high, draft4_exclusive_max ? std::ceil(*v) - 1 : std::floor(*v));
    if (const auto v = bound("exclusiveMaximum")) high = std::min(high, std::ceil(*v) - 1);
    if (!bounded) return primitive("integer");
    if (low > high) throw Error("JSON schema at " + at + " allows no integer of at most 16 digits");
    const int64_t first = int64_t(low), last = int64_t(high);
    std::vector<std::string> alternatives;
    if (first < 0) alternatives.push_back("\"-\" " + natural_range(last < 0 ? -last : 1, -first));
    if (last >= 0) alternatives.push_back(natural_range(std::max<int64_t>(first, 0), last));
    return add_rule(hint_of(at), join_alternatives(alternatives) + " " + primitive("space"));
  }

  const json& root_;
  std::string prefix_;
  std::vector<std::pair<std::string, std::string>> rules_;   // (name, body), in order of creation
  std::unordered_map<std::string, size_t> rule_index_;
  std::unordered_map<std::string, std::string> ref_rules_;   // $ref text -> rule name
  size_t bytes_ = 0;
  size_t visits_ = 0;
};

}  // namespace

std::string json_schema_gbnf(const json& schema, std::string_view root_name) {
  Converter converter(schema, root_name);
  const std::string body = converter.visit(schema, "#", 0);
  return converter.grammar(body);
}

std::string json_object_gbnf(std::string_view root_name) {
  Converter converter(json::object(), root_name);
  return converter.grammar(converter.primitive("object"));
}

}  // namespace kvdesk::grammar
