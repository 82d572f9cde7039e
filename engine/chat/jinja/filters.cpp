// Jinja2's filters as chat templates use them, transformers' tojson among them, with Jinja2's
// argument names and defaults.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "engine/chat/jinja/builtins.h"
#include "engine/chat/jinja/interpreter.h"
#include "engine/chat/jinja/json_text.h"
#include "engine/chat/jinja/text_ops.h"

namespace kvdesk::jinja {
namespace {

const Value* arg(const CallArgs& args, size_t index, std::string_view name) { return args.get(index, name); }

bool bool_arg(const CallArgs& args, size_t index, std::string_view name, bool fallback) {
  const Value* v = arg(args, index, name);
  return v ? v->truthy() : fallback;
}

std::string string_arg(const CallArgs& args, size_t index, std::string_view name, std::string fallback) {
  const Value* v = arg(args, index, name);
  return v && v->is_string() ? v->str() : std::move(fallback);
}

Value text_input(Interpreter&, const Value& input) { return input.is_string() ? input : Value::string(input.to_text()); }

// A dotted attribute path ("function.name") of an item, as Jinja2's make_attrgetter reads it.
Value attribute_of(Interpreter& in, const Value& item, const std::string& path) {
  Value v = item;
  size_t from = 0;
  while (true) {
    const size_t dot = path.find('.', from);
    const std::string part = path.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = digits ? get_item(in, v, Value::integer(std::stoll(part))) : get_item(in, v, Value::string(part));
    if (dot == std::string::npos) return v;
    from = dot + 1;
  }
}

// ---- strings ----

Value f_trim(Interpreter& in, const Value& input, const CallArgs& args) {
  const Value s = text_input(in, input);
  return Value::string(strip(s.text(), string_arg(args, 0, "chars", ""), true, true));
}
Value f_upper(Interpreter& in, const Value& input, const CallArgs&) {
  return Value::string(change_case(text_input(in, input).text(), Case::Upper));
}
Value f_lower(Interpreter& in, const Value& input, const CallArgs&) {
  return Value::string(change_case(text_input(in, input).text(), Case::Lower));
}
Value f_capitalize(Interpreter& in, const Value& input, const CallArgs&) {
  return Value::string(capitalize(text_input(in, input).text()));
}

// Jinja2's title: each word's first letter upper, the rest lower, words split at whitespace and
// - ( { [ <.
Value f_title(Interpreter& in, const Value& input, const CallArgs&) {
  const Text t = text_input(in, input).text();
  Text out;
  bool word_start = true;
  for (size_t i = 0; i < t.bytes.size();) {
    const size_t start = i;
    const uint32_t cp = next_code_point(t.bytes, i);
    const bool separator = is_python_space(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
    const Text piece = t.substr(start, i - start);
    out.append(separator ? piece : change_case(piece, word_start ? Case::Upper : Case::Lower));
    word_start = separator;
  }
  return Value::string(std::move(out));
}

Value f_replace(Interpreter& in, const Value& input, const CallArgs& args) {
  const Value* old_text = arg(args, 0, "old");
  const Value* new_text = arg(args, 1, "new");
  if (!old_text || !new_text) in.fail("replace needs the old and the new text");
  const Value* count = arg(args, 2, "count");
  Text out = replace(text_input(in, input).text(), old_text->to_text().bytes, new_text->to_text(),
                     count && count->is_int() ? count->as_int() : -1);
  in.check_size(out.bytes.size(), true);
  return Value::string(std::move(out));
}

Value f_string(Interpreter& in, const Value& input, const CallArgs&) { return text_input(in, input); }

Value f_safe(Interpreter&, const Value& input, const CallArgs&) { return input; }

Value f_escape(Interpreter& in, const Value& input, const CallArgs&) {
  const Text t = text_input(in, input).text();
  Text out;
  for (size_t i = 0; i < t.bytes.size(); ++i) {
    const char c = t.bytes[i];
    const char* entity = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '"' ? "&#34;" : c == '\'' ? "&#39;" : nullptr;
    if (entity) {
      out.append_marked(entity, t.is_content(i));
    } else {
      out.append(t.substr(i, 1));
    }
  }
  return Value::string(std::move(out));
}

// Jinja2's indent: every line after the first (the first too with first=True) gets the
// indent; blank lines only with blank=True.
Value f_indent(Interpreter& in, const Value& input, const CallArgs& args) {
  const Value* width = arg(args, 0, "width");
  std::string indent(4, ' ');
  if (width && width->is_string()) indent = width->str();
  if (width && width->is_int()) indent = std::string(size_t(std::clamp<int64_t>(width->as_int(), 0, 1 << 16)), ' ');
  const bool first = bool_arg(args, 1, "first", false);
  const bool blank = bool_arg(args, 2, "blank", false);
  Text s = text_input(in, input).text();
  s.append("\n");
  std::vector<Text> lines = split(s, "\n", -1);
  lines.pop_back();
  Text out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out.append("\n");
    if ((i > 0 || first) && (blank || !lines[i].bytes.empty() || (i == 0 && first))) out.append(indent);
    out.append(lines[i]);
  }
  in.check_size(out.bytes.size(), true);
  return Value::string(std::move(out));
}

Value f_wordcount(Interpreter& in, const Value& input, const CallArgs&) {
  return Value::integer(int64_t(split(text_input(in, input).text(), "", -1).size()));
}

// Python's %-formatting: %s %r %d %i %f %x %% with flags, width and precision.
Value f_format(Interpreter& in, const Value& input, const CallArgs& args) {
  const std::string f = text_input(in, input).str();
  Text out;
  size_t next_arg = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out.append(text_input(in, input).text().substr(i, 1));
      continue;
    }
    size_t j = i + 1;
    while (j < f.size() && std::string_view("-+ #0123456789.").find(f[j]) != std::string_view::npos) ++j;
    if (j >= f.size()) in.fail("format: incomplete format");
    const char type = f[j];
    const std::string spec = f.substr(i, j - i);
    i = j;
    if (type == '%') {
      out.append("%");
      continue;
    }
    if (next_arg >= args.positional.size()) in.fail("format: not enough arguments for format string");
    const Value& v = args.positional[next_arg++];
    char buf[512];
    if (type == 's' || type == 'r') {
      const Text t = type == 's' ? v.to_text() : Text(v.repr());
      if (spec.size() == 1) {
        out.append(t);
        continue;
      }
      std::snprintf(buf, sizeof buf, (spec + "s").c_str(), t.bytes.c_str());
    } else if (type == 'd' || type == 'i' || type == 'x' || type == 'X' || type == 'o') {
      if (!v.is_number() && !v.is_bool()) in.fail("format: %" + std::string(1, type) + " needs a number");
      const long long n = v.is_bool() ? v.as_bool() : v.is_int() ? v.as_int() : (long long)v.as_double();
      std::snprintf(buf, sizeof buf, (spec + "ll" + (type == 'i' ? 'd' : type)).c_str(), n);
    } else if (type == 'f' || type == 'F' || type == 'e' || type == 'E' || type == 'g' || type == 'G') {
      if (!v.is_number() && !v.is_bool()) in.fail("format: %" + std::string(1, type) + " needs a number");
      std::snprintf(buf, sizeof buf, (spec + type).c_str(), v.is_bool() ? double(v.as_bool()) : v.as_double());
    } else {
      in.fail(std::string("format: unsupported format character '") + type + "'");
    }
    out.append(buf);
  }
  return Value::string(std::move(out));
}

