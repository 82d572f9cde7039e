// HttpServer: the OpenAI-compatible HTTP face over one engine (cpp-httplib underneath): an
// Engine of its own (kvdesk-cli serve) or the desktop app's, shared through an EngineShare.
// Routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health,
// GET /metrics (Prometheus), GET /v1/kv (KV stats). Limits: a body size cap (413), a bearer
// API key on every route but /health (401), the router's queue bound (503). Every failure is
// answered with OpenAI's error JSON; no input ends the process.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "app/server/prometheus_metrics.h"
#include "app/server/request_router.h"
#include "engine/engine.h"

namespace kvdesk::server {

// A chat completion the server answered: the request's messages as parsed and its first
// choice's answer, with tool calls and reasoning in the answer's fields as the response carried
// them. The desktop app keeps these as conversations.
struct ServedChat {
  std::vector<ChatMessage> messages;
  ChatMessage answer;
};

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                      // 0: any free port
  std::string api_key;                  // "": no authentication
  size_t max_body_bytes = size_t(4) << 20;
  int32_t http_threads = 72;            // connections served at once (a stream holds one)
  std::string model_id;                 // the name /v1/models and every response show; "": the
                                        // loaded model's file name, read per request
  // Called on the HTTP thread that answered, once a chat completion's answer has ended (sent
  // whole, or its stream's end written); not for refused or failed requests. Empty: none.
  std::function<void(ServedChat)> on_chat_answered;
};

// 127.0.0.0/8, ::1 and "localhost": hosts only this machine can reach.
bool is_loopback_host(const std::string& host);
// "http://HOST:PORT" ("http://[HOST]:PORT" for an IPv6 address).
std::string server_url(const std::string& host, int port);

class HttpServer {
 public:
  HttpServer(EngineClient& engine, RequestRouter& router, const ServingMetrics& metrics, ServeOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket; returns the port (the chosen one for port 0). Throws
  // kvdesk::Error when the address cannot be bound.
  int bind();
  // Serves until stop(); call after bind(), on a thread of its own.
  void listen();
  // Whether listen() has begun serving; stop() before that does not reach it, so whoever stops
  // a server it just started waits for this first.
  bool listening() const;
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvdesk::server
