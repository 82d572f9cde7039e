// HttpServer: httplib routes, each wrapped so an ApiError or any exception becomes OpenAI's
// error JSON. Streams are chunked server-sent events written from the provider callback on
// the connection's own thread; a failed write (the client left) ends the provider, and the
// CompletionRun it owned is destroyed, which cancels the engine request.
#include "app/server/http_server.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <httplib.h>

#include <chrono>
#include <limits>
#include <optional>

#include "app/server/api_error.h"
#include "app/server/completion_run.h"
#include "app/server/kv_json.h"
#include "app/server/openai_request.h"
#include "app/server/openai_response.h"
#include "engine/chat/chat_template.h"
#include "engine/chat/jinja/value.h"
#include "engine/error.h"
#include "engine/tokenizer/utf8_stream.h"

namespace kvdesk::server {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
// How long a waiting handler sleeps between checks of its request.
constexpr auto kEventPoll = std::chrono::milliseconds(250);
// A stream with nothing to say for this long sends an SSE comment, which finds a gone client.
constexpr auto kKeepAlive = std::chrono::seconds(1);

void send_error(httplib::Response& res, const ApiError& error) {
  res.status = error.status();
  res.set_content(json_body(error.to_json()), "application/json");
}

void send_json(httplib::Response& res, const json& body, int status = 200) {
  res.status = status;
  res.set_content(json_body(body), "application/json");
}

// The error JSON for statuses httplib sets itself (unknown route, body too large, bad HTTP).
ApiError transport_error(const httplib::Request& req, int status, size_t max_body_bytes) {
  switch (status) {
    case 404:
      return ApiError(404, "Invalid URL (" + req.method + " " + req.path + ")", "invalid_request_error", "", "not_found");
    case 413:
      // httplib holds form-encoded bodies (curl -d's default type) to a limit of its own.
      if (req.get_header_value("Content-Type") == "application/x-www-form-urlencoded") {
        return ApiError(413,
                        "a form-encoded request body is limited to " +
                            std::to_string(CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH) +
                            " bytes: send JSON with the header Content-Type: application/json",
                        "invalid_request_error", "", "payload_too_large");
      }
      return ApiError(413, "the request body is larger than " + std::to_string(max_body_bytes) + " bytes",
                      "invalid_request_error", "", "payload_too_large");
    default:
      return ApiError(status, "the HTTP request could not be served (status " + std::to_string(status) + ")",
                      status < 500 ? "invalid_request_error" : "server_error");
  }
}

// Compares in time independent of where the strings differ.
bool same_secret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

bool write_text(httplib::DataSink& sink, const std::string& text) { return sink.write(text.data(), text.size()); }

// Reports a chat's first choice, once it is whole, as the response carried it (the message of a
// whole answer, or the streamed chunks joined: the ids of its tool calls are the ones the client
// got), to whoever keeps served chats (ServeOptions::on_chat_answered); empty when nobody does.
using AnsweredMessage = std::function<void(const json& message)>;

// One streamed response: what the provider callback needs between its calls.
struct SseStream {
  std::unique_ptr<CompletionRun> run;
  ResponseShape shape;
  bool include_usage = false;
  std::vector<ChoicePiece> early;      // pieces that arrived before the response began
  std::vector<ChoiceStream> choices;   // [n] each choice's reasoning, answer and tool calls so far
  std::vector<bool> finished;          // [n] its finish chunk was written
  AnsweredMessage answered = {};
  StreamedMessage first_choice{0};     // choice 0's chunks joined, kept only for answered
  bool started = false;
  Clock::time_point last_write = Clock::now();
};

bool write_chunks(httplib::DataSink& sink, const std::vector<json>& chunks) {
  for (const json& c : chunks) {
    if (!write_text(sink, sse_event(c))) return false;
  }
  return true;
}

// A piece's chunks, then the finish chunk of its choice once that choice is done.
bool write_piece(SseStream& s, httplib::DataSink& sink, const ChoicePiece& p) {
  const auto write = [&](const std::vector<json>& chunks) {
    if (s.answered && p.index == 0) {
      for (const json& c : chunks) s.first_choice.add(c);
    }
    return write_chunks(sink, chunks);
  };
  ChoiceStream& choice = s.choices[size_t(p.index)];
  bool ok = write(s.shape.piece(choice, p.index, p.text, p.logprobs));
  if (ok && s.run->choice_done(p.index) && !s.finished[size_t(p.index)]) {
    s.finished[size_t(p.index)] = true;
    ok = write(s.shape.finish(choice, p.index, s.run->finish_reason(p.index)));
  }
  return ok;
}

// The end of a stream: usage when asked, [DONE].
bool write_stream_end(SseStream& s, httplib::DataSink& sink) {
  bool ok = true;
  if (s.include_usage) ok = write_text(sink, sse_event(s.shape.usage(s.run->usage())));
  if (ok) ok = write_text(sink, kSseDone);
  if (ok) sink.done();
  if (ok && s.answered) s.answered(s.first_choice.message());
  return ok;
}

// One call of the provider: the opening chunks, or the next event's chunks (or a keep-alive),
// then the end once every choice is done. False when a write failed: the client is gone.
bool write_stream_step(SseStream& s, httplib::DataSink& sink) {
  bool ok = true;
  if (!s.started) {
    s.started = true;
    for (int32_t i = 0; ok && s.shape.has_first() && i < s.run->choices(); ++i) ok = write_text(sink, sse_event(s.shape.first(i)));
    for (size_t i = 0; ok && i < s.early.size(); ++i) ok = write_piece(s, sink, s.early[i]);
  } else if (!s.run->done()) {
    std::optional<ChoicePiece> piece;
    try {
      piece = s.run->next(kEventPoll);
    } catch (const ApiError& e) {
      ok = write_text(sink, sse_event(e.to_json())) && write_text(sink, kSseDone);
      if (ok) sink.done();
      return ok;
    }
    if (piece) {
      ok = write_piece(s, sink, *piece);
    } else if (Clock::now() - s.last_write > kKeepAlive) {
      ok = write_text(sink, ": keep-alive\n\n");
    }
  }
  if (!ok) return false;
  s.last_write = Clock::now();
  return s.run->done() ? write_stream_end(s, sink) : true;
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr v4{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

std::string server_url(const std::string& host, int port) {
  const bool ipv6 = host.find(':') != std::string::npos;
  return "http://" + (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

struct HttpServer::Impl {
  EngineClient& engine;
  RequestRouter& router;
  const ServingMetrics& metrics;
  const ServeOptions options;
  const int64_t started_at;
  httplib::Server http;

  Impl(EngineClient& e, RequestRouter& r, const ServingMetrics& m, ServeOptions o)
      : engine(e), router(r), metrics(m), options(std::move(o)),
        started_at(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count()) {}

  void configure();
  void add_routes();
  httplib::Server::HandlerWithResponse authentication() const;

  void require_model() const;
  std::string model_id() const;
  std::string model_id(const EngineStats& stats) const;
  void health(httplib::Response& res) const;
  void models(httplib::Response& res);
  void complete(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
  void apply_template(const httplib::Request& req, httplib::Response& res) const;
  void tokenize(const httplib::Request& req, httplib::Response& res) const;
  void detokenize(const httplib::Request& req, httplib::Response& res) const;
  AnsweredMessage chat_recorder(const CompletionRequest& request) const;
  void answer_whole(CompletionRun& run, const ResponseShape& shape, const std::string& echo,
                    const AnsweredMessage& answered, httplib::Response& res) const;
  void answer_stream(std::unique_ptr<CompletionRun> run, ResponseShape shape, bool include_usage, const std::string& echo,
                     AnsweredMessage answered, httplib::Response& res) const;
};

// Every handler's failures become error JSON.
template <class Handler>
httplib::Server::Handler guarded(Handler handler) {
  return [handler](const httplib::Request& req, httplib::Response& res) {
    try {
      handler(req, res);
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const std::exception& e) {
      send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "server_error"));
    }
  };
}

void HttpServer::Impl::configure() {
  const int32_t threads = options.http_threads;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  http.set_payload_max_length(options.max_body_bytes);
  // SO_REUSEADDR alone: a restarted server rebinds at once, but a port another server holds is
  // refused. httplib's default adds SO_REUSEPORT, with which a second server shares the port.
  http.set_socket_options([](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  http.set_pre_routing_handler(authentication());
  const size_t max_body = options.max_body_bytes;
  const httplib::Server::HandlerWithResponse error_json = [max_body](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;   // a handler's own error JSON
    send_error(res, transport_error(req, res.status, max_body));
    return httplib::Server::HandlerResponse::Handled;
  };
  http.set_error_handler(error_json);
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    send_error(res, ApiError(500, "internal error", "server_error"));
  });
  add_routes();
}

void HttpServer::Impl::add_routes() {
  http.Get("/health", guarded([this](const httplib::Request&, httplib::Response& res) { health(res); }));
  http.Get("/v1/models", guarded([this](const httplib::Request&, httplib::Response& res) { models(res); }));
  http.Post("/v1/chat/completions", guarded([this](const httplib::Request& req, httplib::Response& res) {
              complete(req, res, Endpoint::ChatCompletions);
            }));
  http.Post("/v1/completions", guarded([this](const httplib::Request& req, httplib::Response& res) {
              complete(req, res, Endpoint::Completions);
            }));
  http.Get("/metrics", guarded([this](const httplib::Request&, httplib::Response& res) {
             res.set_content(metrics.render(engine.stats(), model_id()), "text/plain; version=0.0.4; charset=utf-8");
           }));
  http.Post("/apply-template", guarded([this](const httplib::Request& req, httplib::Response& res) {
              apply_template(req, res);
            }));
  http.Post("/tokenize", guarded([this](const httplib::Request& req, httplib::Response& res) { tokenize(req, res); }));
  http.Post("/detokenize", guarded([this](const httplib::Request& req, httplib::Response& res) { detokenize(req, res); }));
  http.Get("/v1/kv", guarded([this](const httplib::Request&, httplib::Response& res) {
             send_json(res, kv_stats_json(engine.stats()));
           }));
}

// With an API key, every route but /health needs "Authorization: Bearer KEY".
httplib::Server::HandlerWithResponse HttpServer::Impl::authentication() const {
  const std::string expected = "Bearer " + options.api_key;
  const bool open = options.api_key.empty();
  return [expected, open](const httplib::Request& req, httplib::Response& res) {
    if (open || req.path == "/health" || same_secret(req.get_header_value("Authorization"), expected)) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    send_error(res, ApiError(401, "missing or wrong API key: send the header 'Authorization: Bearer <key>'",
                             "authentication_error", "", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  };
}

void HttpServer::Impl::require_model() const {
  switch (router.model_state()) {
    case ModelState::Loaded: return;
    case ModelState::Loading: throw ApiError(503, "the model is still loading", "server_error", "", "model_loading");
    case ModelState::Failed:
      throw ApiError(503, "the model failed to load: " + router.load_error(), "server_error", "", "model_not_loaded");
  }
}

std::string HttpServer::Impl::model_id() const {
  return options.model_id.empty() ? model_id(engine.stats()) : options.model_id;
}

std::string HttpServer::Impl::model_id(const EngineStats& stats) const {
  if (!options.model_id.empty()) return options.model_id;
  const std::string& path = stats.model.path;
  return path.substr(path.find_last_of('/') + 1);
}

void HttpServer::Impl::health(httplib::Response& res) const {
  switch (router.model_state()) {
    case ModelState::Loaded: send_json(res, {{"status", "ok"}}); return;
    case ModelState::Loading: send_json(res, {{"status", "loading"}}, 503); return;
    case ModelState::Failed: send_json(res, {{"status", "error"}, {"message", router.load_error()}}, 503); return;
  }
}

void HttpServer::Impl::models(httplib::Response& res) {
  json model = {{"id", model_id()}, {"object", "model"}, {"created", started_at}, {"owned_by", "kvdesk"}};
  if (router.model_state() == ModelState::Loaded) {
    const int32_t context = engine.stats().model.context_length;
    model["max_model_len"] = context;    // vLLM's name
    model["context_length"] = context;   // LM Studio's and OpenRouter's
  }
  send_json(res, {{"object", "list"}, {"data", json::array({model})}});
}

// The most tokens one request may use: the context, or the KV pool when smaller. Read per
// request (one stats snapshot serves the request's limits, model id and chat format): the
// desktop app may load another model or re-create the pool while serving.
namespace {
ModelLimits model_limits(const EngineStats& stats) {
  return ModelLimits{std::min(stats.model.context_length, stats.kv.blocks_total * stats.kv.layout.block_size),
                     stats.model.description.vocab_size, stats.model.chat_template_source};
}
}  // namespace

void HttpServer::Impl::complete(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  require_model();
  const EngineStats stats = engine.stats();
  const ModelLimits limits = model_limits(stats);
  const CompletionRequest request = endpoint == Endpoint::ChatCompletions ? parse_chat_request(req.body, limits)
                                                                         : parse_completion_request(req.body, limits);
  auto run = std::make_unique<CompletionRun>(router, request);
  ResponseShape shape(endpoint, model_id(stats), stats.model.chat_template_opens_reasoning, request.tool_format,
                      request.engine.top_logprobs >= 0);
  const std::string echo = request.echo ? request.engine.prompt_text : std::string();
  AnsweredMessage answered = chat_recorder(request);
  if (request.stream) {
    answer_stream(std::move(run), std::move(shape), request.include_usage, echo, std::move(answered), res);
  } else {
    answer_whole(*run, shape, echo, answered, res);
  }
}

// The chat's messages and its first choice's message, for on_chat_answered.
AnsweredMessage HttpServer::Impl::chat_recorder(const CompletionRequest& request) const {
  if (!options.on_chat_answered || request.endpoint != Endpoint::ChatCompletions) return {};
  return [this, messages = request.engine.messages](const json& message) {
    try {
      options.on_chat_answered(ServedChat{messages, chat_message_of(message)});
    } catch (const std::exception&) {
      // The client has its whole answer by now: keeping a copy of it must not turn it into an error.
    }
  };
}

// llama-server's /apply-template: the prompt the model's template renders for a chat request's
// messages, tools and chat_template_kwargs, without running it.
void HttpServer::Impl::apply_template(const httplib::Request& req, httplib::Response& res) const {
  require_model();
  const EngineStats stats = engine.stats();
  const json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded() || !body.is_object()) throw ApiError(400, "the request body is not a JSON object", "invalid_request_error");
  json conversation = {{"messages", body.value("messages", json())}};
  if (body.contains("tools")) conversation["tools"] = body["tools"];
  ChatRenderOptions options;
  if (body.contains("chat_template_kwargs")) options.kwargs_json = body["chat_template_kwargs"].dump();
  try {
    const ChatTemplate chat_template = chat_template_from_source(stats.model.chat_template, stats.model.chat_template_source);
    const jinja::Dict context = chat_context_from_json(conversation.dump(), options);
    const std::vector<TextSegment> prompt =
        render_chat_context(chat_template, context, {stats.model.bos_text, stats.model.eos_text}, local_now());
    send_json(res, {{"prompt", joined_text(prompt)}});
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "invalid_request_error");
  }
}

// echo: a completion's prompt text, which its answer begins with.
namespace {

json body_object(const std::string& text) {
  json body = json::parse(text, nullptr, false);
  if (body.is_discarded() || !body.is_object()) throw ApiError(400, "the request body is not a JSON object", "invalid_request_error");
  return body;
}

bool flag(const json& body, const char* name, bool fallback) {
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw invalid_request(std::string("'") + name + "' must be true or false", name);
  return it->get<bool>();
}

// The engine's answer, its kvdesk::Error a 400 (no model, an id out of range).
template <class T>
T engine_answer(std::future<T> future) {
  try {
    return future.get();
  } catch (const Error& e) {
    throw invalid_request(e.what());
  }
}

}  // namespace

// llama-server's /tokenize: {"content", "add_special" (false), "parse_special" (true),
// "with_pieces" (false)} -> {"tokens": [id...]} or [{"id", "piece"}...]; a piece that is not
// whole UTF-8 comes as its byte values.
void HttpServer::Impl::tokenize(const httplib::Request& req, httplib::Response& res) const {
  require_model();
  const json body = body_object(req.body);
  const auto content = body.find("content");
  if (content == body.end() || !content->is_string()) throw invalid_request("'content' must be a string", "content");
  const std::vector<int32_t> ids = engine_answer(
      engine.tokenize(content->get<std::string>(), flag(body, "add_special", false), flag(body, "parse_special", true)));
  if (!flag(body, "with_pieces", false)) {
    send_json(res, {{"tokens", ids}});
    return;
  }
  json tokens = json::array();
  for (int32_t id : ids) {
    const std::string piece = engine_answer(engine.detokenize({id}));
    json bytes = json::array();
    for (unsigned char b : piece) bytes.push_back(int(b));
    tokens.push_back({{"id", id}, {"piece", is_valid_utf8(piece) ? json(piece) : bytes}});
  }
  send_json(res, {{"tokens", tokens}});
}

// llama-server's /detokenize: {"tokens": [id...]} -> {"content"}.
void HttpServer::Impl::detokenize(const httplib::Request& req, httplib::Response& res) const {
  require_model();
  const json body = body_object(req.body);
  const auto tokens = body.find("tokens");
  if (tokens == body.end() || !tokens->is_array()) throw invalid_request("'tokens' must be an array of token ids", "tokens");
  std::vector<int32_t> ids;
  for (const json& t : *tokens) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      throw invalid_request("'tokens' must be an array of token ids", "tokens");
    }
    ids.push_back(t.get<int32_t>());
  }
  send_json(res, {{"content", engine_answer(engine.detokenize(std::move(ids)))}});
}

void HttpServer::Impl::answer_whole(CompletionRun& run, const ResponseShape& shape, const std::string& echo,
                                    const AnsweredMessage& answered, httplib::Response& res) const {
  std::vector<ChoiceAnswer> answers(size_t(run.choices()), ChoiceAnswer{echo, "", {}});
  while (!run.done()) {
    const std::optional<ChoicePiece> piece = run.next(kEventPoll);
    if (!piece) continue;
    ChoiceAnswer& a = answers[size_t(piece->index)];
    a.text += piece->text;
    a.logprobs.insert(a.logprobs.end(), piece->logprobs.begin(), piece->logprobs.end());
  }
  for (int32_t i = 0; i < run.choices(); ++i) answers[size_t(i)].finish_reason = run.finish_reason(i);
  const json body = shape.full(answers, run.usage());
  send_json(res, body);
  if (answered) answered(body["choices"][0]["message"]);
}

// The status line goes out with the first chunk, so the stream waits for the first text (or
// the end) first: a request the engine refuses still gets its HTTP error status.
void HttpServer::Impl::answer_stream(std::unique_ptr<CompletionRun> run, ResponseShape shape, bool include_usage,
                                     const std::string& echo, AnsweredMessage answered, httplib::Response& res) const {
  std::vector<ChoicePiece> early;
  for (int32_t i = 0; i < run->choices() && !echo.empty(); ++i) early.push_back(ChoicePiece{i, echo, {}});
  while (early.empty() && !run->done()) {
    if (std::optional<ChoicePiece> piece = run->next(kEventPoll)) early.push_back(std::move(*piece));
  }
  std::vector<ChoiceStream> choices;
  for (int32_t i = 0; i < run->choices(); ++i) choices.push_back(shape.choice_stream());
  std::vector<bool> finished(size_t(run->choices()), false);
  auto stream = std::make_shared<SseStream>(SseStream{std::move(run), std::move(shape), include_usage, std::move(early),
                                                      std::move(choices), std::move(finished), std::move(answered)});
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", [stream](size_t, httplib::DataSink& sink) {
    return write_stream_step(*stream, sink);
  });
}

HttpServer::HttpServer(EngineClient& engine, RequestRouter& router, const ServingMetrics& metrics, ServeOptions options)
    : impl_(std::make_unique<Impl>(engine, router, metrics, std::move(options))) {
  impl_->configure();
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  const ServeOptions& o = impl_->options;
  const int port = o.port == 0 ? impl_->http.bind_to_any_port(o.host) : impl_->http.bind_to_port(o.host, o.port) ? o.port : -1;
  if (port <= 0) throw Error("cannot listen on " + o.host + ":" + std::to_string(o.port) + " (address in use or not this machine's)");
  return port;
}

void HttpServer::listen() { impl_->http.listen_after_bind(); }

bool HttpServer::listening() const { return impl_->http.is_running(); }

void HttpServer::stop() { impl_->http.stop(); }

}  // namespace kvdesk::server
