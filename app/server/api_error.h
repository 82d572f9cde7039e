// ApiError: a request the server refuses or could not serve, in OpenAI's error shape
// {"error": {"message", "type", "param", "code"}} with the HTTP status it is sent with. Thrown
// by request parsing and completion runs, caught once per route.
#pragma once
#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

namespace kvdesk::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, const std::string& message, std::string type, std::string param = {}, std::string code = {})
      : std::runtime_error(message), status_(status), type_(std::move(type)), param_(std::move(param)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  nlohmann::json to_json() const;

 private:
  int status_;
  std::string type_;    // OpenAI's class: invalid_request_error, authentication_error, ...
  std::string param_;   // the request field at fault; "" when none
  std::string code_;    // a machine-readable reason; "" when none
};

// 400 for a bad field or body; param names the field.
ApiError invalid_request(const std::string& message, const std::string& param = {});

// A JSON value as an HTTP body: invalid UTF-8 (a model can emit any bytes) becomes U+FFFD
// instead of throwing.
std::string json_body(const nlohmann::json& value);

}  // namespace kvdesk::server
