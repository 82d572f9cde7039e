// kvdesk-cli serve end to end: the server runs as a child process on a free loopback port and
// is driven by a real HTTP client (httplib), raw sockets where a client must misbehave, and the
// curl binary for one stream. Every server is stopped (SIGTERM, then SIGKILL) when its test ends.
#include <catch2/catch.hpp>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <latch>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "tests/app/serve_process.h"
#include "tests/test_support.h"

using kvdesk::test::model_path;
using kvdesk::test::reference;
using kvdesk::test::ServeProcess;
using nlohmann::json;

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

json chat_request(const std::string& content, int max_tokens, json extra = json::object()) {
  json body = {{"model", "stories260K.gguf"},
               {"messages", {{{"role", "user"}, {"content", content}}}},
               {"temperature", 0},
               {"max_tokens", max_tokens}};
  body.update(extra);
  return body;
}

httplib::Result post(httplib::Client& c, const std::string& path, const json& body) {
  return c.Post(path.c_str(), body.dump(), "application/json");
}

// The JSON payloads of "data: ..." events, [DONE] kept as the string "[DONE]".
std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> payloads;
  size_t start = 0;
  while (start < body.size()) {
    size_t end = body.find("\n\n", start);
    if (end == std::string::npos) end = body.size();
    const std::string event = body.substr(start, end - start);
    if (event.rfind("data: ", 0) == 0) payloads.push_back(event.substr(6));
    start = end + 2;
  }
  return payloads;
}

struct StreamedAnswer {
  std::string text;
  std::string finish_reason;
  json usage;
  bool role_first = false;
  bool done_last = false;
};

// Checks each chunk's shape on the way.
StreamedAnswer read_stream(const std::string& body, const std::string& object = "chat.completion.chunk") {
  StreamedAnswer a;
  const std::vector<std::string> payloads = sse_payloads(body);
  REQUIRE(payloads.size() >= 2);
  a.done_last = payloads.back() == "[DONE]";
  for (size_t i = 0; i + 1 < payloads.size(); ++i) {
    const json chunk = json::parse(payloads[i]);
    CHECK(chunk["object"] == object);
    if (chunk.contains("usage")) a.usage = chunk["usage"];
    if (chunk["choices"].empty()) continue;
    const json& choice = chunk["choices"][0];
    if (i == 0) a.role_first = choice.contains("delta") && choice["delta"].value("role", "") == "assistant";
    if (choice.contains("delta")) a.text += choice["delta"].value("content", "");
    if (choice.contains("text")) a.text += choice["text"].get<std::string>();
    if (!choice["finish_reason"].is_null()) a.finish_reason = choice["finish_reason"];
  }
  return a;
}

json get_json(httplib::Client& c, const std::string& path) {
  const auto res = c.Get(path.c_str());
  REQUIRE(res);
  REQUIRE(res->status == 200);
  return json::parse(res->body);
}

// One metric's value from the Prometheus text (the first series of that name).
double metric(const std::string& text, const std::string& name) {
  const std::regex line("(^|\n)" + name + "\\{[^}]*\\} ([^\n]+)");
  std::smatch m;
  REQUIRE(std::regex_search(text, m, line));
  return std::stod(m[2]);
}

std::string metrics_text(httplib::Client& c) {
  const auto res = c.Get("/metrics");
  REQUIRE(res);
  REQUIRE(res->status == 200);
  return res->body;
}

// The error JSON of a refused request: its status and OpenAI's shape.
json expect_error(const httplib::Result& res, int status) {
  REQUIRE(res);
  INFO(res->body);
  CHECK(res->status == status);
  const json j = json::parse(res->body);
  REQUIRE(j.contains("error"));
  CHECK(j["error"]["message"].is_string());
  CHECK(j["error"]["type"].is_string());
  CHECK(j["error"].contains("param"));
  CHECK(j["error"].contains("code"));
  return j["error"];
}

