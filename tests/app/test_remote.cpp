// Remote engines: the Prometheus text of vLLM, SGLang and llama-server (fixtures written from
// each project's documented /metrics) read into ServerStats with unexposed figures left empty;
// the SSE and OpenAI chunk readers; kvdesk serve's /v1/kv read back into the block map; and a
// RemoteEngine, replay and bench trace against a real `kvdesk-cli serve` on loopback.
#include <catch2/catch.hpp>

#include <atomic>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include <httplib.h>

#include "app/remote/kv_stats_reader.h"
#include "app/remote/model_list.h"
#include "app/remote/openai_stream.h"
#include "app/remote/prometheus_text.h"
#include "app/remote/remote_engine.h"
#include "app/remote/server_stats.h"
#include "app/remote/sse_reader.h"
#include "app/server/kv_json.h"
#include "engine/error.h"
#include "tests/app/serve_process.h"
#include "tests/test_support.h"

using namespace kvdesk;
using kvdesk::test::ServeProcess;

namespace {

ServerStats fixture_stats(const std::string& file) {
  std::ifstream in(test::source_path("tests/app/fixtures/metrics/" + file));
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  return remote::read_server_stats(remote::parse_prometheus_text(text.str()), "http://example:8000");
}

// Events of one request until it finishes (or 60 s pass).
std::vector<Event> events_until_finished(EngineClient& engine, RequestId id) {
  std::vector<Event> out;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       std::chrono::steady_clock::now() < deadline;) {
    for (Event& e : engine.poll_events()) {
      if (e.request != id) continue;
      out.push_back(e);
      if (e.kind == EventKind::Finished || e.kind == EventKind::Error) return out;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  FAIL("request " << id << " did not finish");
  return out;
}

void wait_connected(EngineClient& engine) {
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       std::chrono::steady_clock::now() < deadline;) {
    for (const Event& e : engine.poll_events()) {
      REQUIRE(e.kind != EventKind::Error);
      if (e.kind == EventKind::ModelLoaded) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  FAIL("never connected");
}

std::string answer_text(const std::vector<Event>& events) {
  std::string text;
  for (const Event& e : events) {
    if (e.kind == EventKind::Token) text += e.text;
  }
  return text;
}

Request greedy_chat(const std::string& user, int32_t max_tokens) {
  Request r;
  r.messages = {{"user", user}};
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  return r;
}

}  // namespace

TEST_CASE("Prometheus text: labels with escapes, timestamps, and garbage lines skipped", "[remote]") {
  const auto samples = remote::parse_prometheus_text(
      "# HELP a_total help\n# TYPE a_total counter\na_total{x=\"q\\\"uote\",y=\"line\\nbreak\"} 3.5 1700000000\n"
      "not a metric line {\nb 7\r\nc{broken=\"} 1\nd{le=\"+Inf\"} +Inf\ne NaN-ish\nlast 2");
  REQUIRE(samples.size() == 4);
  CHECK(samples[0].name == "a_total");
  CHECK(samples[0].labels.at("x") == "q\"uote");
  CHECK(samples[0].labels.at("y") == "line\nbreak");
  CHECK(samples[0].value == 3.5);
  CHECK(samples[1].name == "b");
  CHECK(samples[1].value == 7);
  CHECK(std::isinf(samples[2].value));
  CHECK(samples[3].name == "last");
}

TEST_CASE("vLLM's metrics give usage, queue, prefix cache, preemptions and the pool's shape", "[remote]") {
  const ServerStats s = fixture_stats("vllm.txt");
  CHECK(s.kind == "vllm");
  CHECK(*s.kv_usage == 0.4375);
  CHECK(*s.running == 3);
  CHECK(*s.waiting == 1);
  CHECK(*s.prefix_queries == 2000);
  CHECK(*s.prefix_hits == 1500);
  CHECK(*s.prefix_hit_rate == Approx(0.75));
  CHECK(*s.preemptions == 2);
  CHECK(*s.block_size == 16);
  CHECK(*s.num_blocks == 27000);
  CHECK(*s.prompt_tokens == 8128);
  CHECK_FALSE(s.kv_tokens.has_value());
}

TEST_CASE("SGLang's metrics give token usage and its own hit rate, and no preemption count is made up", "[remote]") {
  const ServerStats s = fixture_stats("sglang.txt");
  CHECK(s.kind == "sglang");
  CHECK(*s.kv_usage == 0.28);
  CHECK(*s.kv_tokens == 123859);
  CHECK(*s.running == 5);
  CHECK(*s.waiting == 2);
  CHECK(*s.prefix_hit_rate == Approx(0.0075075526));
  CHECK_FALSE(s.preemptions.has_value());
  CHECK_FALSE(s.block_size.has_value());
}

TEST_CASE("llama-server's metrics give usage and tokens, and no prefix-cache figures are made up", "[remote]") {
  const ServerStats s = fixture_stats("llama_server.txt");
  CHECK(s.kind == "llama-server");
  CHECK(*s.kv_usage == 0.63);
  CHECK(*s.kv_tokens == 2581);
  CHECK(*s.running == 1);
  CHECK(*s.waiting == 0);
  CHECK(*s.generation_tokens == 23210);
  CHECK_FALSE(s.prefix_hit_rate.has_value());
  CHECK_FALSE(s.prefix_queries.has_value());
}

TEST_CASE("metrics of no known server leave every figure empty", "[remote]") {
  const ServerStats s = remote::read_server_stats(remote::parse_prometheus_text("process_cpu_seconds_total 4\n"), "u");
  CHECK(s.kind == "unknown");
  CHECK_FALSE(s.kv_usage.has_value());
  CHECK_FALSE(s.running.has_value());
}

TEST_CASE("SSE events come out whole however the bytes are cut", "[remote]") {
  const std::string stream = ": keep-alive\n\ndata: {\"a\":1}\n\ndata: line1\ndata: line2\r\n\r\nevent: x\ndata: [DONE]\n\n";
  for (size_t piece : {size_t(1), size_t(3), size_t(7), stream.size()}) {
    remote::SseReader reader;
    std::vector<std::string> events;
    for (size_t i = 0; i < stream.size(); i += piece) {
      for (std::string& e : reader.feed(std::string_view(stream).substr(i, piece))) events.push_back(e);
    }
    INFO("pieces of " << piece);
    REQUIRE(events.size() == 3);
    CHECK(events[0] == "{\"a\":1}");
    CHECK(events[1] == "line1\nline2");
    CHECK(events[2] == "[DONE]");
  }
}

TEST_CASE("OpenAI stream chunks give deltas, the finish reason, usage and errors", "[remote]") {
  remote::StreamState s;
  remote::read_stream_chunk(R"({"choices":[{"index":0,"delta":{"role":"assistant"}}]})", s);
  CHECK(s.delta.empty());
  remote::read_stream_chunk(R"({"choices":[{"index":0,"delta":{"content":"Once"},"finish_reason":null}]})", s);
  CHECK(s.delta == "Once");
  remote::read_stream_chunk(R"({"choices":[{"index":0,"text":" upon","finish_reason":"length"}]})", s);
  CHECK(s.delta == " upon");
  CHECK(*s.finish_reason == "length");
  remote::read_stream_chunk(
      R"({"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":8}}})", s);
  CHECK(s.prompt_tokens == 9);
  CHECK(s.cached_tokens == 8);
  CHECK(s.completion_tokens == 4);
  remote::read_stream_chunk("[DONE]", s);
  CHECK(s.done);
  CHECK_THROWS_WITH(remote::read_stream_chunk(R"({"error":{"message":"too long"}})", s), Catch::Contains("too long"));
  CHECK_THROWS_AS(remote::read_stream_chunk("{oops", s), Error);
  Request tokens_only;
  tokens_only.prompt_tokens = {1, 2};
  CHECK_THROWS_AS(remote::openai_call(tokens_only, "m"), Error);
}

TEST_CASE("a server's reasoning_content joins the answer inside <think>, the form kvdesk shows folded", "[remote]") {
  remote::StreamState s;
  std::string text;
  for (const char* chunk : {R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})",
                            R"({"choices":[{"index":0,"delta":{"reasoning_content":"Add"}}]})",
                            R"({"choices":[{"index":0,"delta":{"reasoning":" them."}}]})",
                            R"({"choices":[{"index":0,"delta":{"content":"4"}}]})",
                            R"({"choices":[{"index":0,"delta":{"content":" it is"}}]})"}) {
    remote::read_stream_chunk(chunk, s);
    text += s.delta;
  }
  CHECK(text == "<think>\nAdd them.\n</think>\n\n4 it is");
}

