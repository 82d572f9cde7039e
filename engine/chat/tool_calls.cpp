// Tool calls: each format is a set of opening markers plus a scanner that reads one call (or one
// block of calls) from its marker and judges the text so far: the call is whole, it may still
// become whole, or it cannot. One splitter runs the scanners over a whole answer
// (parse_tool_calls) and over a growing one (ToolCallStream), so both split alike. Scanners are
// monotone: a verdict of whole or broken on some text stays the same on every longer text, which
// is what lets the stream decide as early as it does.
#include "engine/chat/tool_calls.h"

#include <algorithm>
#include <random>

#include <nlohmann/json.hpp>

#include "engine/chat/tool_call_markup.h"
#include "engine/error.h"

namespace kvdesk {
namespace {

using json = nlohmann::ordered_json;
using namespace tool_call_markup;

constexpr std::string_view kBlank = " \t\n\r";

bool is_blank(char c) { return kBlank.find(c) != std::string_view::npos; }
bool is_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }
bool is_name_char(char c) { return is_alnum(c) || c == '_' || c == '-' || c == '.'; }

enum class Verdict { Whole, Unfinished, Broken };

// What a scanner made of the text from a call's opening marker on.
struct Scan {
  Verdict verdict = Verdict::Broken;
  size_t end = 0;                  // whole: just past the markup
  std::vector<ToolCall> calls;     // whole: in order; none for markup that only wraps content
};

// A read position in the answer. final: the answer ends where the text does (a marker cut
// short there was cut by the model's stop), so nothing is unfinished any more.
struct Cursor {
  std::string_view text;
  size_t at = 0;
  bool final = false;

  bool at_end() const { return at >= text.size(); }
  char next() const { return text[at]; }
  void skip_blank() {
    while (!at_end() && is_blank(next())) ++at;
  }
  // Whole: the text here starts with `literal`; unfinished: the text ends inside it.
  Verdict match(std::string_view literal) const {
    const std::string_view rest = text.substr(std::min(at, text.size()));
    if (rest.starts_with(literal)) return Verdict::Whole;
    return literal.starts_with(rest) ? Verdict::Unfinished : Verdict::Broken;
  }
  // match(), moving past the literal when it is there.
  Verdict expect(std::string_view literal) {
    const Verdict verdict = match(literal);
    if (verdict == Verdict::Whole) at += literal.size();
    return verdict;
  }
};

// A scan that stopped before its call was whole: unfinished waits for more text, unless the
// answer has ended.
Scan stopped(Verdict verdict, const Cursor& c) {
  return {verdict == Verdict::Unfinished && !c.final ? Verdict::Unfinished : Verdict::Broken, 0, {}};
}

Scan whole(size_t end, std::vector<ToolCall> calls) { return {Verdict::Whole, end, std::move(calls)}; }

// Strict JSON syntax from the cursor: whole with the cursor past one value, unfinished when the
// text ends inside it, broken at the first character no JSON text could have there.
class JsonSyntax {
 public:
  explicit JsonSyntax(Cursor& c) : c_(c) {}

  Verdict value(int depth = 0) {
    c_.skip_blank();
    if (c_.at_end()) return Verdict::Unfinished;
    if (depth > kMaxDepth) return Verdict::Broken;
    switch (c_.next()) {
      case '{': return object(depth);
      case '[': return array(depth);
      case '"': return string();
      case 't': return c_.expect("true");
      case 'f': return c_.expect("false");
      case 'n': return c_.expect("null");
      default: return number();
    }
  }

 private:
  static constexpr int kMaxDepth = 256;

  Verdict object(int depth) {
    ++c_.at;
    c_.skip_blank();
    if (c_.at_end()) return Verdict::Unfinished;
    if (c_.next() == '}') return ++c_.at, Verdict::Whole;
    for (;;) {
      c_.skip_blank();
      if (c_.at_end()) return Verdict::Unfinished;
      if (c_.next() != '"') return Verdict::Broken;
      if (const Verdict key = string(); key != Verdict::Whole) return key;
      c_.skip_blank();
      if (const Verdict colon = c_.expect(":"); colon != Verdict::Whole) return colon;
      if (const Verdict member = value(depth + 1); member != Verdict::Whole) return member;
      bool more = false;
      if (const Verdict end = after_member('}', more); !more) return end;
    }
  }

  Verdict array(int depth) {
    ++c_.at;
    c_.skip_blank();
    if (c_.at_end()) return Verdict::Unfinished;
    if (c_.next() == ']') return ++c_.at, Verdict::Whole;
    for (;;) {
      if (const Verdict item = value(depth + 1); item != Verdict::Whole) return item;
      bool more = false;
      if (const Verdict end = after_member(']', more); !more) return end;
    }
  }