// Polls the server until pred(kv stats) holds or 10 s pass.
bool wait_for_kv(httplib::Client& c, const std::function<bool(const json&)>& pred) {
  for (auto deadline = Clock::now() + 10s; Clock::now() < deadline; std::this_thread::sleep_for(20ms)) {
    if (pred(get_json(c, "/v1/kv"))) return true;
  }
  return false;
}

// Starts a streamed chat answer on a raw socket, reads until its first event, and hangs up.
void hang_up_mid_stream(int port, int max_tokens) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  timeval timeout{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  const std::string body = chat_request("Once", max_tokens, {{"stream", true}}).dump();
  const std::string request = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                              "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  REQUIRE(::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == ssize_t(request.size()));
  std::string received;
  char buf[4096];
  while (received.find("data: ") == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    received.append(buf, size_t(n));
  }
  ::close(fd);
  CHECK(received.find("200 OK") != std::string::npos);
}

}  // namespace

TEST_CASE("serve answers a chat greedily, whole and streamed, with the reference text", "[app][serve]") {
  ServeProcess server;
  httplib::Client c = server.client();
  const std::string expected = reference()["text"];

  const auto whole = post(c, "/v1/chat/completions", chat_request("Once upon a time", 64));
  REQUIRE(whole);
  REQUIRE(whole->status == 200);
  const json j = json::parse(whole->body);
  CHECK(j["object"] == "chat.completion");
  CHECK(j["model"] == "stories260K.gguf");
  CHECK(j["choices"][0]["message"]["role"] == "assistant");
  CHECK(j["choices"][0]["message"]["content"] == expected);
  CHECK(j["choices"][0]["finish_reason"] == "length");
  CHECK(j["usage"]["prompt_tokens"] == 5);
  CHECK(j["usage"]["completion_tokens"] == 64);
  CHECK(j["usage"]["total_tokens"] == 69);
  CHECK(j["usage"]["prompt_tokens_details"]["cached_tokens"] == 0);

  const auto streamed = post(c, "/v1/chat/completions",
                             chat_request("Once upon a time", 64, {{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  REQUIRE(streamed);
  REQUIRE(streamed->status == 200);
  CHECK(streamed->get_header_value("Content-Type").find("text/event-stream") == 0);
  const StreamedAnswer a = read_stream(streamed->body);
  CHECK(a.role_first);
  CHECK(a.done_last);
  CHECK(a.text == expected);
  CHECK(a.finish_reason == "length");
  CHECK(a.usage["completion_tokens"] == 64);
  CHECK(a.usage["total_tokens"] == 69);
  CHECK(server.stop() == 0);   // SIGTERM is a clean shutdown
}

TEST_CASE("serve streams to curl", "[app][serve]") {
  ServeProcess server;
  const auto run = kvdesk::test::run_program(
      "curl", {"-sS", "-N", "--max-time", "30", "-H", "Content-Type: application/json", "-d",
               chat_request("Once upon a time", 64, {{"stream", true}}).dump(), server.url("/v1/chat/completions")});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const StreamedAnswer a = read_stream(run.out);
  CHECK(a.role_first);
  CHECK(a.done_last);
  CHECK(a.text == reference()["text"].get<std::string>());
  CHECK(a.usage.is_null());   // no usage chunk unless stream_options.include_usage
}

TEST_CASE("serve completions: a text prompt, stop strings cut the answer before them", "[app][serve]") {
  ServeProcess server;
  httplib::Client c = server.client();
  const std::string full = reference()["text"];
  const std::string before_stop = full.substr(0, full.find(" park"));
  const json body = {{"prompt", "Once upon a time"}, {"temperature", 0}, {"max_tokens", 64}, {"stop", {" park", "zebra"}}};

  const auto whole = post(c, "/v1/completions", body);
  REQUIRE(whole);
  REQUIRE(whole->status == 200);
  const json j = json::parse(whole->body);
  CHECK(j["object"] == "text_completion");
  CHECK(j["choices"][0]["text"] == before_stop);
  CHECK(j["choices"][0]["finish_reason"] == "stop");
  CHECK(j["usage"]["prompt_tokens"] == 5);
  CHECK(j["usage"]["completion_tokens"].get<int>() < 64);

  json streamed_body = body;
  streamed_body["stream"] = true;
  const auto streamed = post(c, "/v1/completions", streamed_body);
  REQUIRE(streamed);
  REQUIRE(streamed->status == 200);
  const StreamedAnswer a = read_stream(streamed->body, "text_completion");
  CHECK(a.text == before_stop);
  CHECK(a.finish_reason == "stop");

  const auto no_stop = post(c, "/v1/completions", {{"prompt", "Once upon a time"}, {"temperature", 0}, {"max_tokens", 64}});
  REQUIRE(no_stop);
  CHECK(json::parse(no_stop->body)["choices"][0]["text"] == full);

  // logit_bias -100 on the greedy answer's first token: greedy takes another.
  const std::string first_id = std::to_string(reference()["generated_ids"][0].get<int>());
  const std::string first_piece = reference()["generated_pieces"][0];
  const auto banned = post(c, "/v1/completions", {{"prompt", "Once upon a time"}, {"temperature", 0}, {"max_tokens", 8},
                                                  {"logit_bias", {{first_id, -100}}}});
  REQUIRE(banned);
  REQUIRE(banned->status == 200);
  const std::string banned_text = json::parse(banned->body)["choices"][0]["text"];
  CHECK_FALSE(banned_text.empty());
  CHECK(banned_text.rfind(first_piece, 0) != 0);
  CHECK(expect_error(post(c, "/v1/completions", {{"prompt", "Once"}, {"logit_bias", {{"99999", 1}}}}), 400)["param"] ==
        "logit_bias");
}

TEST_CASE("serve lists its model, reports health, Prometheus metrics and KV stats", "[app][serve]") {
  ServeProcess server;
  httplib::Client c = server.client();
  const json models = get_json(c, "/v1/models");
  CHECK(models["object"] == "list");
  REQUIRE(models["data"].size() == 1);
  CHECK(models["data"][0]["id"] == "stories260K.gguf");
  CHECK(models["data"][0]["object"] == "model");
  CHECK(get_json(c, "/health") == json{{"status", "ok"}});

  REQUIRE(post(c, "/v1/chat/completions", chat_request("Once upon a time", 16))->status == 200);
  const std::string text = metrics_text(c);
  const std::regex sample_line("[a-zA-Z_:][a-zA-Z0-9_:]*(\\{[^}]*\\})? ([-+0-9.eE]+|\\+Inf|NaN)");
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    INFO(line);
    CHECK((line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0 || std::regex_match(line, sample_line)));
  }
  for (const char* name :
       {"kvdesk:num_requests_running", "kvdesk:num_requests_waiting", "kvdesk:kv_cache_usage_perc", "kvdesk:kv_blocks_used",
        "kvdesk:kv_blocks_cached", "kvdesk:kv_blocks_free", "kvdesk:prefix_cache_queries_total",
        "kvdesk:prefix_cache_hits_total", "kvdesk:num_preemptions_total", "kvdesk:prompt_tokens_total",
        "kvdesk:generation_tokens_total", "kvdesk:time_to_first_token_seconds_bucket",
        "kvdesk:time_to_first_token_seconds_count", "kvdesk:inter_token_latency_seconds_bucket",
        "kvdesk:inter_token_latency_seconds_sum"}) {
    INFO(name);
    CHECK(text.find(std::string(name) + "{") != std::string::npos);
  }
  CHECK(metric(text, "kvdesk:prompt_tokens_total") == 5);
  CHECK(metric(text, "kvdesk:generation_tokens_total") == 16);
  CHECK(metric(text, "kvdesk:time_to_first_token_seconds_count") == 1);
  CHECK(metric(text, "kvdesk:inter_token_latency_seconds_count") == 15);
  CHECK(text.find("kvdesk:time_to_first_token_seconds_bucket{model_name=\"stories260K.gguf\",le=\"+Inf\"} 1") !=
        std::string::npos);

  REQUIRE(wait_for_kv(c, [](const json& kv) { return kv["blocks_used"] == 0; }));
  const json kv = get_json(c, "/v1/kv");
  CHECK(kv["blocks_total"].get<int>() > 0);
  CHECK(kv["blocks"].size() == kv["blocks_total"].get<size_t>());
  CHECK(kv["blocks_used"].get<int>() + kv["blocks_cached"].get<int>() + kv["blocks_free"].get<int>() == kv["blocks_total"]);
  CHECK(kv["block_size"] == 16);
  CHECK(kv["sequences"].is_array());
}

TEST_CASE("serve: 8 concurrent greedy clients get the answers each gets alone", "[app][serve]") {
  ServeProcess server;
  const std::vector<std::string> prompts = {"Once upon a time", "Lily wanted to", "The cat sat", "Tom and Sue",
                                            "One day, a big", "The sun was", "A little dog", "Sara saw a bird"};
  auto ask = [&](size_t i) {
    httplib::Client c = server.client();
    const bool stream = i % 2 == 1;
    const auto res = post(c, "/v1/chat/completions", chat_request(prompts[i], 48, {{"stream", stream}}));
    REQUIRE(res);
    REQUIRE(res->status == 200);
    return stream ? read_stream(res->body).text : json::parse(res->body)["choices"][0]["message"]["content"].get<std::string>();
  };
  std::vector<std::string> solo;
  for (size_t i = 0; i < prompts.size(); ++i) solo.push_back(ask(i));

  std::vector<std::string> together(prompts.size());
  std::vector<std::string> failures(prompts.size());
  std::latch start(ptrdiff_t(prompts.size()));
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back([&, i] {
      start.arrive_and_wait();
      httplib::Client c = server.client();
      const bool stream = i % 2 == 1;
      const auto res = post(c, "/v1/chat/completions", chat_request(prompts[i], 48, {{"stream", stream}}));
      if (!res || res->status != 200) {
        failures[i] = res ? res->body : "no response";
        return;
      }
      const std::vector<std::string> payloads = sse_payloads(res->body);
      if (!stream) {
        together[i] = json::parse(res->body)["choices"][0]["message"]["content"];
        return;
      }
      for (size_t k = 0; k + 1 < payloads.size(); ++k) {
        const json chunk = json::parse(payloads[k]);
        if (!chunk["choices"].empty()) together[i] += chunk["choices"][0]["delta"].value("content", "");
      }
    });
  }
  for (std::thread& t : clients) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    INFO(prompts[i] << ": " << failures[i]);
    CHECK(failures[i].empty());
    CHECK(!solo[i].empty());
    CHECK(together[i] == solo[i]);
  }
}

TEST_CASE("serve cancels the request of a client that hangs up mid-stream and frees its blocks", "[app][serve]") {
  ServeProcess server;
  httplib::Client c = server.client();
  // The tiny model writes a whole answer in well under a second, so a hang-up can land after
  // the end; a few tries give the server a stream to notice it in.
  constexpr int kMaxTokens = 500;
  double aborted = 0;
  for (int attempt = 0; attempt < 3 && aborted == 0; ++attempt) {
    hang_up_mid_stream(server.port(), kMaxTokens);
    REQUIRE(wait_for_kv(c, [](const json& kv) { return kv["blocks_used"] == 0 && kv["running"] == 0; }));
    aborted = metric(metrics_text(c), "kvdesk:num_requests_aborted_total");
  }
  CHECK(aborted >= 1);
  const std::string text = metrics_text(c);
  CHECK(metric(text, "kvdesk:generation_tokens_total") < 3 * kMaxTokens);
  CHECK(metric(text, "kvdesk:kv_blocks_used") == 0);
  CHECK(get_json(c, "/health") == json{{"status", "ok"}});
  const auto after = post(c, "/v1/chat/completions", chat_request("Once upon a time", 64));
  REQUIRE(after);
  CHECK(json::parse(after->body)["choices"][0]["message"]["content"] == reference()["text"]);
}

TEST_CASE("serve answers bad requests with OpenAI error JSON and keeps serving", "[app][serve]") {
  ServeProcess server;
  httplib::Client c = server.client();
  const std::string chat = "/v1/chat/completions";

  CHECK(expect_error(c.Post(chat.c_str(), "{\"messages\": [", "application/json"), 400)["type"] == "invalid_request_error");
  expect_error(c.Post(chat.c_str(), "", "application/json"), 400);
  expect_error(c.Post(chat.c_str(), "[1, 2]", "application/json"), 400);
  expect_error(c.Post(chat.c_str(), std::string(100000, '[') + std::string(100000, ']'), "application/json"), 400);
  CHECK(expect_error(post(c, chat, chat_request("hi", 8, {{"temperature", "hot"}})), 400)["param"] == "temperature");
  CHECK(expect_error(post(c, chat, chat_request("hi", 8, {{"max_tokens", 1.5}})), 400)["param"] == "max_tokens");
  CHECK(expect_error(post(c, chat, chat_request("hi", 8, {{"stream", "yes"}})), 400)["param"] == "stream");
  CHECK(expect_error(post(c, chat, chat_request("hi", 8, {{"stop", {1, 2}}})), 400)["param"] == "stop");
  CHECK(expect_error(post(c, chat, {{"messages", "hi"}}), 400)["param"] == "messages");
  CHECK(expect_error(post(c, chat, {{"messages", json::array()}}), 400)["param"] == "messages");
  CHECK(expect_error(post(c, chat, chat_request("hi", 8, {{"temperature", 3}})), 400)["param"] == "temperature");
  CHECK(expect_error(post(c, chat, chat_request("hi", 0)), 400)["param"] == "max_tokens");
  CHECK(expect_error(post(c, chat, chat_request("hi", 8, {{"top_p", 0}})), 400)["param"] == "top_p");
  CHECK(expect_error(post(c, chat, chat_request("hi", 8, {{"presence_penalty", -3}})), 400)["param"] == "presence_penalty");
  CHECK(expect_error(post(c, chat, chat_request("hi", 8, {{"n", 40}})), 400)["param"] == "n");
  CHECK(expect_error(post(c, chat, chat_request(std::string(3000, 'x'), 4, {{"n", 3}})), 400)["code"] ==
        "context_length_exceeded");
  CHECK(expect_error(post(c, chat, {{"messages", {{{"role", "wizard"}, {"content", "hi"}}}}}), 400)["param"] ==
        "messages[0].role");
  CHECK(expect_error(post(c, "/v1/completions", {{"prompt", 42}}), 400)["param"] == "prompt");

  std::string long_prompt;
  for (int i = 0; i < 200; ++i) long_prompt += "Once upon a time ";
  CHECK(expect_error(post(c, "/v1/completions", {{"prompt", long_prompt}, {"max_tokens", 4}}), 400)["code"] ==
        "context_length_exceeded");
  CHECK(expect_error(post(c, chat, chat_request(long_prompt, 4, {{"stream", true}})), 400)["code"] ==
        "context_length_exceeded");
  expect_error(post(c, "/v1/completions", {{"prompt", {1, 99999}}, {"max_tokens", 4}}), 400);

  CHECK(expect_error(c.Get("/v1/nothing"), 404)["code"] == "not_found");
  expect_error(c.Get(chat.c_str()), 404);
  CHECK(get_json(c, "/health") == json{{"status", "ok"}});
}

TEST_CASE("serve: n choices share one prefill and fork the prompt's blocks, and a schema holds each", "[app][serve]") {
  ServeProcess server;
  httplib::Client c = server.client();
  const json schema = {{"type", "object"},
                       {"properties", {{"word", {{"type", "string"}, {"maxLength", 6}}}, {"n", {{"type", "integer"}, {"minimum", 0}, {"maximum", 99}}}}},
                       {"required", {"word", "n"}},
                       {"additionalProperties", false}};
  const json format = {{"type", "json_schema"}, {"json_schema", {{"name", "w"}, {"schema", schema}}}};
  const auto res = post(c, "/v1/chat/completions",
                        chat_request("Once upon a time", 64, {{"n", 3}, {"temperature", 1.0}, {"seed", 4}, {"response_format", format}}));
  REQUIRE(res);
  REQUIRE(res->status == 200);
  const json j = json::parse(res->body);
  REQUIRE(j["choices"].size() == 3);
  for (int i = 0; i < 3; ++i) {
    const json& choice = j["choices"][i];
    INFO(choice.dump());
    CHECK(choice["index"] == i);
    CHECK(choice["finish_reason"] == "stop");
    const json answer = json::parse(choice["message"]["content"].get<std::string>());
    CHECK(answer.size() == 2);
    CHECK(answer["word"].get<std::string>().size() <= 6 * 4);
    CHECK(answer["n"].get<int>() >= 0);
    CHECK(answer["n"].get<int>() <= 99);
  }
  CHECK(j["usage"]["prompt_tokens"] == 5);
  CHECK(metric(metrics_text(c), "kvdesk:kv_forks_total") >= 2);

  const auto streamed = post(c, "/v1/chat/completions", chat_request("Once upon a time", 8, {{"n", 2}, {"stream", true}}));
  REQUIRE(streamed);
  std::set<int> finished;
  for (const std::string& payload : sse_payloads(streamed->body)) {
    if (payload == "[DONE]") continue;
    const json chunk = json::parse(payload);
    for (const json& choice : chunk["choices"]) {
      if (!choice["finish_reason"].is_null()) finished.insert(choice["index"].get<int>());
    }
  }
  CHECK(finished == std::set<int>{0, 1});
}

TEST_CASE("serve tokenizes and detokenizes as llama-server does", "[app][serve]") {
  ServeProcess server;
  httplib::Client c = server.client();
  const auto with_bos = post(c, "/tokenize", {{"content", "Once upon a time"}, {"add_special", true}});
  REQUIRE(with_bos);
  REQUIRE(with_bos->status == 200);
  const std::vector<int32_t> ids = json::parse(with_bos->body)["tokens"].get<std::vector<int32_t>>();
  REQUIRE(ids.size() == 5);   // as the chat request's prompt_tokens: BOS and four words
  CHECK(ids[0] == 1);
  const json plain = json::parse(post(c, "/tokenize", {{"content", "Once upon a time"}})->body);
  CHECK(plain["tokens"].get<std::vector<int32_t>>() == std::vector<int32_t>(ids.begin() + 1, ids.end()));
  const json pieces = json::parse(post(c, "/tokenize", {{"content", "Once"}, {"with_pieces", true}})->body);
  CHECK(pieces["tokens"][0]["piece"] == " Once");
  const json text = json::parse(post(c, "/detokenize", {{"tokens", plain["tokens"]}})->body);
  CHECK(text["content"] == " Once upon a time");
  CHECK(expect_error(post(c, "/detokenize", {{"tokens", {1, 99999}}}), 400)["message"].get<std::string>().find("out of range") !=
        std::string::npos);
  CHECK(expect_error(post(c, "/tokenize", {{"content", 5}}), 400)["param"] == "content");
}

TEST_CASE("serve refuses a body over 4 MiB, or a form-encoded one over 8 KiB, with 413", "[app][serve]") {
  ServeProcess server;
  httplib::Client c = server.client();
  const std::string body = chat_request(std::string(5 << 20, 'a'), 4).dump();
  const auto res = c.Post("/v1/chat/completions", body, "application/json");
  CHECK(expect_error(res, 413)["code"] == "payload_too_large");
  // A small JSON body sent as a form (curl -d's default type) is told what to change.
  const auto form = c.Post("/v1/chat/completions", chat_request(std::string(20000, 'a'), 4).dump(),
                           "application/x-www-form-urlencoded");
  CHECK_THAT(expect_error(form, 413)["message"].get<std::string>(), Catch::Contains("Content-Type: application/json"));
  CHECK(get_json(c, "/health") == json{{"status", "ok"}});
}

TEST_CASE("serve answers 503 when more requests are in flight than --max-queue", "[app][serve]") {
  ServeProcess server({"--max-queue", "1"});
  constexpr int kClients = 8;
  std::vector<int> statuses(kClients, 0);
  std::vector<std::string> bodies(kClients);
  std::latch start(kClients);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      start.arrive_and_wait();
      httplib::Client c = server.client();
      const auto res = post(c, "/v1/chat/completions", chat_request("Once", 500));
      if (res) statuses[size_t(i)] = res->status;
      if (res) bodies[size_t(i)] = res->body;
    });
  }
  for (std::thread& t : clients) t.join();
  int served = 0, busy = 0;
  for (int i = 0; i < kClients; ++i) {
    INFO(bodies[size_t(i)]);
    CHECK((statuses[size_t(i)] == 200 || statuses[size_t(i)] == 503));
    served += statuses[size_t(i)] == 200;
    if (statuses[size_t(i)] == 503) {
      ++busy;
      CHECK(json::parse(bodies[size_t(i)])["error"]["code"] == "queue_full");
    }
  }
  CHECK(served >= 1);
  CHECK(busy >= 1);
}

