// Values: construction, Python truth and equality, str() and repr().
#include "engine/chat/jinja/value.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace kvdesk::jinja {

Text Text::of_content(std::string content_bytes) {
  Text t;
  t.append_marked(content_bytes, true);
  return t;
}

bool Text::any_content() const {
  for (uint8_t c : content) {
    if (c) return true;
  }
  return false;
}

void Text::append(const Text& other) {
  if (other.content.empty() && content.empty()) {
    bytes += other.bytes;
    return;
  }
  if (content.empty()) content.assign(bytes.size(), 0);
  bytes += other.bytes;
  if (other.content.empty()) {
    content.resize(bytes.size(), 0);
  } else {
    content.insert(content.end(), other.content.begin(), other.content.end());
  }
}

void Text::append(std::string_view template_bytes) { append_marked(template_bytes, false); }

void Text::append_marked(std::string_view more, bool as_content) {
  if (!as_content && content.empty()) {
    bytes += more;
    return;
  }
  if (content.empty()) content.assign(bytes.size(), 0);
  bytes += more;
  content.resize(bytes.size(), as_content ? 1 : 0);
}

Text Text::substr(size_t begin, size_t count) const {
  Text out;
  out.bytes = bytes.substr(begin, count);
  if (!content.empty()) {
    const size_t end = begin + out.bytes.size();
    out.content.assign(content.begin() + ptrdiff_t(begin), content.begin() + ptrdiff_t(end));
  }
  return out;
}

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : entries) {
    if (k.equals(key)) return &v;
  }
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k.is_string() && k.str() == key) return &v;
  }
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto& [k, v] : entries) {
    if (k.equals(key)) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

const Value* CallArgs::get(size_t index, std::string_view name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [n, v] : named) {
    if (n == name) return &v;
  }
  return nullptr;
}

Value Value::undefined(std::string name) {
  Value v;
  if (!name.empty()) v.str_ = std::make_shared<const Text>(std::move(name));
  return v;
}

const std::string& Value::undefined_name() const {
  static const std::string kNone;
  return kind_ == Kind::Undefined && str_ ? str_->bytes : kNone;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.b_ = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.i_ = i;
  return v;
}

Value Value::number(double f) {
  Value v;
  v.kind_ = Kind::Float;
  v.f_ = f;
  return v;
}

Value Value::string(Text t) {
  Value v;
  v.kind_ = Kind::String;
  v.str_ = std::make_shared<const Text>(std::move(t));
  return v;
}

Value Value::string(std::string template_bytes) { return string(Text(std::move(template_bytes))); }

Value Value::list(ValueList items, bool is_tuple) {
  Value v;
  v.kind_ = Kind::List;
  v.list_ = std::make_shared<List>(List{std::move(items), is_tuple});
  return v;
}

Value Value::dict(std::shared_ptr<Dict> d) {
  Value v;
  v.kind_ = Kind::Dict;
  v.dict_ = d ? std::move(d) : std::make_shared<Dict>();
  return v;
}

Value Value::function(std::string name, std::function<Value(const CallArgs&, Interpreter&)> call) {
  Value v;
  v.kind_ = Kind::Function;
  v.fn_ = std::make_shared<const Function>(Function{std::move(name), std::move(call)});
  return v;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return b_;
    case Kind::Int: return i_ != 0;
    case Kind::Float: return f_ != 0;
    case Kind::String: return !str_->bytes.empty();
    case Kind::List: return !list_->items.empty();
    case Kind::Dict: return !dict_->entries.empty();
    case Kind::Function: return true;
  }
  return false;
}

bool Value::equals(const Value& o) const {
  const bool numeric = (is_number() || is_bool()) && (o.is_number() || o.is_bool());
  if (numeric) {
    if (is_float() || o.is_float()) return as_double() == o.as_double();
    const int64_t a = is_bool() ? int64_t(b_) : i_;
    const int64_t b = o.is_bool() ? int64_t(o.b_) : o.i_;
    return a == b;
  }
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::String: return str_->bytes == o.str_->bytes;
    case Kind::List: {
      if (list_ == o.list_) return true;
      const ValueList& a = list_->items;
      const ValueList& b = o.list_->items;
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!a[i].equals(b[i])) return false;
      }
      return true;
    }
    case Kind::Dict: {
      if (dict_ == o.dict_) return true;
      if (dict_->entries.size() != o.dict_->entries.size()) return false;
      for (const auto& [k, v] : dict_->entries) {
        const Value* other = o.dict_->find(k);
        if (!other || !other->equals(v)) return false;
      }
      return true;
    }
    case Kind::Function: return fn_ == o.fn_;
    default: return false;
  }
}

Text Value::to_text() const {
  switch (kind_) {
    case Kind::Undefined: return Text();
    case Kind::String: return *str_;
    default: return Text(repr());
  }
}

namespace {

std::string int_text(int64_t i) { return std::to_string(i); }

std::string join_repr(const ValueList& items, const char* open, const char* close, bool tuple) {
  std::string out = open;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    out += items[i].repr();
  }
  if (tuple && items.size() == 1) out += ",";
  return out + close;
}

}  // namespace

std::string Value::repr() const {
  switch (kind_) {
    case Kind::Undefined: return "";
    case Kind::None: return "None";
    case Kind::Bool: return b_ ? "True" : "False";
    case Kind::Int: return int_text(i_);
    case Kind::Float: return python_float_repr(f_);
    case Kind::String: return python_string_repr(str_->bytes);
    case Kind::List:
      return list_->is_tuple ? join_repr(list_->items, "(", ")", true) : join_repr(list_->items, "[", "]", false);
    case Kind::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : dict_->entries) {
        if (!first) out += ", ";
        first = false;
        out += k.repr() + ": " + v.repr();
      }
      return out + "}";
    }
    case Kind::Function: return "<function " + fn_->name + ">";
  }
  return "";
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return list_->is_tuple ? "tuple" : "list";
    case Kind::Dict: return dict_->is_namespace ? "Namespace" : "dict";
    case Kind::Function: return "function";
  }
  return "?";
}

std::string python_float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  if (f == 0) return std::signbit(f) ? "-0.0" : "0.0";
  // The shortest %.Ne that reads back as f gives Python's digits and exponent.
  char buf[40];
  for (int precision = 0; precision < 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*e", precision, f);
    if (std::strtod(buf, nullptr) == f) break;
  }
  const std::string sci = buf;
  const size_t e = sci.find('e');
  const int exponent = std::atoi(sci.c_str() + e + 1);
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (sci[i] >= '0' && sci[i] <= '9') digits += sci[i];
  }
  const std::string sign = f < 0 ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    std::string mantissa = digits.substr(0, 1);
    if (digits.size() > 1) mantissa += "." + digits.substr(1);
    char exp[16];
    std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return sign + mantissa + exp;
  }
  if (exponent < 0) return sign + "0." + std::string(size_t(-exponent - 1), '0') + digits;
  const size_t int_digits = size_t(exponent) + 1;
  if (digits.size() <= int_digits) return sign + digits + std::string(int_digits - digits.size(), '0') + ".0";
  return sign + digits.substr(0, int_digits) + "." + digits.substr(int_digits);
}

std::string python_string_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + quote;
}

}  // namespace kvdesk::jinja
