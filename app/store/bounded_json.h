// JSON from outside (imported files, stored fields, tool results) parsed with a bound on its
// nesting: nlohmann parses without recursion, but dump() and the code that walks a value
// recurse once a level, so text nested a million levels deep would overflow the stack later.
#pragma once
#include <nlohmann/json.hpp>

#include <string_view>

namespace kvdesk::store {

inline constexpr int kMaxJsonDepth = 64;

// The parsed value, or a discarded one (is_discarded()) when `text` is not JSON; too_deep is
// set (and the value is discarded) when it nests deeper than kMaxJsonDepth.
template <class Json = nlohmann::json>
Json parse_bounded_json(std::string_view text, bool& too_deep) {
  too_deep = false;
  const typename Json::parser_callback_t guard = [&too_deep](int depth, typename Json::parse_event_t, Json&) {
    too_deep = too_deep || depth > kMaxJsonDepth;
    return !too_deep;
  };
  Json j = Json::parse(text.begin(), text.end(), guard, /*allow_exceptions=*/false);
  if (too_deep) return Json(Json::value_t::discarded);
  return j;
}

}  // namespace kvdesk::store