  // After a member: the closer ends the container (whole); a comma means another member
  // (`more`, the cursor past the comma); anything else is broken.
  Verdict after_member(char closer, bool& more) {
    c_.skip_blank();
    if (c_.at_end()) return Verdict::Unfinished;
    if (c_.next() == closer) return ++c_.at, Verdict::Whole;
    if (c_.next() != ',') return Verdict::Broken;
    ++c_.at;
    more = true;
    return Verdict::Unfinished;
  }

  Verdict string() {
    ++c_.at;
    while (!c_.at_end()) {
      const char ch = c_.next();
      ++c_.at;
      if (ch == '"') return Verdict::Whole;
      if (static_cast<unsigned char>(ch) < 0x20) return Verdict::Broken;
      if (ch != '\\') continue;
      if (c_.at_end()) return Verdict::Unfinished;
      const char escape = c_.next();
      ++c_.at;
      if (escape == 'u') {
        for (int i = 0; i < 4; ++i, ++c_.at) {
          if (c_.at_end()) return Verdict::Unfinished;
          if (!std::isxdigit(static_cast<unsigned char>(c_.next()))) return Verdict::Broken;
        }
      } else if (std::string_view("\"\\/bfnrt").find(escape) == std::string_view::npos) {
        return Verdict::Broken;
      }
    }
    return Verdict::Unfinished;
  }

  // A number still unfinished at the end of the text: more digits may follow.
  Verdict number() {
    if (c_.next() == '-') ++c_.at;
    if (c_.at_end()) return Verdict::Unfinished;
    if (c_.next() == '0') {
      ++c_.at;
    } else if (const Verdict integer = digits(); integer != Verdict::Whole) {
      return integer;
    }
    if (!c_.at_end() && c_.next() == '.') {
      ++c_.at;
      if (const Verdict fraction = digits(); fraction != Verdict::Whole) return fraction;
    }
    if (!c_.at_end() && (c_.next() == 'e' || c_.next() == 'E')) {
      ++c_.at;
      if (!c_.at_end() && (c_.next() == '+' || c_.next() == '-')) ++c_.at;
      if (const Verdict exponent = digits(); exponent != Verdict::Whole) return exponent;
    }
    return c_.at_end() ? Verdict::Unfinished : Verdict::Whole;
  }

  Verdict digits() {
    if (c_.at_end()) return Verdict::Unfinished;
    if (!std::isdigit(static_cast<unsigned char>(c_.next()))) return Verdict::Broken;
    while (!c_.at_end() && std::isdigit(static_cast<unsigned char>(c_.next()))) ++c_.at;
    return Verdict::Whole;
  }