Value f_tojson(Interpreter& in, const Value& input, const CallArgs& args) {
  JsonStyle style;
  const Value* indent = arg(args, 1, "indent");
  if (indent && indent->is_int()) style.indent = std::string(size_t(std::clamp<int64_t>(indent->as_int(), 0, 64)), ' ');
  if (indent && indent->is_string()) style.indent = indent->str();
  style.item_separator = style.indent ? "," : ", ";
  if (const Value* separators = arg(args, 2, "separators"); separators && separators->is_list() && separators->items().size() == 2) {
    style.item_separator = separators->items()[0].to_text().bytes;
    style.key_separator = separators->items()[1].to_text().bytes;
  }
  style.ensure_ascii = bool_arg(args, 0, "ensure_ascii", false);
  style.sort_keys = bool_arg(args, 3, "sort_keys", false);
  Text out = to_json(input, style, [&in](const std::string& why) { in.fail(why); });
  in.check_size(out.bytes.size(), true);
  return Value::string(std::move(out));
}

// ---- sequences ----

Value f_length(Interpreter& in, const Value& input, const CallArgs&) {
  if (input.is_string()) return Value::integer(int64_t(code_point_count(input.str())));
  if (input.is_dict()) return Value::integer(int64_t(input.dict_ref().entries.size()));
  if (input.is_list()) return Value::integer(int64_t(input.items().size()));
  if (input.is_undefined()) return Value::integer(0);
  in.fail("object of type '" + std::string(input.type_name()) + "' has no len()");
}