TEST_CASE("a remote request carries its sampling, logit biases included", "[remote]") {
  Request r;
  r.prompt_text = "Once";
  r.max_tokens = 8;
  r.sampling.temperature = 0.5f;
  r.sampling.logit_bias = {{13, -100.0f}, {2, 1.5f}};
  const remote::OpenAiCall call = remote::openai_call(r, "m");
  CHECK(call.path == "/v1/completions");
  CHECK(call.body["temperature"] == 0.5f);
  CHECK(call.body["max_tokens"] == 8);
  CHECK(call.body["logit_bias"] == nlohmann::json{{"13", -100.0f}, {"2", 1.5f}});
  r.sampling.logit_bias.clear();
  CHECK_FALSE(remote::openai_call(r, "m").body.contains("logit_bias"));
}

TEST_CASE("kvdesk serve's /v1/kv reads back into the same KV picture", "[remote]") {
  EngineStats stats;
  stats.running = 2;
  stats.parked = 1;
  stats.kv.layout.k_type = KvType::INT8;
  stats.kv.layout.v_type = KvType::F16;
  stats.kv.layout.block_size = 32;
  stats.kv.layout.recent_rows = 8;
  stats.kv.recent_row_bytes = 4096;
  stats.kv.blocks_total = 3;
  stats.kv.blocks_used = 2;
  stats.kv.blocks_free = 1;
  stats.kv.blocks = {{BlockState::Used, 1, 32}, {BlockState::Shared, 2, 7}, {BlockState::Free, 0, 0}};
  stats.kv.sequences = {{4, 39, {0, 1}, 1, 39, false}};
  stats.kv.what_if = {{16, 9, 900}};
  stats.kv.prefix_hit_rate = 0.5;
  stats.kv.cow_copies = 3;
  stats.kv.layer_groups = 13;
  stats.kv.local_layer_groups = 11;
  stats.kv.layers_per_block = 2;
  stats.kv.sliding_window = 512;
  stats.kv.sequences[0].held_blocks = 20;
  stats.kv.sequences[0].full_attention_blocks = 26;
  stats.kv.sequences[0].group_blocks = {2};
  stats.kv.host_tier.budget_bytes = 1 << 20;
  stats.kv.host_tier.blocks = 6;
  stats.kv.host_tier.hits = 2;
  stats.owners = {{4, 0, 77}};
  EngineStats back;
  remote::read_kv_stats_json(server::kv_stats_json(stats), back);
  CHECK(back.running == 2);
  CHECK(back.parked == 1);
  CHECK(back.kv.layout.k_type == KvType::INT8);
  CHECK(back.kv.layout.v_type == KvType::F16);
  CHECK(back.kv.layout.block_size == 32);
  CHECK(back.kv.layout.recent_rows == 8);
  CHECK(back.kv.recent_row_bytes == 4096);
  CHECK(back.kv.blocks_total == 3);
  REQUIRE(back.kv.blocks.size() == 3);
  CHECK(back.kv.blocks[1].state == BlockState::Shared);
  CHECK(back.kv.blocks[1].ref_count == 2);
  CHECK(back.kv.blocks[1].filled_tokens == 7);
  REQUIRE(back.kv.sequences.size() == 1);
  CHECK(back.kv.sequences[0].block_table == std::vector<int32_t>{0, 1});
  REQUIRE(back.owners.size() == 1);
  CHECK(back.owners[0].conversation_key == 77);
  CHECK(back.kv.what_if.size() == 1);
  CHECK(back.kv.prefix_hit_rate == 0.5);
  CHECK(back.kv.cow_copies == 3);
  CHECK(back.kv.layer_groups == 13);
  CHECK(back.kv.local_layer_groups == 11);
  CHECK(back.kv.layers_per_block == 2);
  CHECK(back.kv.sliding_window == 512);
  CHECK(back.kv.sequences[0].held_blocks == 20);
  CHECK(back.kv.sequences[0].full_attention_blocks == 26);
  CHECK(back.kv.sequences[0].group_blocks == std::vector<int32_t>{2});
  CHECK(back.kv.host_tier.budget_bytes == 1u << 20);
  CHECK(back.kv.host_tier.blocks == 6);
  CHECK(back.kv.host_tier.hits == 2);
}