  Cursor& c_;
};

// One JSON value at the cursor (blanks before it skipped), parsed; the cursor moves past it.
Verdict read_json(Cursor& c, json& out) {
  c.skip_blank();
  const size_t begin = c.at;
  if (const Verdict syntax = JsonSyntax(c).value(); syntax != Verdict::Whole) return syntax;
  out = json::parse(c.text.substr(begin, c.at - begin), nullptr, false);
  return out.is_discarded() ? Verdict::Broken : Verdict::Whole;
}

// A name at the cursor: letters, digits, '_', '-', '.' and any of `also`. Whole when a character
// past it shows where it ends (the cursor stops there), unfinished when the text ends first,
// broken when there is no name.
Verdict read_name(Cursor& c, std::string& name, std::string_view also = {}) {
  const size_t begin = c.at;
  while (!c.at_end() && (is_name_char(c.next()) || also.find(c.next()) != std::string_view::npos)) ++c.at;
  name = std::string(c.text.substr(begin, c.at - begin));
  if (c.at_end()) return Verdict::Unfinished;
  return name.empty() ? Verdict::Broken : Verdict::Whole;
}

// The text from the cursor up to `closer`; the cursor moves past the closer.
Verdict read_until(Cursor& c, std::string_view closer, std::string& text) {
  const size_t end = c.text.find(closer, c.at);
  if (end == std::string_view::npos) return Verdict::Unfinished;
  text = std::string(c.text.substr(c.at, end - c.at));
  c.at = end + closer.size();
  return Verdict::Whole;
}

std::string random_call_id() {
  constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 random{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(random)];
  return id;
}

ToolCall make_call(std::string name, const json& arguments, std::string id = {}) {
  return {id.empty() ? random_call_id() : std::move(id), std::move(name),
          arguments.dump(-1, ' ', false, json::error_handler_t::replace)};
}

// The arguments object of a call object: an object, or a string holding one's JSON.
bool arguments_of(const json& value, json& arguments) {
  arguments = value.is_string() ? json::parse(value.get<std::string>(), nullptr, false) : value;
  return arguments.is_object();
}

// The call a JSON object describes: its name under name_key, its arguments under the first of
// args_keys it has, its id under "id" when that is a string. False when it is not a call.
bool call_from_object(const json& object, std::string_view name_key, std::initializer_list<std::string_view> args_keys,
                      std::vector<ToolCall>& calls) {
  if (!object.is_object()) return false;
  const auto name = object.find(std::string(name_key));
  if (name == object.end() || !name->is_string() || name->get<std::string>().empty()) return false;
  for (const std::string_view key : args_keys) {
    const auto found = object.find(std::string(key));
    if (found == object.end()) continue;
    json arguments;
    if (!arguments_of(*found, arguments)) return false;
    const auto id = object.find("id");
    calls.push_back(make_call(name->get<std::string>(), arguments,
                              id != object.end() && id->is_string() ? id->get<std::string>() : std::string()));
    return true;
  }
  return false;
}

// A JSON array of call objects (Mistral, Granite, Command R): at least one, every one a call.
Verdict read_call_list(Cursor& c, std::string_view name_key, std::initializer_list<std::string_view> args_keys,
                       std::vector<ToolCall>& calls) {
  json list;
  if (const Verdict read = read_json(c, list); read != Verdict::Whole) return read;
  if (!list.is_array() || list.empty()) return Verdict::Broken;
  for (const json& item : list) {
    if (!call_from_object(item, name_key, args_keys, calls)) return Verdict::Broken;
  }
  return Verdict::Whole;
}

// The scan's end: blanks, then `closer`, which the end of the answer may stand in for.
Scan closed_by(Cursor c, std::string_view closer, std::vector<ToolCall> calls) {
  c.skip_blank();
  switch (c.match(closer)) {
    case Verdict::Whole: return whole(c.at + closer.size(), std::move(calls));
    case Verdict::Unfinished: return c.final ? whole(c.text.size(), std::move(calls)) : Scan{Verdict::Unfinished, 0, {}};
    case Verdict::Broken: break;
  }
  return {};
}

// A parameter's text as an XML-style format writes it: JSON when it reads as JSON (numbers,
// booleans, objects), else the text itself. The schema is not consulted, so a string
// parameter that reads as a number arrives as one.
json parameter_value(std::string_view text) {
  json value = json::parse(text, nullptr, false);
  return value.is_discarded() ? json(std::string(text)) : value;
}

// --- The formats' scanners: each is given the cursor at an opening marker its format lists.

// <tool_call>{"name": ..., "arguments": {...}}</tool_call>
Scan scan_hermes(Cursor c) {
  c.at += kToolCallTag.size();
  json object;
  if (const Verdict read = read_json(c, object); read != Verdict::Whole) return stopped(read, c);
  std::vector<ToolCall> calls;
  if (!call_from_object(object, "name", {"arguments"}, calls)) return {};
  return closed_by(c, "</tool_call>", std::move(calls));
}

// <tool_call>\n<function=NAME>\n<parameter=KEY>\nvalue\n</parameter>\n</function>\n</tool_call>
Scan scan_qwen3_coder(Cursor c) {
  c.at += kToolCallTag.size();
  c.skip_blank();
  std::string name;
  if (const Verdict open = c.expect("<function="); open != Verdict::Whole) return stopped(open, c);
  if (const Verdict read = read_name(c, name); read != Verdict::Whole) return stopped(read, c);
  if (const Verdict close = c.expect(">"); close != Verdict::Whole) return stopped(close, c);
  json arguments = json::object();
  for (;;) {
    c.skip_blank();
    const Verdict parameter = c.expect("<parameter=");
    if (parameter == Verdict::Unfinished) return stopped(parameter, c);
    if (parameter == Verdict::Broken) break;
    std::string key, text;
    if (const Verdict read = read_until(c, ">", key); read != Verdict::Whole) return stopped(read, c);
    if (const Verdict read = read_until(c, "</parameter>", text); read != Verdict::Whole) return stopped(read, c);
    std::string_view value = text;
    if (value.starts_with('\n')) value.remove_prefix(1);
    if (value.ends_with('\n')) value.remove_suffix(1);
    arguments[key] = parameter_value(value);
  }
  if (const Verdict end = c.expect("</function>"); end != Verdict::Whole) return stopped(end, c);
  return closed_by(c, "</tool_call>", {make_call(name, arguments)});
}

// <tool_call>NAME\n<arg_key>KEY</arg_key>\n<arg_value>value</arg_value>\n</tool_call>
Scan scan_glm45(Cursor c) {
  c.at += kToolCallTag.size();
  c.skip_blank();
  std::string name;
  if (const Verdict read = read_name(c, name); read != Verdict::Whole) return stopped(read, c);
  json arguments = json::object();
  for (;;) {
    c.skip_blank();
    const Verdict key_tag = c.expect("<arg_key>");
    if (key_tag == Verdict::Unfinished) return stopped(key_tag, c);
    if (key_tag == Verdict::Broken) break;
    std::string key, text;
    if (const Verdict read = read_until(c, "</arg_key>", key); read != Verdict::Whole) return stopped(read, c);
    c.skip_blank();
    if (const Verdict open = c.expect("<arg_value>"); open != Verdict::Whole) return stopped(open, c);
    if (const Verdict read = read_until(c, "</arg_value>", text); read != Verdict::Whole) return stopped(read, c);
    arguments[key] = parameter_value(text);
  }
  return closed_by(c, "</tool_call>", {make_call(name, arguments)});
}

// {"name": ..., "parameters": {...}}, maybe after <|python_tag|>. Only an object whose first
// key is "name" (or "type", as in {"type": "function", "name": ...}) is read on, so an answer
// that is other JSON goes out as content at once.
Scan scan_llama3_json(Cursor c) {
  const Verdict tag = c.expect("<|python_tag|>");
  if (tag == Verdict::Unfinished) return stopped(tag, c);
  c.skip_blank();
  Cursor first_key = c;
  if (const Verdict open = first_key.expect("{"); open != Verdict::Whole) return stopped(open, c);
  first_key.skip_blank();
  const Verdict name = first_key.match("\"name\"");
  const Verdict type = first_key.match("\"type\"");
  if (name == Verdict::Broken && type == Verdict::Broken) return {};
  json object;
  if (const Verdict read = read_json(c, object); read != Verdict::Whole) return stopped(read, c);
  std::vector<ToolCall> calls;
  if (!call_from_object(object, "name", {"parameters", "arguments"}, calls)) return {};
  return whole(c.at, std::move(calls));
}

// <function=NAME>{...}</function>
Scan scan_functionary_v3_1(Cursor c) {
  c.at += std::string_view("<function=").size();
  std::string name;
  if (const Verdict read = read_name(c, name); read != Verdict::Whole) return stopped(read, c);
  if (const Verdict close = c.expect(">"); close != Verdict::Whole) return stopped(close, c);
  json arguments;
  if (const Verdict read = read_json(c, arguments); read != Verdict::Whole) return stopped(read, c);
  if (!arguments.is_object()) return {};
  return closed_by(c, "</function>", {make_call(name, arguments)});
}

// >>>NAME\n{...}; ">>>all\n" opens plain content (its markup only is taken out). Python code
// (">>>python\n") is not a JSON call and stays content.
Scan scan_functionary_v3_2(Cursor c) {
  if (const Verdict recipient = c.expect(">>>"); recipient == Verdict::Unfinished) return stopped(recipient, c);
  std::string name;
  if (const Verdict read = read_name(c, name); read != Verdict::Whole) return stopped(read, c);
  if (const Verdict newline = c.expect("\n"); newline != Verdict::Whole) return stopped(newline, c);
  if (name == "all") return whole(c.at, {});
  json arguments;
  if (const Verdict read = read_json(c, arguments); read != Verdict::Whole) return stopped(read, c);
  if (!arguments.is_object()) return {};
  return whole(c.at, {make_call(name, arguments)});
}

// [TOOL_CALLS][{"name": ..., "arguments": {...}, "id": ...}, ...] or
// [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{...} ([CALL_ID] optional).
Scan scan_mistral(Cursor c) {
  c.at += std::string_view("[TOOL_CALLS]").size();
  c.skip_blank();
  if (c.at_end()) return stopped(Verdict::Unfinished, c);
  std::vector<ToolCall> calls;
  if (c.next() == '[') {
    if (const Verdict read = read_call_list(c, "name", {"arguments"}, calls); read != Verdict::Whole) {
      return stopped(read, c);
    }
    return whole(c.at, std::move(calls));
  }
  std::string name, id;
  if (const Verdict read = read_name(c, name); read != Verdict::Whole) return stopped(read, c);
  const Verdict call_id = c.expect("[CALL_ID]");
  if (call_id == Verdict::Unfinished) return stopped(call_id, c);
  if (call_id == Verdict::Whole) {
    if (const Verdict read = read_name(c, id); read != Verdict::Whole) return stopped(read, c);
  }
  if (const Verdict args = c.expect("[ARGS]"); args != Verdict::Whole) return stopped(args, c);
  json arguments;
  if (const Verdict read = read_json(c, arguments); read != Verdict::Whole) return stopped(read, c);
  if (!arguments.is_object()) return {};
  return whole(c.at, {make_call(name, arguments, id)});
}

// A block of calls: its opener (where the cursor is), calls each after `call_opener` and read
// by read_call, then `closer`, which the end of the answer may stand in for after a call.
using CallReader = Verdict (*)(Cursor&, std::vector<ToolCall>&);
Scan scan_block(Cursor c, std::string_view opener, std::string_view call_opener, std::string_view closer,
                CallReader read_call) {
  c.at += opener.size();
  std::vector<ToolCall> calls;
  for (;;) {
    c.skip_blank();
    const Verdict next = c.expect(call_opener);
    if (next == Verdict::Whole) {
      if (const Verdict read = read_call(c, calls); read != Verdict::Whole) return stopped(read, c);
      continue;
    }
    if (calls.empty()) return stopped(next, c);
    const Verdict end = c.match(closer);
    if (end == Verdict::Whole) return whole(c.at + closer.size(), std::move(calls));
    if (next == Verdict::Unfinished || end == Verdict::Unfinished) {
      return c.final ? whole(c.text.size(), std::move(calls)) : Scan{Verdict::Unfinished, 0, {}};
    }
    return {};
  }
}


// function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>
Verdict read_deepseek_r1_call(Cursor& c, std::vector<ToolCall>& calls) {
  std::string type, name;
  json arguments;
  Verdict step = read_name(c, type);
  if (step == Verdict::Whole) step = c.expect(kDeepSeekSep);
  if (step == Verdict::Whole) step = read_name(c, name);
  if (step == Verdict::Whole) c.skip_blank(), step = c.expect("```json");
  if (step == Verdict::Whole) step = read_json(c, arguments);
  if (step == Verdict::Whole) c.skip_blank(), step = c.expect("```");
  if (step == Verdict::Whole) c.skip_blank(), step = c.expect(kDeepSeekCallEnd);
  if (step != Verdict::Whole) return step;
  if (!arguments.is_object()) return Verdict::Broken;
  calls.push_back(make_call(name, arguments));
  return Verdict::Whole;
}

// NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>
Verdict read_deepseek_v3_1_call(Cursor& c, std::vector<ToolCall>& calls) {
  std::string name;
  json arguments;
  Verdict step = read_name(c, name);
  if (step == Verdict::Whole) step = c.expect(kDeepSeekSep);
  if (step == Verdict::Whole) step = read_json(c, arguments);
  if (step == Verdict::Whole) c.skip_blank(), step = c.expect(kDeepSeekCallEnd);
  if (step != Verdict::Whole) return step;
  if (!arguments.is_object()) return Verdict::Broken;
  calls.push_back(make_call(name, arguments));
  return Verdict::Whole;
}

// functions.NAME:INDEX<|tool_call_argument_begin|>{...}<|tool_call_end|>; the whole
// "functions.NAME:INDEX" is the call's id.
Verdict read_kimi_k2_call(Cursor& c, std::vector<ToolCall>& calls) {
  std::string id;
  json arguments;
  Verdict step = read_name(c, id, ":");
  if (step == Verdict::Whole) step = c.expect("<|tool_call_argument_begin|>");
  if (step == Verdict::Whole) step = read_json(c, arguments);
  if (step == Verdict::Whole) c.skip_blank(), step = c.expect("<|tool_call_end|>");
  if (step != Verdict::Whole) return step;
  std::string_view name = id;
  if (name.starts_with("functions.")) name.remove_prefix(std::string_view("functions.").size());
  name = name.substr(0, name.rfind(':'));
  if (name.empty() || !arguments.is_object()) return Verdict::Broken;
  calls.push_back(make_call(std::string(name), arguments, id));
  return Verdict::Whole;
}

Scan scan_deepseek_r1(Cursor c) {
  return scan_block(c, kDeepSeekCallsBegin, kDeepSeekCallBegin, kDeepSeekCallsEnd, read_deepseek_r1_call);
}
Scan scan_deepseek_v3_1(Cursor c) {
  return scan_block(c, kDeepSeekCallsBegin, kDeepSeekCallBegin, kDeepSeekCallsEnd, read_deepseek_v3_1_call);
}
Scan scan_kimi_k2(Cursor c) {
  return scan_block(c, "<|tool_calls_section_begin|>", "<|tool_call_begin|>", "<|tool_calls_section_end|>",
                    read_kimi_k2_call);
}

// A harmony message whose header (from its <|start|> or <|channel|> to its <|message|>) names
// a recipient "to=functions.NAME": the message is NAME's arguments, ended by <|call|>.
Scan scan_harmony(Cursor c) {
  constexpr std::string_view kMessage = "<|message|>";
  constexpr std::string_view kRecipient = "to=functions.";
  const size_t message = c.text.find(kMessage, c.at);
  const std::string_view header =
      c.text.substr(c.at, message == std::string_view::npos ? std::string_view::npos : message - c.at);
  for (const std::string_view ends : {"<|end|>", "<|call|>", "<|return|>"}) {
    if (header.find(ends) != std::string_view::npos) return {};
  }
  if (header.find("<|start|>", 1) != std::string_view::npos) return {};
  if (message == std::string_view::npos) return stopped(Verdict::Unfinished, c);
  const size_t recipient = header.find(kRecipient);
  if (recipient == std::string_view::npos) return {};
  const std::string_view after = header.substr(recipient + kRecipient.size());
  const std::string name(after.substr(0, after.find_first_of(" \t\n\r<")));
  if (name.empty()) return {};
  c.at = message + kMessage.size();
  json arguments;
  if (const Verdict read = read_json(c, arguments); read != Verdict::Whole) return stopped(read, c);
  if (!arguments.is_object()) return {};
  return closed_by(c, "<|call|>", {make_call(name, arguments)});
}

// <|tool_call|>[{"name": ..., "arguments": {...}}, ...]
Scan scan_granite(Cursor c) {
  c.at += std::string_view("<|tool_call|>").size();
  std::vector<ToolCall> calls;
  if (const Verdict read = read_call_list(c, "name", {"arguments"}, calls); read != Verdict::Whole) {
    return stopped(read, c);
  }
  return whole(c.at, std::move(calls));
}

// <|START_ACTION|>[{"tool_call_id": "0", "tool_name": ..., "parameters": {...}}]<|END_ACTION|>;
// the <|START_RESPONSE|> and <|END_RESPONSE|> around a plain answer are markup only.
Scan scan_command_r(Cursor c) {
  for (const std::string_view wrapper : {"<|START_RESPONSE|>", "<|END_RESPONSE|>"}) {
    if (c.match(wrapper) == Verdict::Whole) return whole(c.at + wrapper.size(), {});
  }
  c.at += std::string_view("<|START_ACTION|>").size();
  std::vector<ToolCall> calls;
  if (const Verdict read = read_call_list(c, "tool_name", {"parameters"}, calls); read != Verdict::Whole) {
    return stopped(read, c);
  }
  for (ToolCall& call : calls) call.id = random_call_id();   // its tool_call_id is only "0", "1", ...
  return closed_by(c, "<|END_ACTION|>", std::move(calls));
}

// How a format's calls are found in an answer.
struct FormatSyntax {
  std::vector<std::string_view> openers;   // markers that begin a call wherever they are
  bool opens_at_start = false;             // the answer's first non-blank text may be a call without a marker
  Scan (*scan)(Cursor) = nullptr;
  std::string_view skipped_after = kBlank;  // dropped after a call (blanks, and a format's separators)
};

const FormatSyntax& syntax_of(ToolCallFormat format) {
  static const FormatSyntax none;
  static const FormatSyntax hermes{{kToolCallTag}, false, scan_hermes};
  static const FormatSyntax qwen3_coder{{kToolCallTag}, false, scan_qwen3_coder};
  static const FormatSyntax glm45{{kToolCallTag}, false, scan_glm45};
  static const FormatSyntax llama3_json{{"<|python_tag|>"}, true, scan_llama3_json, " \t\n\r;"};
  static const FormatSyntax functionary_v3_1{{"<function="}, false, scan_functionary_v3_1};
  static const FormatSyntax functionary_v3_2{{">>>"}, true, scan_functionary_v3_2};
  static const FormatSyntax mistral{{"[TOOL_CALLS]"}, false, scan_mistral};
  static const FormatSyntax deepseek_r1{{kDeepSeekCallsBegin}, false, scan_deepseek_r1};
  static const FormatSyntax deepseek_v3_1{{kDeepSeekCallsBegin}, false, scan_deepseek_v3_1};
  static const FormatSyntax kimi_k2{{"<|tool_calls_section_begin|>"}, false, scan_kimi_k2};
  static const FormatSyntax harmony{{"<|start|>", "<|channel|>"}, false, scan_harmony};
  static const FormatSyntax granite{{"<|tool_call|>"}, false, scan_granite};
  static const FormatSyntax command_r{{"<|START_ACTION|>", "<|START_RESPONSE|>", "<|END_RESPONSE|>"}, false,
                                      scan_command_r};
  switch (format) {
    case ToolCallFormat::None: return none;
    case ToolCallFormat::Hermes: return hermes;
    case ToolCallFormat::Qwen3Coder: return qwen3_coder;
    case ToolCallFormat::Glm45: return glm45;
    case ToolCallFormat::Llama3Json: return llama3_json;
    case ToolCallFormat::FunctionaryV3_1: return functionary_v3_1;
    case ToolCallFormat::FunctionaryV3_2: return functionary_v3_2;
    case ToolCallFormat::Mistral:
    case ToolCallFormat::MistralArgs: return mistral;
    case ToolCallFormat::DeepSeekR1: return deepseek_r1;
    case ToolCallFormat::DeepSeekV3_1: return deepseek_v3_1;
    case ToolCallFormat::KimiK2: return kimi_k2;
    case ToolCallFormat::Harmony: return harmony;
    case ToolCallFormat::Granite: return granite;
    case ToolCallFormat::CommandR: return command_r;
  }
  return none;
}

// What the splitter decided, in the answer's order: content runs and calls.
struct Decided {
  std::string content;
  bool is_call = false;
  ToolCall call;
};

// Splits an answer given piece by piece. Invariant: `pending_` is the answer's text after all
// that was decided; it starts with blanks that may yet belong before a call, or with an opener
// (or the answer's first text, for a format whose calls may open it) whose scan is unfinished,
// or with the beginning of what may become an opener at the end of the text.
class Splitter {
 public:
  explicit Splitter(ToolCallFormat format) : syntax_(syntax_of(format)) {}

