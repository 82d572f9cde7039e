// The models an OpenAI-compatible server offers (GET /v1/models): what RemoteEngine connects
// to and what the desktop app's model picker lists for a server. Blocking; a few seconds at
// most for a server that does not answer.
#pragma once
#include <cstdint>
#include <future>
#include <string>
#include <vector>

namespace kvdesk::remote {

struct ServerModel {
  std::string id;
  int32_t context_length = 0;   // the server's max_model_len (vLLM, kvdesk serve); 0: not told
};

// The models in the order the server lists them. Throws kvdesk::Error saying why when the
// server cannot be reached, refuses (a wrong API key: its message) or lists nothing readable.
std::vector<ServerModel> list_server_models(const std::string& url, const std::string& api_key);
// list_server_models on a thread of its own whose future, unlike std::async's, never blocks when
// it is dropped: a picker that moves on to another server does not wait for the last one's answer.
std::future<std::vector<ServerModel>> list_server_models_async(std::string url, std::string api_key);

// The message of an OpenAI-style error body ({"error": {"message": ...}}), else the body's start.
std::string openai_error_message(const std::string& body);

}  // namespace kvdesk::remote