Value f_first(Interpreter& in, const Value& input, const CallArgs&) {
  const ValueList items = iterate(in, input);
  return items.empty() ? Value::undefined("first of an empty sequence") : items.front();
}

Value f_last(Interpreter& in, const Value& input, const CallArgs&) {
  const ValueList items = iterate(in, input);
  return items.empty() ? Value::undefined("last of an empty sequence") : items.back();
}

Value f_list(Interpreter& in, const Value& input, const CallArgs&) { return Value::list(iterate(in, input)); }

Value f_join(Interpreter& in, const Value& input, const CallArgs& args) {
  const Value* sep = arg(args, 0, "d");
  const Value* attribute = arg(args, 1, "attribute");
  Text out;
  bool first = true;
  for (const Value& v : iterate(in, input)) {
    if (!first && sep) out.append(sep->to_text());
    first = false;
    out.append((attribute ? attribute_of(in, v, attribute->to_text().bytes) : v).to_text());
    in.check_size(out.bytes.size(), true);
  }
  return Value::string(std::move(out));
}

Value f_reverse(Interpreter& in, const Value& input, const CallArgs&) {
  if (input.is_string()) {
    const std::vector<size_t> at = code_point_offsets(input.str());
    Text out;
    for (size_t k = at.size() - 1; k > 0; --k) out.append(input.text().substr(at[k - 1], at[k] - at[k - 1]));
    return Value::string(std::move(out));
  }
  ValueList items = iterate(in, input);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

// Items with attribute (or themselves) as the sort key, lower-cased unless case_sensitive.
Value sort_key(Interpreter& in, const Value& item, const Value* attribute, bool case_sensitive) {
  Value key = attribute ? attribute_of(in, item, attribute->to_text().bytes) : item;
  if (!case_sensitive && key.is_string()) return Value::string(change_case(key.text(), Case::Lower));
  return key;
}

bool less_than(Interpreter& in, const Value& a, const Value& b) {
  return binary_operator(in, "<", a, b).as_bool();
}

Value f_sort(Interpreter& in, const Value& input, const CallArgs& args) {
  const bool reverse = bool_arg(args, 0, "reverse", false);
  const bool case_sensitive = bool_arg(args, 1, "case_sensitive", false);
  const Value* attribute = arg(args, 2, "attribute");
  ValueList items = iterate(in, input);
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& v : items) keyed.emplace_back(sort_key(in, v, attribute, case_sensitive), v);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return reverse ? less_than(in, b.first, a.first) : less_than(in, a.first, b.first);
  });
  ValueList out;
  for (auto& [k, v] : keyed) out.push_back(std::move(v));
  return Value::list(std::move(out));
}

Value f_dictsort(Interpreter& in, const Value& input, const CallArgs& args) {
  if (!input.is_dict()) in.fail("dictsort needs a dict");
  const bool case_sensitive = bool_arg(args, 0, "case_sensitive", false);
  const bool by_value = string_arg(args, 1, "by", "key") == "value";
  const bool reverse = bool_arg(args, 2, "reverse", false);
  std::vector<Value> pairs;
  for (const auto& [k, v] : input.dict_ref().entries) pairs.push_back(Value::list({k, v}, true));
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
    const Value x = sort_key(in, a.items()[by_value ? 1 : 0], nullptr, case_sensitive);
    const Value y = sort_key(in, b.items()[by_value ? 1 : 0], nullptr, case_sensitive);
    return reverse ? less_than(in, y, x) : less_than(in, x, y);
  });
  return Value::list(std::move(pairs));
}

