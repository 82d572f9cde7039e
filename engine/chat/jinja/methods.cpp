// The methods templates call on Python's str, dict and list (`content.strip()`,
// `message.get('tool_calls')`, `ns.items.append(x)`), bound to their object.
#include <algorithm>
#include <initializer_list>

#include "engine/chat/jinja/builtins.h"
#include "engine/chat/jinja/interpreter.h"
#include "engine/chat/jinja/text_ops.h"

namespace kvdesk::jinja {
namespace {

using Method = Value (*)(Interpreter&, const Value& self, const CallArgs& args);

const Value* arg(const CallArgs& args, size_t index, std::string_view name) { return args.get(index, name); }

std::string string_arg(Interpreter& in, const CallArgs& args, size_t index, std::string_view name,
                       const char* method) {
  const Value* v = arg(args, index, name);
  if (!v || v->is_none()) return {};
  if (!v->is_string()) in.fail(std::string(method) + "() argument must be a str, not " + v->type_name());
  return v->str();
}

int64_t int_arg(const CallArgs& args, size_t index, std::string_view name, int64_t fallback) {
  const Value* v = arg(args, index, name);
  return v && v->is_int() ? v->as_int() : fallback;
}

// ---- str ----

Value str_strip(const Value& self, const CallArgs& args, bool left, bool right) {
  const Value* chars = arg(args, 0, "chars");
  return Value::string(strip(self.text(), chars && chars->is_string() ? chars->str() : "", left, right));
}

Value split_method(Interpreter& in, const Value& self, const CallArgs& args) {
  const std::string sep = string_arg(in, args, 0, "sep", "split");
  const Value* given = arg(args, 0, "sep");
  if (given && given->is_string() && sep.empty()) in.fail("split(): empty separator");
  ValueList parts;
  for (Text& t : split(self.text(), sep, int_arg(args, 1, "maxsplit", -1))) parts.push_back(Value::string(std::move(t)));
  return Value::list(std::move(parts));
}

// startswith / endswith with a str or a tuple of them.
bool affix_matches(Interpreter& in, const Value& self, const CallArgs& args, bool prefix) {
  const Value* a = arg(args, 0, prefix ? "prefix" : "suffix");
  if (!a) in.fail(prefix ? "startswith() takes an argument" : "endswith() takes an argument");
  const ValueList candidates = a->is_list() ? a->items() : ValueList{*a};
  const std::string& s = self.str();
  for (const Value& c : candidates) {
    if (!c.is_string()) in.fail("startswith/endswith first arg must be str or a tuple of str");
    const std::string& x = c.str();
    if (prefix ? s.starts_with(x) : s.ends_with(x)) return true;
  }
  return false;
}

Value str_replace(Interpreter& in, const Value& self, const CallArgs& args) {
  const Value* old_text = arg(args, 0, "old");
  const Value* new_text = arg(args, 1, "new");
  if (!old_text || !new_text || !old_text->is_string() || !new_text->is_string()) in.fail("replace() takes two strings");
  Text out = replace(self.text(), old_text->str(), new_text->text(), int_arg(args, 2, "count", -1));
  in.check_size(out.bytes.size(), true);
  return Value::string(std::move(out));
}

Value str_join(Interpreter& in, const Value& self, const CallArgs& args) {
  const Value* items = arg(args, 0, "iterable");
  if (!items) in.fail("join() takes an argument");
  Text out;
  bool first = true;
  for (const Value& v : iterate(in, *items)) {
    if (!v.is_string()) in.fail("join(): sequence item must be str, not " + std::string(v.type_name()));
    if (!first) out.append(self.text());
    first = false;
    out.append(v.text());
    in.check_size(out.bytes.size(), true);
  }
  return Value::string(std::move(out));
}

// Python's str.format with {} {0} {name} fields (a format spec is applied as %-formatting of
// the same spec: {:.2f}, {:>5}).
Value str_format(Interpreter& in, const Value& self, const CallArgs& args) {
  const std::string& f = self.str();
  Text out;
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if ((c == '{' || c == '}') && i + 1 < f.size() && f[i + 1] == c) {
      out.append(std::string(1, c));
      ++i;
      continue;
    }
    if (c != '{') {
      out.append(self.text().substr(i, 1));
      continue;
    }
    const size_t close = f.find('}', i);
    if (close == std::string::npos) in.fail("format(): single '{' encountered in format string");
    std::string field = f.substr(i + 1, close - i - 1);
    std::string spec;
    if (const size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.erase(colon);
    }
    const Value* v = nullptr;
    if (field.empty()) {
      v = auto_index < args.positional.size() ? &args.positional[auto_index++] : nullptr;
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t k = std::stoul(field);
      v = k < args.positional.size() ? &args.positional[k] : nullptr;
    } else {
      v = args.get(SIZE_MAX, field);
    }
    if (!v) in.fail("format(): no argument for field {" + field + "}");
    if (spec.empty()) {
      out.append(v->to_text());
    } else {
      CallArgs one;
      one.positional.push_back(*v);
      out.append(in.filter("format", Value::string("%" + spec + (v->is_string() ? "s" : v->is_float() ? "f" : "d")), one).text());
    }
    i = close;
  }
  return Value::string(std::move(out));
}

template <typename Pred>
bool all_code_points(const std::string& s, Pred pred) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size();) {
    if (!pred(next_code_point(s, i))) return false;
  }
  return true;
}