TEST_CASE("serve with --api-key wants the bearer key on every route but /health", "[app][serve]") {
  ServeProcess server({"--api-key", "sekrit"});
  httplib::Client anonymous = server.client();
  httplib::Client wrong = server.client("guess");
  httplib::Client right = server.client("sekrit");
  CHECK(get_json(anonymous, "/health") == json{{"status", "ok"}});
  CHECK(expect_error(anonymous.Get("/v1/models"), 401)["type"] == "authentication_error");
  expect_error(wrong.Get("/v1/models"), 401);
  expect_error(anonymous.Get("/metrics"), 401);
  expect_error(post(wrong, "/v1/chat/completions", chat_request("Once upon a time", 4)), 401);
  CHECK(get_json(right, "/v1/models")["data"][0]["id"] == "stories260K.gguf");
  const auto res = post(right, "/v1/chat/completions", chat_request("Once upon a time", 4));
  REQUIRE(res);
  CHECK(res->status == 200);
}

TEST_CASE("serve refuses a non-loopback host without --api-key", "[app][serve]") {
  const auto run = kvdesk::test::run_cli({"serve", "-m", model_path("stories260K.gguf"), "--host", "0.0.0.0", "--port", "0"});
  CHECK(run.exit_code == 2);
  CHECK(run.err.find("--api-key") != std::string::npos);
  CHECK(run.out.find("listening") == std::string::npos);
}

