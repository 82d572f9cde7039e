// GET /v1/models read into ServerModels.
#include "app/remote/model_list.h"

#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "engine/error.h"

namespace kvdesk::remote {
namespace {

using nlohmann::json;

constexpr time_t kConnectTimeoutS = 5;
constexpr time_t kReadTimeoutS = 10;

ServerModel read_model(const json& entry) {
  ServerModel m;
  if (!entry.is_object()) return m;
  const json& id = entry.value("id", json());
  if (id.is_string()) m.id = id.get<std::string>();
  const json& context = entry.value("max_model_len", json());
  if (context.is_number_integer() && context.get<int64_t>() > 0 && context.get<int64_t>() <= INT32_MAX) {
    m.context_length = context.get<int32_t>();
  }
  return m;
}

}  // namespace

std::string openai_error_message(const std::string& body) {
  try {
    const json j = json::parse(body);
    if (j.contains("error") && j["error"].is_object()) return j["error"].value("message", body);
  } catch (const json::exception&) {
  }
  return body.substr(0, 300);
}

std::vector<ServerModel> list_server_models(const std::string& url, const std::string& api_key) {
  if (url.rfind("http://", 0) != 0) throw Error("'" + url + "' is not a server address: write http://HOST:PORT");
  httplib::Client c(url);
  if (!c.is_valid()) throw Error("'" + url + "' is not a server address: write http://HOST:PORT");
  c.set_connection_timeout(kConnectTimeoutS, 0);
  c.set_read_timeout(kReadTimeoutS, 0);
  if (!api_key.empty()) c.set_bearer_token_auth(api_key);
  const httplib::Result res = c.Get("/v1/models");
  if (!res) throw Error("cannot reach " + url + ": " + httplib::to_string(res.error()));
  if (res->status != 200) {
    throw Error(url + "/v1/models answered " + std::to_string(res->status) + ": " + openai_error_message(res->body));
  }
  json data;
  try {
    data = json::parse(res->body).at("data");
  } catch (const json::exception&) {
    throw Error(url + "/v1/models did not list models");
  }
  if (!data.is_array()) throw Error(url + "/v1/models did not list models");
  std::vector<ServerModel> models;
  for (const json& entry : data) {
    ServerModel m = read_model(entry);
    if (!m.id.empty()) models.push_back(std::move(m));
  }
  if (models.empty()) throw Error(url + " serves no model");
  return models;
}

std::future<std::vector<ServerModel>> list_server_models_async(std::string url, std::string api_key) {
  std::promise<std::vector<ServerModel>> promise;
  std::future<std::vector<ServerModel>> models = promise.get_future();
  std::thread([promise = std::move(promise), url = std::move(url), api_key = std::move(api_key)]() mutable {
    try {
      promise.set_value(list_server_models(url, api_key));
    } catch (...) {
      promise.set_exception(std::current_exception());
    }
  }).detach();
  return models;
}

}  // namespace kvdesk::remote
