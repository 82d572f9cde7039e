// JSON in and out of template values. Out: the tojson filter as transformers defines it,
// Python's json.dumps(value, ensure_ascii=False, indent=indent, separators=..., sort_keys=...),
// byte for byte ("a": 1, ", " between items without indent). In: the conversation and tools a
// request brings, every string of them marked as content.
#pragma once
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "engine/chat/jinja/value.h"

namespace kvdesk::jinja {

struct JsonStyle {
  std::optional<std::string> indent;   // per level; nullopt: one line
  std::string item_separator;          // ", " on one line, "," when indented
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};

// Fails through `fail` (called with the reason) for what JSON cannot hold (undefined,
// functions). A string's bytes keep their content marks.
Text to_json(const Value& v, const JsonStyle& style, const std::function<void(const std::string&)>& fail);

// A value from parsed JSON, objects in their order; strings (keys too) marked as content when
// `as_content`.
Value value_from_json(const nlohmann::ordered_json& j, bool as_content);

}  // namespace kvdesk::jinja