Value f_items(Interpreter& in, const Value& input, const CallArgs&) {
  if (input.is_undefined()) return Value::list();
  if (!input.is_dict()) in.fail("items needs a dict, not " + std::string(input.type_name()));
  ValueList items;
  for (const auto& [k, v] : input.dict_ref().entries) items.push_back(Value::list({k, v}, true));
  return Value::list(std::move(items));
}

Value f_unique(Interpreter& in, const Value& input, const CallArgs& args) {
  const bool case_sensitive = bool_arg(args, 0, "case_sensitive", false);
  const Value* attribute = arg(args, 1, "attribute");
  ValueList out;
  ValueList seen;
  for (const Value& v : iterate(in, input)) {
    const Value key = sort_key(in, v, attribute, case_sensitive);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return s.equals(key); })) continue;
    seen.push_back(key);
    out.push_back(v);
  }
  return Value::list(std::move(out));
}

Value extreme(Interpreter& in, const Value& input, const CallArgs& args, bool want_max) {
  const bool case_sensitive = bool_arg(args, 0, "case_sensitive", false);
  const Value* attribute = arg(args, 1, "attribute");
  const ValueList items = iterate(in, input);
  if (items.empty()) return Value::undefined("min/max of an empty sequence");
  const Value* best = &items[0];
  for (const Value& v : items) {
    const Value a = sort_key(in, v, attribute, case_sensitive);
    const Value b = sort_key(in, *best, attribute, case_sensitive);
    if (want_max ? less_than(in, b, a) : less_than(in, a, b)) best = &v;
  }
  return *best;
}
Value f_min(Interpreter& in, const Value& input, const CallArgs& args) { return extreme(in, input, args, false); }
Value f_max(Interpreter& in, const Value& input, const CallArgs& args) { return extreme(in, input, args, true); }

Value f_sum(Interpreter& in, const Value& input, const CallArgs& args) {
  const Value* attribute = arg(args, 0, "attribute");
  const Value* start = arg(args, 1, "start");
  Value total = start ? *start : Value::integer(0);
  for (const Value& v : iterate(in, input)) {
    total = binary_operator(in, "+", total, attribute ? attribute_of(in, v, attribute->to_text().bytes) : v);
  }
  return total;
}

Value f_batch(Interpreter& in, const Value& input, const CallArgs& args) {
  const Value* size = arg(args, 0, "linecount");
  if (!size || !size->is_int() || size->as_int() <= 0) in.fail("batch needs a positive size");
  const Value* fill = arg(args, 1, "fill_with");
  const auto n = size_t(size->as_int());
  ValueList rows;
  ValueList row;
  for (const Value& v : iterate(in, input)) {
    row.push_back(v);
    if (row.size() == n) rows.push_back(Value::list(std::exchange(row, {})));
  }
  if (!row.empty()) {
    while (fill && row.size() < n) row.push_back(*fill);
    rows.push_back(Value::list(std::move(row)));
  }
  return Value::list(std::move(rows));
}

// ---- map / select ----

Value f_map(Interpreter& in, const Value& input, const CallArgs& args) {
  ValueList out;
  if (input.is_none()) return Value::list();   // as Jinja2's map skips a false input
  if (const Value* attribute = arg(args, SIZE_MAX, "attribute")) {
    const Value* fallback = arg(args, SIZE_MAX, "default");
    for (const Value& v : iterate(in, input)) {
      Value x = attribute_of(in, v, attribute->to_text().bytes);
      out.push_back(x.is_undefined() && fallback ? *fallback : x);
    }
    return Value::list(std::move(out));
  }
  if (args.positional.empty() || !args.positional[0].is_string()) in.fail("map needs a filter name or attribute=");
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.named = args.named;
  for (const Value& v : iterate(in, input)) out.push_back(in.filter(args.positional[0].str(), v, rest));
  return Value::list(std::move(out));
}