TEST_CASE("serve: a growing conversation reuses its prefix from the cache", "[app][serve]") {
  ServeProcess server;
  httplib::Client c = server.client();
  const json system = {{"role", "system"},
                       {"content", "Tell a short story about a girl, her dog and a big red ball in the park near her house."}};
  json messages = {system, {{"role", "user"}, {"content", "Once upon a time"}}};
  const auto first = post(c, "/v1/chat/completions", {{"messages", messages}, {"temperature", 0}, {"max_tokens", 24}});
  REQUIRE(first);
  REQUIRE(first->status == 200);
  const json a = json::parse(first->body);
  CHECK(a["usage"]["prompt_tokens_details"]["cached_tokens"] == 0);
  CHECK(a["usage"]["prompt_tokens"].get<int>() > 16);
  messages.push_back({{"role", "assistant"}, {"content", a["choices"][0]["message"]["content"]}});
  messages.push_back({{"role", "user"}, {"content", "What happened next?"}});
  const auto second = post(c, "/v1/chat/completions", {{"messages", messages}, {"temperature", 0}, {"max_tokens", 24}});
  REQUIRE(second);
  REQUIRE(second->status == 200);
  const json b = json::parse(second->body);
  CHECK(b["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>() >= 16);
  CHECK(metric(metrics_text(c), "kvdesk:prefix_cache_hits_total") >= 16);
}