Value str_method(Interpreter& in, const Value& self, const std::string& name, const CallArgs& args) {
  if (name == "strip") return str_strip(self, args, true, true);
  if (name == "lstrip") return str_strip(self, args, true, false);
  if (name == "rstrip") return str_strip(self, args, false, true);
  if (name == "split" || name == "rsplit") return split_method(in, self, args);
  if (name == "startswith") return Value::boolean(affix_matches(in, self, args, true));
  if (name == "endswith") return Value::boolean(affix_matches(in, self, args, false));
  if (name == "replace") return str_replace(in, self, args);
  if (name == "upper") return Value::string(change_case(self.text(), Case::Upper));
  if (name == "lower") return Value::string(change_case(self.text(), Case::Lower));
  if (name == "title") return Value::string(python_title(self.text()));
  if (name == "capitalize") return Value::string(capitalize(self.text()));
  if (name == "format") return str_format(in, self, args);
  if (name == "join") return str_join(in, self, args);
  const std::string& s = self.str();
  if (name == "find" || name == "rfind" || name == "index" || name == "count") {
    const std::string sub = string_arg(in, args, 0, "sub", name.c_str());
    if (name == "count") {
      if (sub.empty()) return Value::integer(int64_t(code_point_count(s)) + 1);
      int64_t n = 0;
      for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
      return Value::integer(n);
    }
    const size_t at = name == "rfind" ? s.rfind(sub) : s.find(sub);
    if (at == std::string::npos && name == "index") in.fail("index(): substring not found");
    return Value::integer(at == std::string::npos ? -1 : int64_t(code_point_count(std::string_view(s).substr(0, at))));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const std::string affix = string_arg(in, args, 0, "prefix", name.c_str());
    if (name == "removeprefix" && s.starts_with(affix)) return Value::string(self.text().substr(affix.size(), s.size()));
    if (name == "removesuffix" && !affix.empty() && s.ends_with(affix)) return Value::string(self.text().substr(0, s.size() - affix.size()));
    return self;
  }
  if (name == "splitlines") {
    ValueList lines;
    for (Text& t : split(self.text(), "\n", -1)) lines.push_back(Value::string(std::move(t)));
    if (!lines.empty() && lines.back().str().empty()) lines.pop_back();
    return Value::list(std::move(lines));
  }
  if (name == "isdigit") return Value::boolean(all_code_points(s, [](uint32_t c) { return c >= '0' && c <= '9'; }));
  if (name == "isspace") return Value::boolean(all_code_points(s, is_python_space));
  if (name == "isalpha" || name == "isalnum" || name == "isupper" || name == "islower") {
    const Text upper = change_case(self.text(), Case::Upper);
    const Text lower = change_case(self.text(), Case::Lower);
    if (name == "isupper") return Value::boolean(s == upper.bytes && s != lower.bytes);
    if (name == "islower") return Value::boolean(s == lower.bytes && s != upper.bytes);
    const bool alnum = name == "isalnum";
    return Value::boolean(all_code_points(s, [alnum](uint32_t c) {
      const bool ascii_letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
      return ascii_letter || c >= 0x80 || (alnum && c >= '0' && c <= '9');
    }));
  }
  in.fail("'str' object has no method '" + name + "'");
}

constexpr std::initializer_list<const char*> kStrMethods = {"strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith",
                                       "replace", "upper", "lower", "title", "capitalize", "format", "join", "find",
                                       "rfind", "index", "count", "removeprefix", "removesuffix", "splitlines",
                                       "isdigit", "isspace", "isalpha", "isalnum", "isupper", "islower"};

// ---- dict ----