// select/reject(test, args...) and selectattr/rejectattr(attribute, test, args...).
Value select_items(Interpreter& in, const Value& input, const CallArgs& args, bool by_attribute, bool keep_if) {
  if (input.is_none()) return Value::list();   // Jinja2's filters skip a false input
  size_t next = 0;
  std::string attribute;
  if (by_attribute) {
    if (args.positional.empty()) in.fail("selectattr/rejectattr need an attribute");
    attribute = args.positional[next++].to_text().bytes;
  }
  std::string test_name;
  if (next < args.positional.size()) test_name = args.positional[next++].to_text().bytes;
  CallArgs test_args;
  test_args.positional.assign(args.positional.begin() + ptrdiff_t(next), args.positional.end());
  ValueList out;
  for (const Value& v : iterate(in, input)) {
    const Value x = by_attribute ? attribute_of(in, v, attribute) : v;
    const bool passes = test_name.empty() ? x.truthy() : in.test(test_name, x, test_args);
    if (passes == keep_if) out.push_back(v);
  }
  return Value::list(std::move(out));
}
Value f_select(Interpreter& in, const Value& i, const CallArgs& a) { return select_items(in, i, a, false, true); }
Value f_reject(Interpreter& in, const Value& i, const CallArgs& a) { return select_items(in, i, a, false, false); }
Value f_selectattr(Interpreter& in, const Value& i, const CallArgs& a) { return select_items(in, i, a, true, true); }
Value f_rejectattr(Interpreter& in, const Value& i, const CallArgs& a) { return select_items(in, i, a, true, false); }

Value f_attr(Interpreter& in, const Value& input, const CallArgs& args) {
  const Value* name = arg(args, 0, "name");
  if (!name) in.fail("attr needs a name");
  return get_attribute(in, input, name->to_text().bytes);
}

// ---- values ----

Value f_default(Interpreter&, const Value& input, const CallArgs& args) {
  const Value* fallback = arg(args, 0, "default_value");
  const bool boolean = bool_arg(args, 1, "boolean", false);
  const bool use_fallback = input.is_undefined() || (boolean && !input.truthy());
  return use_fallback ? (fallback ? *fallback : Value::string(std::string())) : input;
}

// Python's int(str): optional sign, digits and underscores between them, whitespace around.
std::optional<int64_t> parse_int(const std::string& raw) {
  const std::string s = strip(Text(raw), "", true, true).bytes;
  size_t i = s[0] == '+' || s[0] == '-' ? 1 : 0;
  if (i >= s.size()) return std::nullopt;
  int64_t v = 0;
  for (; i < s.size(); ++i) {
    if (s[i] == '_' && i + 1 < s.size() && s[i - 1] != '_') continue;
    if (s[i] < '0' || s[i] > '9' || __builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, s[i] - '0', &v)) {
      return std::nullopt;
    }
  }
  return s[0] == '-' ? -v : v;
}

Value f_int(Interpreter&, const Value& input, const CallArgs& args) {
  const Value* fallback = arg(args, 0, "default");
  const Value otherwise = fallback ? *fallback : Value::integer(0);
  if (input.is_int()) return input;
  if (input.is_bool()) return Value::integer(input.as_bool());
  if (input.is_float()) {
    const double f = input.as_double();
    return std::isfinite(f) && std::fabs(f) < 9.2e18 ? Value::integer(int64_t(f)) : otherwise;
  }
  if (input.is_string() && !input.str().empty()) {
    if (const std::optional<int64_t> v = parse_int(input.str())) return Value::integer(*v);
    char* end = nullptr;
    const double f = std::strtod(input.str().c_str(), &end);
    if (end && *end == 0 && std::isfinite(f) && std::fabs(f) < 9.2e18) return Value::integer(int64_t(f));
  }
  return otherwise;
}

Value f_float(Interpreter&, const Value& input, const CallArgs& args) {
  const Value* fallback = arg(args, 0, "default");
  if (input.is_number()) return Value::number(input.as_double());
  if (input.is_bool()) return Value::number(input.as_bool());
  if (input.is_string() && !input.str().empty()) {
    const std::string s = strip(Text(input.str()), "", true, true).bytes;
    char* end = nullptr;
    const double f = std::strtod(s.c_str(), &end);
    if (!s.empty() && end && *end == 0) return Value::number(f);
  }
  return fallback ? *fallback : Value::number(0.0);
}