  void feed(std::string_view piece, bool final, std::vector<Decided>& out) {
    pending_ += piece;
    for (;;) {
      if (after_call_ && !drop_after_call()) return;
      if (syntax_.opens_at_start && !start_decided_) {
        const size_t first = pending_.find_first_not_of(kBlank);
        if (first == std::string::npos) break;
        const Scan scan = scan_at(first, final);
        if (scan.verdict == Verdict::Unfinished) return;
        start_decided_ = true;
        if (scan.verdict == Verdict::Whole) {
          take(scan, out);
          continue;
        }
      }
      const size_t opener = first_opener();
      if (opener == std::string::npos) break;
      const size_t content_end = end_of_content(opener);
      give_content(content_end, out);
      const Scan scan = scan_at(opener - content_end, final);
      if (scan.verdict == Verdict::Unfinished) return;
      if (scan.verdict == Verdict::Whole) {
        take(scan, out);
      } else {
        give_content(opener - content_end + 1, out);
      }
    }
    give_content(final ? pending_.size() : end_of_content(held_tail()), out);
  }

 private:
  Scan scan_at(size_t at, bool final) const {
    Scan scan = syntax_.scan(Cursor{pending_, at, final});
    if (final && scan.verdict == Verdict::Unfinished) scan.verdict = Verdict::Broken;
    return scan;
  }