TEST_CASE("a remote kvdesk serve answers as the server does, with its KV cache in the statistics", "[remote][serve]") {
  ServeProcess server;
  remote::RemoteEngine engine(remote::RemoteOptions("http://127.0.0.1:" + std::to_string(server.port())));
  wait_connected(engine);
  CHECK(engine.stats().model.name == "stories260K.gguf");

  const std::vector<Event> first = events_until_finished(engine, engine.submit(greedy_chat("Once upon a time", 24)));
  REQUIRE(first.back().kind == EventKind::Finished);
  CHECK(first.back().finish == FinishReason::Length);
  CHECK(first.back().metrics.generated_tokens == 24);
  CHECK(first.back().metrics.prompt_tokens > 0);
  CHECK(first.back().metrics.ttft_ms > 0);
  const std::string text = answer_text(first);
  CHECK_FALSE(text.empty());
  // The same request again: the same greedy text, its prompt now in the server's prefix cache.
  const std::vector<Event> again = events_until_finished(engine, engine.submit(greedy_chat("Once upon a time", 24)));
  CHECK(answer_text(again) == text);

  std::this_thread::sleep_for(std::chrono::milliseconds(1200));   // a statistics round
  const EngineStats stats = engine.stats();
  REQUIRE(stats.server.has_value());
  CHECK(stats.server->kind == "kvdesk");
  CHECK(stats.server->kv_usage.has_value());
  CHECK(*stats.server->generation_tokens >= 48);
  CHECK(stats.kv.blocks_total > 0);
  CHECK(stats.kv.blocks.size() == size_t(stats.kv.blocks_total));
}