Value f_abs(Interpreter& in, const Value& input, const CallArgs&) {
  if (input.is_int()) {
    if (input.as_int() == INT64_MIN) in.fail("integer overflow in abs");
    return Value::integer(std::llabs(input.as_int()));
  }
  if (input.is_bool()) return Value::integer(input.as_bool());
  if (input.is_float()) return Value::number(std::fabs(input.as_double()));
  in.fail("bad operand type for abs(): '" + std::string(input.type_name()) + "'");
}

Value f_round(Interpreter& in, const Value& input, const CallArgs& args) {
  if (!input.is_number() && !input.is_bool()) in.fail("round needs a number");
  const Value* precision = arg(args, 0, "precision");
  const std::string method = string_arg(args, 1, "method", "common");
  const double scale = std::pow(10.0, precision && precision->is_int() ? double(precision->as_int()) : 0.0);
  const double x = (input.is_bool() ? double(input.as_bool()) : input.as_double()) * scale;
  const double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::round(x);
  return Value::number(r / scale);
}

Value f_count(Interpreter& in, const Value& input, const CallArgs& args) { return f_length(in, input, args); }

// ---- tests ----

int64_t integral(const Value& v) { return v.is_bool() ? int64_t(v.as_bool()) : v.as_int(); }
bool is_integral(const Value& v) { return v.is_int() || v.is_bool(); }

bool t_defined(Interpreter&, const Value& v, const CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Interpreter&, const Value& v, const CallArgs&) { return v.is_undefined(); }
bool t_none(Interpreter&, const Value& v, const CallArgs&) { return v.is_none(); }
bool t_string(Interpreter&, const Value& v, const CallArgs&) { return v.is_string(); }
bool t_number(Interpreter&, const Value& v, const CallArgs&) { return v.is_number() || v.is_bool(); }
bool t_integer(Interpreter&, const Value& v, const CallArgs&) { return v.is_int(); }
bool t_float(Interpreter&, const Value& v, const CallArgs&) { return v.is_float(); }
bool t_mapping(Interpreter&, const Value& v, const CallArgs&) { return v.is_dict(); }
bool t_sequence(Interpreter&, const Value& v, const CallArgs&) { return v.is_list() || v.is_string() || v.is_dict(); }
bool t_iterable(Interpreter&, const Value& v, const CallArgs&) { return v.is_list() || v.is_string() || v.is_dict(); }
bool t_boolean(Interpreter&, const Value& v, const CallArgs&) { return v.is_bool(); }
bool t_true(Interpreter&, const Value& v, const CallArgs&) { return v.is_bool() && v.as_bool(); }
bool t_false(Interpreter&, const Value& v, const CallArgs&) { return v.is_bool() && !v.as_bool(); }
bool t_callable(Interpreter&, const Value& v, const CallArgs&) { return v.is_function(); }

const Value& other(Interpreter& in, const CallArgs& args, const char* test) {
  if (args.positional.empty()) in.fail(std::string("the test '") + test + "' needs an argument");
  return args.positional[0];
}
bool t_eq(Interpreter& in, const Value& v, const CallArgs& a) { return v.equals(other(in, a, "eq")); }
bool t_ne(Interpreter& in, const Value& v, const CallArgs& a) { return !v.equals(other(in, a, "ne")); }
bool t_lt(Interpreter& in, const Value& v, const CallArgs& a) { return binary_operator(in, "<", v, other(in, a, "lt")).as_bool(); }
bool t_le(Interpreter& in, const Value& v, const CallArgs& a) { return binary_operator(in, "<=", v, other(in, a, "le")).as_bool(); }
bool t_gt(Interpreter& in, const Value& v, const CallArgs& a) { return binary_operator(in, ">", v, other(in, a, "gt")).as_bool(); }
bool t_ge(Interpreter& in, const Value& v, const CallArgs& a) { return binary_operator(in, ">=", v, other(in, a, "ge")).as_bool(); }
bool t_in(Interpreter& in, const Value& v, const CallArgs& a) { return contains(in, other(in, a, "in"), v); }
bool t_sameas(Interpreter& in, const Value& v, const CallArgs& a) {
  const Value& o = other(in, a, "sameas");
  if (v.kind() != o.kind()) return false;
  if (v.is_none() || v.is_undefined()) return true;
  return v.is_bool() ? v.as_bool() == o.as_bool() : v.equals(o) && (v.is_int() || v.is_float());
}