  // Drops what follows a call before its next content; false when that is all there is yet.
  bool drop_after_call() {
    const size_t kept = pending_.find_first_not_of(syntax_.skipped_after);
    if (kept == std::string::npos) {
      pending_.clear();
      return false;
    }
    pending_.erase(0, kept);
    after_call_ = false;
    return true;
  }

  size_t first_opener() const {
    size_t first = std::string::npos;
    for (const std::string_view opener : syntax_.openers) first = std::min(first, pending_.find(opener));
    return first;
  }

  // Where an opener may be beginning at the end of the text (the text's size when nowhere).
  size_t held_tail() const {
    size_t longest = 0;
    for (const std::string_view opener : syntax_.openers) longest = std::max(longest, opener.size());
    for (size_t at = pending_.size() > longest ? pending_.size() - longest : 0; at < pending_.size(); ++at) {
      const std::string_view tail = std::string_view(pending_).substr(at);
      for (const std::string_view opener : syntax_.openers) {
        if (opener.starts_with(tail)) return at;
      }
    }
    return pending_.size();
  }

  // The end of the content before `at`: the blanks just before it may precede a call.
  size_t end_of_content(size_t at) const {
    const size_t last = std::string_view(pending_).substr(0, at).find_last_not_of(kBlank);
    return last == std::string::npos ? 0 : last + 1;
  }

