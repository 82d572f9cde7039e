// OpenAI's error JSON: absent param and code are null, as the OpenAI API sends them.
#include "app/server/api_error.h"

namespace kvdesk::server {
namespace {

nlohmann::json string_or_null(const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); }

}  // namespace

nlohmann::json ApiError::to_json() const {
  return {{"error",
           {{"message", what()}, {"type", type_}, {"param", string_or_null(param_)}, {"code", string_or_null(code_)}}}};
}

ApiError invalid_request(const std::string& message, const std::string& param) {
  return ApiError(400, message, "invalid_request_error", param);
}

std::string json_body(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kvdesk::server
