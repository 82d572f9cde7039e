// Python's json.dumps written out: its escapes (\" \\ \n \r \t \b \f, \u00XX for other control
// characters, non-ASCII kept unless ensure_ascii), its float repr, its separators and indents.
#include "engine/chat/jinja/json_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "engine/chat/jinja/text_ops.h"

namespace kvdesk::jinja {
namespace {

void append_escaped(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    char buf[16];
    if (c == '"') {
      out += "\\\"";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\b') {
      out += "\\b";
    } else if (c == '\f') {
      out += "\\f";
    } else if (c < 0x20) {
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else if (c >= 0x80 && ensure_ascii) {
      const uint32_t cp = next_code_point(s, i);
      if (cp >= 0x10000) {
        const uint32_t v = cp - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      }
      out += buf;
      continue;
    } else {
      out += char(c);
    }
    ++i;
  }
  out += '"';
}

std::string float_json(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f > 0 ? "Infinity" : "-Infinity";
  return python_float_repr(f);
}

class JsonWriter {
 public:
  JsonWriter(const JsonStyle& style, const std::function<void(const std::string&)>& fail) : style_(style), fail_(fail) {}

  void write(const Value& v, int level) {
    if (level > 500) fail_("tojson: the value nests too deep");
    switch (v.kind()) {
      case Value::Kind::None: out_.append("null"); return;
      case Value::Kind::Bool: out_.append(v.as_bool() ? "true" : "false"); return;
      case Value::Kind::Int: out_.append(std::to_string(v.as_int())); return;
      case Value::Kind::Float: out_.append(float_json(v.as_double())); return;
      case Value::Kind::String: string(v.text()); return;
      case Value::Kind::List: list(v.items(), level); return;
      case Value::Kind::Dict: dict(v.dict_ref(), level); return;
      default: fail_(std::string("tojson: Object of type ") + v.type_name() + " is not JSON serializable");
    }
  }

  Text take() { return std::move(out_); }

 private:
  void string(const Text& t) {
    std::string escaped;
    append_escaped(escaped, t.bytes, style_.ensure_ascii);
    out_.append_marked(escaped, t.any_content());
  }

  void newline(int level) {
    if (!style_.indent) return;
    std::string s = "\n";
    for (int k = 0; k < level; ++k) s += *style_.indent;
    out_.append(s);
  }

  void list(const ValueList& items, int level) {
    if (items.empty()) {
      out_.append("[]");
      return;
    }
    out_.append("[");
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out_.append(style_.item_separator);
      newline(level + 1);
      write(items[i], level + 1);
    }
    newline(level);
    out_.append("]");
  }

  // Python's json writes keys as strings: str keys as they are, numbers and constants as JSON.
  Text key_text(const Value& k) {
    if (k.is_string()) return k.text();
    if (k.is_none()) return Text("null");
    if (k.is_bool()) return Text(k.as_bool() ? "true" : "false");
    if (k.is_int()) return Text(std::to_string(k.as_int()));
    if (k.is_float()) return Text(float_json(k.as_double()));
    fail_(std::string("tojson: keys must be str, int, float, bool or None, not ") + k.type_name());
    return {};
  }

  void dict(const Dict& d, int level) {
    if (d.entries.empty()) {
      out_.append("{}");
      return;
    }
    std::vector<std::pair<Text, const Value*>> entries;
    for (const auto& [k, v] : d.entries) entries.emplace_back(key_text(k), &v);
    if (style_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first.bytes < b.first.bytes; });
    }
    out_.append("{");
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i) out_.append(style_.item_separator);
      newline(level + 1);
      string(entries[i].first);
      out_.append(style_.key_separator);
      write(*entries[i].second, level + 1);
    }
    newline(level);
    out_.append("}");
  }

  const JsonStyle& style_;
  const std::function<void(const std::string&)>& fail_;
  Text out_;
};

}  // namespace

Text to_json(const Value& v, const JsonStyle& style, const std::function<void(const std::string&)>& fail) {
  JsonWriter writer(style, fail);
  writer.write(v, 0);
  return writer.take();
}

Value value_from_json(const nlohmann::ordered_json& j, bool as_content) {
  using json = nlohmann::ordered_json;
  switch (j.type()) {
    case json::value_t::null: return Value::none();
    case json::value_t::boolean: return Value::boolean(j.get<bool>());
    case json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      return u > uint64_t(INT64_MAX) ? Value::number(double(u)) : Value::integer(int64_t(u));
    }
    case json::value_t::number_float: return Value::number(j.get<double>());
    case json::value_t::string:
      return as_content ? Value::string(Text::of_content(j.get<std::string>())) : Value::string(j.get<std::string>());
    case json::value_t::array: {
      ValueList items;
      for (const json& item : j) items.push_back(value_from_json(item, as_content));
      return Value::list(std::move(items));
    }
    case json::value_t::object: {
      auto d = std::make_shared<Dict>();
      for (auto it = j.begin(); it != j.end(); ++it) {
        Value key = as_content ? Value::string(Text::of_content(it.key())) : Value::string(it.key());
        d->entries.emplace_back(std::move(key), value_from_json(it.value(), as_content));
      }
      return Value::dict(d);
    }
    default: return Value::none();
  }
}

}  // namespace kvdesk::jinja