  void give_content(size_t length, std::vector<Decided>& out) {
    if (length == 0) return;
    start_decided_ = true;
    if (out.empty() || out.back().is_call) out.push_back({});
    out.back().content.append(pending_, 0, length);
    pending_.erase(0, length);
  }

  void take(const Scan& scan, std::vector<Decided>& out) {
    for (const ToolCall& call : scan.calls) out.push_back({"", true, call});
    pending_.erase(0, scan.end);
    after_call_ = true;
  }

  const FormatSyntax& syntax_;
  std::string pending_;
  bool start_decided_ = false;
  bool after_call_ = false;
};

}  // namespace

const char* tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::None: return "none";
    case ToolCallFormat::Hermes: return "hermes";
    case ToolCallFormat::Qwen3Coder: return "qwen3-coder";
    case ToolCallFormat::Glm45: return "glm-4.5";
    case ToolCallFormat::Llama3Json: return "llama3-json";
    case ToolCallFormat::FunctionaryV3_1: return "functionary-v3.1";
    case ToolCallFormat::FunctionaryV3_2: return "functionary-v3.2";
    case ToolCallFormat::Mistral: return "mistral";
    case ToolCallFormat::MistralArgs: return "mistral-args";
    case ToolCallFormat::DeepSeekR1: return "deepseek-r1";
    case ToolCallFormat::DeepSeekV3_1: return "deepseek-v3.1";
    case ToolCallFormat::KimiK2: return "kimi-k2";
    case ToolCallFormat::Harmony: return "harmony";
    case ToolCallFormat::Granite: return "granite";
    case ToolCallFormat::CommandR: return "command-r";
  }
  return "none";
}

