// What templates call by name: filters (`x | trim`), tests (`x is defined`), methods of
// strings, dicts and lists (`s.strip()`, `d.items()`, `l.append(x)`), the global functions
// (range, namespace, dict, raise_exception, strftime_now) and Python's operators on values.
#pragma once
#include <ctime>
#include <optional>
#include <string>
#include <string_view>

#include "engine/chat/jinja/value.h"

namespace kvdesk::jinja {

class Interpreter;

using FilterFunction = Value (*)(Interpreter&, const Value& input, const CallArgs& args);
using TestFunction = bool (*)(Interpreter&, const Value& input, const CallArgs& args);

// nullptr for a name Jinja2 (with transformers' tojson) does not define.
FilterFunction find_filter(std::string_view name);
TestFunction find_test(std::string_view name);

// obj.name as a method bound to obj (str, dict or list methods); nullopt when it has none.
std::optional<Value> bound_method(const Value& obj, const std::string& name);

// The global functions, added to the context of every render.
void add_global_functions(Dict& globals);
// What Python's strftime writes for date in the C locale ("%d %b %Y": "05 Apr 2025"), whatever
// the process locale is: strftime_now's text.
std::string format_date(const std::string& format, const std::tm& date);

// a op b with Python's meaning for + - * / // % ** ~ and the comparisons < <= > >= (== and
// != are Value::equals); a TypeError-like failure for operands Python refuses.
Value binary_operator(Interpreter& in, const std::string& op, const Value& a, const Value& b);
// `needle in haystack`: substring, list item or dict key.
bool contains(Interpreter& in, const Value& haystack, const Value& needle);
// The items a for loop or a filter walks: a list's items, a dict's keys, a string's
// characters, nothing for undefined.
ValueList iterate(Interpreter& in, const Value& v);
// obj[key], with Jinja2's fallback to an attribute; undefined when absent.
Value get_item(Interpreter& in, const Value& obj, const Value& key);
// obj.name, with Jinja2's fallback to an item; undefined when absent.
Value get_attribute(Interpreter& in, const Value& obj, const std::string& name);
// obj[start:stop:step] for lists, tuples and strings (by code point).
Value slice(Interpreter& in, const Value& obj, const Value& start, const Value& stop, const Value& step);

}  // namespace kvdesk::jinja