bool t_odd(Interpreter& in, const Value& v, const CallArgs&) {
  if (!is_integral(v)) in.fail("the test 'odd' needs an integer");
  return integral(v) % 2 != 0;
}
bool t_even(Interpreter& in, const Value& v, const CallArgs&) {
  if (!is_integral(v)) in.fail("the test 'even' needs an integer");
  return integral(v) % 2 == 0;
}
bool t_divisibleby(Interpreter& in, const Value& v, const CallArgs& a) {
  const Value& d = other(in, a, "divisibleby");
  if (!is_integral(v) || !is_integral(d) || integral(d) == 0) in.fail("the test 'divisibleby' needs non-zero integers");
  return integral(v) % integral(d) == 0;
}
bool t_lower(Interpreter& in, const Value& v, const CallArgs&) {
  return v.is_string() && change_case(text_input(in, v).text(), Case::Lower).bytes == v.str();
}
bool t_upper(Interpreter& in, const Value& v, const CallArgs&) {
  return v.is_string() && change_case(text_input(in, v).text(), Case::Upper).bytes == v.str();
}

const std::map<std::string_view, FilterFunction>& filters() {
  static const std::map<std::string_view, FilterFunction> table = {
      {"abs", f_abs},           {"attr", f_attr},       {"batch", f_batch},         {"capitalize", f_capitalize},
      {"count", f_count},       {"d", f_default},       {"default", f_default},     {"dictsort", f_dictsort},
      {"e", f_escape},          {"escape", f_escape},   {"first", f_first},         {"float", f_float},
      {"format", f_format},     {"indent", f_indent},   {"int", f_int},             {"items", f_items},
      {"join", f_join},         {"last", f_last},       {"length", f_length},       {"list", f_list},
      {"lower", f_lower},       {"map", f_map},         {"max", f_max},             {"min", f_min},
      {"reject", f_reject},     {"rejectattr", f_rejectattr}, {"replace", f_replace}, {"reverse", f_reverse},
      {"round", f_round},       {"safe", f_safe},       {"select", f_select},       {"selectattr", f_selectattr},
      {"sort", f_sort},         {"string", f_string},   {"sum", f_sum},             {"title", f_title},
      {"tojson", f_tojson},     {"trim", f_trim},       {"unique", f_unique},       {"upper", f_upper},
      {"wordcount", f_wordcount},
  };
  return table;
}

const std::map<std::string_view, TestFunction>& tests() {
  static const std::map<std::string_view, TestFunction> table = {
      {"boolean", t_boolean}, {"callable", t_callable}, {"defined", t_defined}, {"divisibleby", t_divisibleby},
      {"eq", t_eq},           {"equalto", t_eq},        {"==", t_eq},           {"even", t_even},
      {"false", t_false},     {"float", t_float},       {"ge", t_ge},           {">=", t_ge},
      {"gt", t_gt},           {">", t_gt},              {"greaterthan", t_gt},  {"in", t_in},
      {"integer", t_integer}, {"iterable", t_iterable}, {"le", t_le},           {"<=", t_le},
      {"lower", t_lower},     {"lt", t_lt},             {"<", t_lt},            {"lessthan", t_lt},
      {"mapping", t_mapping}, {"ne", t_ne},             {"!=", t_ne},           {"none", t_none},
      {"number", t_number},   {"odd", t_odd},           {"sameas", t_sameas},   {"sequence", t_sequence},
      {"string", t_string},   {"true", t_true},         {"undefined", t_undefined}, {"upper", t_upper},
  };
  return table;
}

}  // namespace

FilterFunction find_filter(std::string_view name) {
  const auto it = filters().find(name);
  return it == filters().end() ? nullptr : it->second;
}

TestFunction find_test(std::string_view name) {
  const auto it = tests().find(name);
  return it == tests().end() ? nullptr : it->second;
}

}  // namespace kvdesk::jinja