// The markers are checked from the most specific: a template can mention another format's
// marker only in passing (Qwen3-Coder's <tool_call> wraps its <function=>, Kimi's and
// DeepSeek's markers contain nothing of the others').
ToolCallFormat tool_call_format_of(std::string_view source) {
  const auto has = [source](std::string_view marker) { return source.find(marker) != std::string_view::npos; };
  if (has("<|channel|>")) return ToolCallFormat::Harmony;
  if (has("<|tool_calls_section_begin|>")) return ToolCallFormat::KimiK2;
  // DeepSeek V3 and R1 fence the arguments in ```json; V3.1 writes them bare.
  if (has(kDeepSeekCallsBegin)) return has("```json") ? ToolCallFormat::DeepSeekR1 : ToolCallFormat::DeepSeekV3_1;
  if (has("<|START_ACTION|>")) return ToolCallFormat::CommandR;
  if (has("[TOOL_CALLS]")) return has("[ARGS]") ? ToolCallFormat::MistralArgs : ToolCallFormat::Mistral;
  if (has("<|tool_call|>")) return ToolCallFormat::Granite;
  if (has(kToolCallTag)) {
    if (has("<arg_key>")) return ToolCallFormat::Glm45;
    if (has("<function=") && has("<parameter=")) return ToolCallFormat::Qwen3Coder;
    return ToolCallFormat::Hermes;
  }
  if (has(">>>all")) return ToolCallFormat::FunctionaryV3_2;
  if (has("<|start_header_id|>") && has("<function=")) return ToolCallFormat::FunctionaryV3_1;
  if (has("<|start_header_id|>ipython<|end_header_id|>") || has("<|python_tag|>")) return ToolCallFormat::Llama3Json;
  return ToolCallFormat::None;
}

