// The values a Jinja chat template computes with, with Python's meaning (Hugging Face renders
// templates with Python's Jinja2, so Python decides: `{{ none }}` prints "None", a list prints
// as its repr, `/` is true division, strings count code points).
//
// Strings carry their provenance byte by byte (Text): bytes that came from the conversation
// (message contents, tool definitions, arguments) are marked as content, bytes the template
// wrote itself are not. The mark survives concatenation, slicing, strip, replace and macro
// output, so the rendered prompt can be split into template text, where "<|im_start|>" is a
// control token, and content, where the same characters are only characters: what a user types
// can never forge a turn.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvdesk::jinja {

// UTF-8 bytes with a content mark per byte. Invariant: `content` is empty (no byte is content)
// or has exactly bytes.size() entries, 1 for a content byte.
struct Text {
  std::string bytes;
  std::vector<uint8_t> content;   // [bytes.size()] or empty

  Text() = default;
  explicit Text(std::string template_bytes) : bytes(std::move(template_bytes)) {}
  static Text of_content(std::string content_bytes);

  bool any_content() const;
  bool is_content(size_t i) const { return !content.empty() && content[i] != 0; }
  void append(const Text& other);
  void append(std::string_view template_bytes);
  // Appends bytes all marked content (or not).
  void append_marked(std::string_view bytes, bool as_content);
  Text substr(size_t begin, size_t count) const;
};

class Value;
class Interpreter;

using ValueList = std::vector<Value>;

struct List {
  ValueList items;
  bool is_tuple = false;   // prints as (a, b)
};

// A dict keeps insertion order, as Python's does. namespace() objects are dicts whose
// attributes can be assigned with `set ns.name = ...`.
struct Dict {
  std::vector<std::pair<Value, Value>> entries;
  bool is_namespace = false;

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);
};

// A call's arguments: positional, then name=value ones in order.
struct CallArgs {
  ValueList positional;
  std::vector<std::pair<std::string, Value>> named;

  // The argument at `index` or named `name`; nullptr when absent.
  const Value* get(size_t index, std::string_view name) const;
};

// A global function, a bound method or a macro.
struct Function {
  std::string name;
  std::function<Value(const CallArgs&, Interpreter&)> call;
};

class Value {
 public:
  enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Function };

  Value() = default;   // Undefined
  static Value undefined(std::string name);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double f);
  static Value string(Text t);
  static Value string(std::string template_bytes);
  static Value list(ValueList items = {}, bool is_tuple = false);
  static Value dict(std::shared_ptr<Dict> d = nullptr);
  static Value function(std::string name, std::function<Value(const CallArgs&, Interpreter&)> call);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_function() const { return kind_ == Kind::Function; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return i_; }
  double as_double() const { return kind_ == Kind::Int ? double(i_) : f_; }
  const Text& text() const { return *str_; }
  const std::string& str() const { return str_->bytes; }
  List& list_ref() const { return *list_; }
  const ValueList& items() const { return list_->items; }
  Dict& dict_ref() const { return *dict_; }
  const Function& function_ref() const { return *fn_; }
  // The name an undefined value was looked up by ("" when unknown), for error messages.
  const std::string& undefined_name() const;

  // Python's truth: empty strings and containers, 0, None and undefined are false.
  bool truthy() const;
  // Python's == (1 == 1.0; containers compared item by item).
  bool equals(const Value& other) const;
  // What {{ value }} prints: str(value) as Python does ("None", "True", "[1, 'a']").
  Text to_text() const;
  // Python's repr(value).
  std::string repr() const;
  // The type's name for error messages ("str", "int", "list", ...).
  const char* type_name() const;

 private:
  Kind kind_ = Kind::Undefined;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const Text> str_;   // a string's text, or an undefined value's name
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<const Function> fn_;
};

// Python's repr of a float: the shortest digits that read back as the same double, "1.0",
// "1e+16", "1.5e-05".
std::string python_float_repr(double f);
// Python's repr of a str: single quotes unless the text has ' and no ", escapes for \n etc.
std::string python_string_repr(std::string_view s);

}  // namespace kvdesk::jinja