Value dict_method(Interpreter& in, const Value& self, const std::string& name, const CallArgs& args) {
  Dict& d = self.dict_ref();
  in.charge(d.entries.size());
  if (name == "items") {
    ValueList items;
    for (const auto& [k, v] : d.entries) items.push_back(Value::list({k, v}, true));
    return Value::list(std::move(items));
  }
  if (name == "keys" || name == "values") {
    ValueList items;
    for (const auto& [k, v] : d.entries) items.push_back(name == "keys" ? k : v);
    return Value::list(std::move(items));
  }
  if (name == "get" || name == "pop" || name == "setdefault") {
    const Value* key = arg(args, 0, "key");
    if (!key) in.fail(name + "() takes a key");
    const Value* fallback = arg(args, 1, "default");
    const Value* found = d.find(*key);
    Value result = found ? *found : fallback ? *fallback : Value::none();
    if (name == "pop" && found) {
      d.entries.erase(std::find_if(d.entries.begin(), d.entries.end(), [&](const auto& e) { return e.first.equals(*key); }));
    } else if (name == "pop" && !fallback) {
      in.fail("pop(): key " + key->repr() + " not found");
    }
    if (name == "setdefault" && !found) d.set(*key, result);
    return result;
  }
  if (name == "update") {
    const Value* other = arg(args, 0, "other");
    if (other && other->is_dict()) {
      for (const auto& [k, v] : other->dict_ref().entries) d.set(k, v);
    }
    for (const auto& [k, v] : args.named) d.set(Value::string(k), v);
    in.check_size(d.entries.size(), false);
    return Value::none();
  }
  if (name == "copy") return Value::dict(std::make_shared<Dict>(Dict{d.entries, false}));
  in.fail("'dict' object has no method '" + name + "'");
}

constexpr std::initializer_list<const char*> kDictMethods = {"items", "keys", "values", "get", "pop", "setdefault", "update", "copy"};

// ---- list ----

Value list_method(Interpreter& in, const Value& self, const std::string& name, const CallArgs& args) {
  ValueList& items = self.list_ref().items;
  const Value* a = arg(args, 0, "x");
  if (name == "append") {
    if (!a) in.fail("append() takes an argument");
    in.check_size(items.size() + 1, false);
    items.push_back(*a);
    return Value::none();
  }
  if (name == "extend") {
    if (!a) in.fail("extend() takes an argument");
    const ValueList more = iterate(in, *a);
    in.charge(more.size());
    in.check_size(items.size() + more.size(), false);
    items.insert(items.end(), more.begin(), more.end());
    return Value::none();
  }
  if (name == "pop") {
    if (items.empty()) in.fail("pop from empty list");
    int64_t i = a && a->is_int() ? a->as_int() : -1;
    if (i < 0) i += int64_t(items.size());
    if (i < 0 || size_t(i) >= items.size()) in.fail("pop index out of range");
    Value v = items[size_t(i)];
    items.erase(items.begin() + i);
    return v;
  }
  if (name == "insert") {
    const Value* x = arg(args, 1, "object");
    if (!a || !a->is_int() || !x) in.fail("insert() takes an index and a value");
    in.check_size(items.size() + 1, false);
    int64_t i = a->as_int() < 0 ? a->as_int() + int64_t(items.size()) : a->as_int();
    i = std::clamp<int64_t>(i, 0, int64_t(items.size()));
    items.insert(items.begin() + i, *x);
    return Value::none();
  }
  if (name == "index" || name == "count" || name == "copy" || name == "insert" || name == "pop") in.charge(items.size());
  if (name == "index" || name == "count") {
    if (!a) in.fail(name + "() takes an argument");
    int64_t n = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].equals(*a)) continue;
      if (name == "index") return Value::integer(int64_t(i));
      ++n;
    }
    if (name == "index") in.fail("index(): value is not in list");
    return Value::integer(n);
  }
  if (name == "copy") return Value::list(items);
  if (name == "reverse") {
    std::reverse(items.begin(), items.end());
    return Value::none();
  }
  in.fail("'list' object has no method '" + name + "'");
}

constexpr std::initializer_list<const char*> kListMethods = {"append", "extend", "pop", "insert", "index", "count", "copy", "reverse"};
constexpr std::initializer_list<const char*> kTupleMethods = {"index", "count"};

bool listed(std::initializer_list<const char*> names, const std::string& name) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return name == n; });
}

}  // namespace

std::optional<Value> bound_method(const Value& obj, const std::string& name) {
  using Call = Value (*)(Interpreter&, const Value&, const std::string&, const CallArgs&);
  Call call = nullptr;
  if (obj.is_string() && listed(kStrMethods, name)) call = str_method;
  if (obj.is_dict() && !obj.dict_ref().is_namespace && listed(kDictMethods, name)) call = dict_method;
  if (obj.is_list() && listed(obj.list_ref().is_tuple ? kTupleMethods : kListMethods, name)) call = list_method;
  if (!call) return std::nullopt;
  return Value::function(name, [obj, name, call](const CallArgs& args, Interpreter& in) { return call(in, obj, name, args); });
}

}  // namespace kvdesk::jinja