ParsedAnswer parse_tool_calls(ToolCallFormat format, std::string_view text) {
  std::vector<Decided> decided;
  Splitter(format).feed(text, true, decided);
  ParsedAnswer answer;
  for (Decided& part : decided) {
    if (part.is_call) {
      answer.tool_calls.push_back(std::move(part.call));
    } else {
      answer.content += part.content;
    }
  }
  return answer;
}

struct ToolCallStream::State {
  explicit State(ToolCallFormat format) : splitter(format) {}

  void feed(std::string_view piece, bool final, std::vector<ToolCallDelta>& out) {
    std::vector<Decided> decided;
    splitter.feed(piece, final, decided);
    for (Decided& part : decided) {
      if (!part.is_call) {
        out.push_back({std::move(part.content), -1, "", "", ""});
        continue;
      }
      out.push_back({"", next_index, std::move(part.call.id), std::move(part.call.name), ""});
      out.push_back({"", next_index, "", "", std::move(part.call.arguments)});
      ++next_index;
    }
  }

  Splitter splitter;
  int next_index = 0;
};

ToolCallStream::ToolCallStream(ToolCallFormat format) : state_(std::make_unique<State>(format)) {}
ToolCallStream::~ToolCallStream() = default;
ToolCallStream::ToolCallStream(ToolCallStream&&) noexcept = default;
ToolCallStream& ToolCallStream::operator=(ToolCallStream&&) noexcept = default;

void ToolCallStream::push(std::string_view piece, std::vector<ToolCallDelta>& out) { state_->feed(piece, false, out); }
void ToolCallStream::finish(std::vector<ToolCallDelta>& out) { state_->feed({}, true, out); }

}  // namespace kvdesk