TEST_CASE("a server's model list is read in the background, and a read it has not answered is dropped at once", "[remote]") {
  httplib::Server http;
  std::promise<void> release;
  const std::shared_future<void> released = release.get_future().share();
  std::atomic<int> reads = 0;
  http.Get("/v1/models", [&](const httplib::Request&, httplib::Response& res) {
    if (reads++ == 0) released.wait_for(std::chrono::seconds(20));   // the first read hangs until released
    res.set_content(R"({"object": "list", "data": [{"id": "m1"}, {"id": "m2", "max_model_len": 4096}]})", "application/json");
  });
  const int port = http.bind_to_any_port("127.0.0.1");
  REQUIRE(port > 0);
  std::thread serving([&] { http.listen_after_bind(); });
  while (!http.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const std::string url = "http://127.0.0.1:" + std::to_string(port);

  auto hanging = remote::list_server_models_async(url, "");
  while (reads == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto dropped_at = std::chrono::steady_clock::now();
  hanging = {};   // a picker moving on to another server: the read (10 s until its timeout) is not waited for
  CHECK(std::chrono::steady_clock::now() - dropped_at < std::chrono::seconds(5));
  release.set_value();

  const std::vector<remote::ServerModel> models = remote::list_server_models_async(url, "").get();
  REQUIRE(models.size() == 2);
  CHECK(models[0].id == "m1");
  CHECK(models[1].context_length == 4096);
  CHECK_THROWS_AS(remote::list_server_models_async("http://127.0.0.1:1", "").get(), Error);
  http.stop();
  serving.join();
}

TEST_CASE("a remote request can be cancelled, and a server that is not there is an error", "[remote][serve]") {
  ServeProcess server;
  remote::RemoteEngine engine(remote::RemoteOptions("http://127.0.0.1:" + std::to_string(server.port())));
  wait_connected(engine);
  const RequestId id = engine.submit(greedy_chat("Once upon a time", 400));
  engine.cancel(id);
  const std::vector<Event> events = events_until_finished(engine, id);
  REQUIRE(events.back().kind == EventKind::Finished);
  CHECK(events.back().finish == FinishReason::Cancelled);
  CHECK(engine.wait_idle(std::chrono::seconds(10)));

  remote::RemoteEngine nowhere(remote::RemoteOptions("http://127.0.0.1:1"));
  bool error = false;
  for (int i = 0; i < 400 && !error; ++i) {
    for (const Event& e : nowhere.poll_events()) error |= e.kind == EventKind::Error && e.text.find("cannot reach") != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(error);
}

TEST_CASE("replay --remote plays a trace against a server and later turns hit its cache", "[remote][serve][replay]") {
  ServeProcess server;
  test::TempDir dir;
  const std::string trace = dir.file("trace.jsonl");
  std::ofstream(trace) << R"({"conversation": "a", "system": "Lily had a red ball. She liked to play with it in the park every day.", "user": "Once upon a time", "max_tokens": 16, "arrival_ms": 0}
{"conversation": "a", "user": "Then", "max_tokens": 8, "after_ms": 5}
)";
  const auto run = test::run_cli({"replay", "--remote", "http://127.0.0.1:" + std::to_string(server.port()), "--trace", trace, "--json"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const auto j = nlohmann::json::parse(run.out);
  REQUIRE(j["turns"].size() == 2);
  CHECK(j["turns"][0]["generated_tokens"] == 16);
  CHECK(j["turns"][1]["cached_tokens"].get<int>() >= 16);
  CHECK(test::run_cli({"replay", "--trace", trace}).exit_code == 2);   // neither --model nor --remote
}
