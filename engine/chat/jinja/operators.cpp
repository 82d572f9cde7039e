// Python's operators, membership, iteration, item and attribute access and slicing on values,
// with Jinja2's rules where it adds its own (an attribute falls back to an item and back;
// undefined values iterate as nothing and fail when looked into).
#include <cmath>

#include "engine/chat/jinja/builtins.h"
#include "engine/chat/jinja/interpreter.h"
#include "engine/chat/jinja/text_ops.h"

namespace kvdesk::jinja {
namespace {

[[noreturn]] void unsupported(Interpreter& in, const std::string& op, const Value& a, const Value& b) {
  in.fail("unsupported operand types for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

void check_defined(Interpreter& in, const Value& v) {
  if (v.is_undefined()) {
    in.fail("'" + (v.undefined_name().empty() ? std::string("value") : v.undefined_name()) + "' is undefined");
  }
}

int64_t int_of(const Value& v) { return v.is_bool() ? int64_t(v.as_bool()) : v.as_int(); }
bool is_integral(const Value& v) { return v.is_int() || v.is_bool(); }
bool is_numeric(const Value& v) { return v.is_number() || v.is_bool(); }

Value arithmetic(Interpreter& in, const std::string& op, const Value& a, const Value& b) {
  if (is_integral(a) && is_integral(b)) {
    const int64_t x = int_of(a);
    const int64_t y = int_of(b);
    int64_t r = 0;
    if (op == "+" && !__builtin_add_overflow(x, y, &r)) return Value::integer(r);
    if (op == "-" && !__builtin_sub_overflow(x, y, &r)) return Value::integer(r);
    if (op == "*" && !__builtin_mul_overflow(x, y, &r)) return Value::integer(r);
    if (op == "//" || op == "%") {
      if (y == 0) in.fail("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) in.fail("integer overflow");
      int64_t q = x / y;
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        --q;
        m += y;
      }
      return Value::integer(op == "//" ? q : m);
    }
    if (op == "**" && y >= 0) {
      int64_t result = 1;
      for (int64_t k = 0; k < y; ++k) {
        if (__builtin_mul_overflow(result, x, &result)) in.fail("integer overflow in **");
        if (result == 0 || result == 1) break;
      }
      return Value::integer(result);
    }
    if (op != "/" && op != "**") in.fail("integer overflow in " + op);
  }
  const double x = a.is_bool() ? double(a.as_bool()) : a.as_double();
  const double y = b.is_bool() ? double(b.as_bool()) : b.as_double();
  if (op == "+") return Value::number(x + y);
  if (op == "-") return Value::number(x - y);
  if (op == "*") return Value::number(x * y);
  if (op == "**") return Value::number(std::pow(x, y));
  if (y == 0) in.fail("float division by zero");
  if (op == "/") return Value::number(x / y);
  if (op == "//") return Value::number(std::floor(x / y));
  double m = std::fmod(x, y);
  if (m != 0 && ((m < 0) != (y < 0))) m += y;
  return Value::number(m);
}

Value repeat(Interpreter& in, const Value& seq, int64_t times) {
  if (times <= 0) return seq.is_string() ? Value::string(std::string()) : Value::list({}, seq.list_ref().is_tuple);
  if (seq.is_string()) {
    in.check_size(seq.str().size() * size_t(std::min<int64_t>(times, INT32_MAX)), true);
    in.charge(seq.str().size() * size_t(times) / 64);
    Text out;
    for (int64_t k = 0; k < times; ++k) out.append(seq.text());
    return Value::string(std::move(out));
  }
  in.check_size(seq.items().size() * size_t(std::min<int64_t>(times, INT32_MAX)), false);
  in.charge(seq.items().size() * size_t(times));
  ValueList out;
  for (int64_t k = 0; k < times; ++k) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return Value::list(std::move(out), seq.list_ref().is_tuple);
}

// Python's ordering of two values: numbers, strings (by code point, which UTF-8 byte order
// keeps) and sequences item by item; -1, 0 or 1.
int compare(Interpreter& in, const std::string& op, const Value& a, const Value& b) {
  if (is_numeric(a) && is_numeric(b)) {
    if (is_integral(a) && is_integral(b)) return int_of(a) < int_of(b) ? -1 : int_of(a) > int_of(b);
    const double x = a.is_bool() ? a.as_bool() : a.as_double();
    const double y = b.is_bool() ? b.as_bool() : b.as_double();
    return x < y ? -1 : x > y;
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str() ? -1 : a.str() > b.str();
  if (a.is_list() && b.is_list()) {
    const ValueList& x = a.items();
    const ValueList& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!x[i].equals(y[i])) return compare(in, op, x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size();
  }
  check_defined(in, a);
  check_defined(in, b);
  in.fail("'" + op + "' not supported between '" + a.type_name() + "' and '" + b.type_name() + "'");
}

}  // namespace

Value binary_operator(Interpreter& in, const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    in.charge(0);
    Text out = a.to_text();
    out.append(b.to_text());
    in.check_size(out.bytes.size(), true);
    in.charge(out.bytes.size() / 64);
    return Value::string(std::move(out));
  }
  if (op == "<" || op == "<=" || op == ">" || op == ">=") {
    const int c = compare(in, op, a, b);
    if (op == "<") return Value::boolean(c < 0);
    if (op == "<=") return Value::boolean(c <= 0);
    if (op == ">") return Value::boolean(c > 0);
    return Value::boolean(c >= 0);
  }
  check_defined(in, a);
  check_defined(in, b);
  if (is_numeric(a) && is_numeric(b)) return arithmetic(in, op, a, b);
  if (op == "+" && a.is_string() && b.is_string()) {
    in.check_size(a.str().size() + b.str().size(), true);
    in.charge((a.str().size() + b.str().size()) / 64);
    Text out = a.text();
    out.append(b.text());
    return Value::string(std::move(out));
  }
  if (op == "+" && a.is_list() && b.is_list() && a.list_ref().is_tuple == b.list_ref().is_tuple) {
    in.check_size(a.items().size() + b.items().size(), false);
    in.charge(a.items().size() + b.items().size());
    ValueList out = a.items();
    out.insert(out.end(), b.items().begin(), b.items().end());
    return Value::list(std::move(out), a.list_ref().is_tuple);
  }
  if (op == "*" && (a.is_string() || a.is_list()) && is_integral(b)) return repeat(in, a, int_of(b));
  if (op == "*" && (b.is_string() || b.is_list()) && is_integral(a)) return repeat(in, b, int_of(a));
  if (op == "%" && a.is_string()) {
    CallArgs args;
    args.positional = b.is_list() && b.list_ref().is_tuple ? b.items() : ValueList{b};
    return in.filter("format", a, args);
  }
  unsupported(in, op, a, b);
}

bool contains(Interpreter& in, const Value& haystack, const Value& needle) {
  if (haystack.is_string()) {
    if (!needle.is_string()) in.fail("'in <string>' requires a string as left operand, not " + std::string(needle.type_name()));
    return haystack.str().find(needle.str()) != std::string::npos;
  }
  if (haystack.is_list()) {
    in.charge(haystack.items().size());
    for (const Value& v : haystack.items()) {
      if (v.equals(needle)) return true;
    }
    return false;
  }
  if (haystack.is_dict()) {
    in.charge(haystack.dict_ref().entries.size());
    return haystack.dict_ref().find(needle) != nullptr;
  }
  if (haystack.is_undefined()) return false;
  in.fail("argument of type '" + std::string(haystack.type_name()) + "' is not iterable");
}

ValueList iterate(Interpreter& in, const Value& v) {
  if (v.is_list()) in.charge(v.items().size());
  if (v.is_dict()) in.charge(v.dict_ref().entries.size());
  if (v.is_string()) in.charge(v.str().size());
  switch (v.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::List: return v.items();
    case Value::Kind::Dict: {
      ValueList keys;
      for (const auto& [k, value] : v.dict_ref().entries) keys.push_back(k);
      return keys;
    }
    case Value::Kind::String: {
      ValueList chars;
      const std::vector<size_t> at = code_point_offsets(v.str());
      for (size_t k = 0; k + 1 < at.size(); ++k) chars.push_back(Value::string(v.text().substr(at[k], at[k + 1] - at[k])));
      return chars;
    }
    default: in.fail("'" + std::string(v.type_name()) + "' object is not iterable");
  }
}

namespace {

// A Python index into a sequence of n; npos when out of range.
size_t resolve_index(int64_t index, size_t n) {
  if (index < 0) index += int64_t(n);
  return index < 0 || size_t(index) >= n ? std::string::npos : size_t(index);
}

// An absent item or attribute: undefined, named by the key for the error that using it gives.
Value missing(const Value& key) { return Value::undefined(key.is_string() ? key.str() : key.repr()); }

}  // namespace

Value get_item(Interpreter& in, const Value& obj, const Value& key) {
  check_defined(in, obj);
  if (obj.is_dict()) {
    in.charge(obj.dict_ref().entries.size() / 8);
    if (const Value* v = obj.dict_ref().find(key)) return *v;
  } else if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    if (obj.is_list()) {
      const size_t i = resolve_index(int_of(key), obj.items().size());
      return i == std::string::npos ? missing(key) : obj.items()[i];
    }
    const std::vector<size_t> at = code_point_offsets(obj.str());
    const size_t i = resolve_index(int_of(key), at.size() - 1);
    return i == std::string::npos ? missing(key) : Value::string(obj.text().substr(at[i], at[i + 1] - at[i]));
  }
  if (key.is_string()) {
    if (std::optional<Value> method = bound_method(obj, key.str())) return *method;
  }
  return missing(key);
}

Value get_attribute(Interpreter& in, const Value& obj, const std::string& name) {
  check_defined(in, obj);
  if (std::optional<Value> method = bound_method(obj, name)) return *method;
  if (obj.is_dict()) {
    in.charge(obj.dict_ref().entries.size() / 8);
    if (const Value* v = obj.dict_ref().find(name)) return *v;
  }
  return Value::undefined(name);
}

Value slice(Interpreter& in, const Value& obj, const Value& start, const Value& stop, const Value& step) {
  check_defined(in, obj);
  if (!obj.is_list() && !obj.is_string()) in.fail("'" + std::string(obj.type_name()) + "' object is not subscriptable");
  const auto bound = [&](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_none() || v.is_undefined()) return std::nullopt;
    if (!is_integral(v)) in.fail(std::string("slice ") + what + " must be an integer");
    return int_of(v);
  };
  const int64_t s = bound(step, "step").value_or(1);
  if (s == 0) in.fail("slice step cannot be zero");
  const std::vector<size_t> at = obj.is_string() ? code_point_offsets(obj.str()) : std::vector<size_t>{};
  const auto n = int64_t(obj.is_string() ? at.size() - 1 : obj.items().size());
  // Python's slice.indices(n).
  const auto clamp = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t i = *v < 0 ? *v + n : *v;
    if (s > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t begin = clamp(bound(start, "start"), s > 0 ? 0 : n - 1);
  const int64_t end = clamp(bound(stop, "stop"), s > 0 ? n : -1);
  std::vector<int64_t> picked;
  for (int64_t i = begin; s > 0 ? i < end : i > end; i += s) picked.push_back(i);
  if (obj.is_string()) {
    Text out;
    for (const int64_t i : picked) out.append(obj.text().substr(at[size_t(i)], at[size_t(i) + 1] - at[size_t(i)]));
    return Value::string(std::move(out));
  }
  ValueList out;
  for (const int64_t i : picked) out.push_back(obj.items()[size_t(i)]);
  return Value::list(std::move(out), obj.list_ref().is_tuple);
}

}  // namespace kvdesk::jinja
