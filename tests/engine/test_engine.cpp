// Engine: the threaded face. Commands return at once; tokens, errors and statistics arrive
// as events; a bad request ends alone while the others go on.
#include <catch2/catch.hpp>

#include <atomic>
#include <map>
#include <thread>

#include "engine/engine.h"
#include "tests/test_support.h"

using namespace kvdesk;
using kvdesk::test::model_path;
using kvdesk::test::reference;

namespace {

using namespace std::chrono_literals;

EngineSettings stories_settings() {
  EngineSettings s;
  s.model_path = model_path("stories260K.gguf");
  s.threads = 2;
  s.kv.k_type = KvType::F32;
  s.kv.v_type = KvType::F32;
  s.kv.num_blocks = 128;
  return s;
}

struct Collected {
  std::map<RequestId, std::string> text;
  std::map<RequestId, std::vector<int32_t>> tokens;
  std::map<RequestId, Event> finished;
  std::map<RequestId, std::string> errors;
  int model_loaded = 0;
  std::vector<double> progress;

  void take(const std::vector<Event>& events) {
    for (const Event& e : events) {
      switch (e.kind) {
        case EventKind::ModelLoaded: ++model_loaded; break;
        case EventKind::LoadProgress: progress.push_back(e.progress); break;
        case EventKind::Token:
          text[e.request] += e.text;
          if (e.token >= 0) tokens[e.request].push_back(e.token);
          break;
        case EventKind::Finished: finished[e.request] = e; break;
        case EventKind::Error: errors[e.request] = e.text; break;
        case EventKind::KvQuality: break;
      }
    }
  }
};

}  // namespace

TEST_CASE("the engine thread streams the reference continuation for a chat message", "[engine][engine_thread]") {
  std::atomic<int> wakes{0};
  Engine engine([&] { ++wakes; });
  engine.load_model(stories_settings());
  Request r;
  r.messages = {{"user", reference()["prompt"].get<std::string>()}};
  r.max_tokens = 64;
  r.stop_at_eos = false;
  const RequestId id = engine.submit(r);
  REQUIRE(engine.wait_idle(60s));
  Collected c;
  c.take(engine.poll_events());
  CHECK(c.model_loaded == 1);
  CHECK(c.tokens[id] == reference()["generated_ids"].get<std::vector<int32_t>>());
  CHECK(c.text[id] == reference()["text"].get<std::string>());
  REQUIRE(c.finished.count(id) == 1);
  CHECK(c.finished[id].finish == FinishReason::Length);
  CHECK(c.finished[id].metrics.ttft_ms > 0);
  CHECK(c.finished[id].metrics.decode_tok_s > 0);
  CHECK(wakes > 0);
  const EngineStats stats = engine.stats();
  CHECK(stats.model_loaded);
  CHECK(stats.model.layers == 5);
  CHECK(stats.generated_tokens == 64);
  CHECK(stats.kv.blocks_total == 128);
}

TEST_CASE("a plain-text prompt is encoded by the engine with BOS", "[engine][engine_thread]") {
  Engine engine;
  engine.load_model(stories_settings());
  Request r;
  r.prompt_text = reference()["prompt"].get<std::string>();
  r.max_tokens = 64;
  r.stop_at_eos = false;
  const RequestId id = engine.submit(r);
  REQUIRE(engine.wait_idle(60s));
  Collected c;
  c.take(engine.poll_events());
  REQUIRE(c.finished.count(id) == 1);
  CHECK(c.finished[id].metrics.prompt_tokens == int32_t(reference()["prompt_ids"].size()));
  CHECK(c.tokens[id] == reference()["generated_ids"].get<std::vector<int32_t>>());
}

TEST_CASE("a bad request ends with an error while the others finish", "[engine][engine_thread]") {
  Engine engine;
  EngineSettings small_pool = stories_settings();
  small_pool.kv.num_blocks = 16;   // 256 tokens: less than the model's 512-token context
  engine.load_model(small_pool);
  Request good;
  good.prompt_tokens = {1, 403, 407};
  good.max_tokens = 16;
  Request bad_role;
  bad_role.messages = {{"wizard", "hi"}};
  Request bad_token;
  bad_token.prompt_tokens = {1, 99999};
  Request too_long;
  too_long.prompt_tokens = {1, 403};
  too_long.max_tokens = 400;
  const RequestId a = engine.submit(good);
  const RequestId b = engine.submit(bad_role);
  const RequestId c = engine.submit(bad_token);
  const RequestId d = engine.submit(too_long);
  REQUIRE(engine.wait_idle(60s));
  Collected events;
  events.take(engine.poll_events());
  CHECK(events.finished.count(a) == 1);
  CHECK(events.errors[b].find("role") != std::string::npos);
  CHECK(events.errors[c].find("out of range") != std::string::npos);
  CHECK(events.errors[d].find("KV blocks") != std::string::npos);
}

TEST_CASE("a model that cannot be opened gives an error event and the engine stays usable", "[engine][engine_thread]") {
  Engine engine;
  EngineSettings broken = stories_settings();
  broken.model_path = "/nonexistent/model.gguf";
  engine.load_model(broken);
  REQUIRE(engine.wait_idle(10s));
  Collected c;
  c.take(engine.poll_events());
  CHECK(c.errors[0].find("/nonexistent/model.gguf") != std::string::npos);
  engine.load_model(stories_settings());
  Request r;
  r.prompt_tokens = {1, 403};
  r.max_tokens = 4;
  const RequestId id = engine.submit(r);
  REQUIRE(engine.wait_idle(30s));
  c.take(engine.poll_events());
  CHECK(c.finished.count(id) == 1);
}

TEST_CASE("cancel mid-stream frees the request's blocks", "[engine][engine_thread]") {
  Engine engine;
  engine.load_model(stories_settings());
  Request r;
  r.prompt_tokens = {1, 403, 407, 261, 378};
  r.max_tokens = 400;
  r.stop_at_eos = false;
  const RequestId id = engine.submit(r);
  Collected c;
  for (int i = 0; i < 2000 && c.tokens[id].size() < 5; ++i) {
    c.take(engine.poll_events());
    std::this_thread::sleep_for(1ms);
  }
  engine.cancel(id);
  REQUIRE(engine.wait_idle(30s));
  c.take(engine.poll_events());
  REQUIRE(c.finished.count(id) == 1);
  CHECK(c.finished[id].finish == FinishReason::Cancelled);
  CHECK(c.tokens[id].size() < 400);
  const EngineStats stats = engine.stats();
  CHECK(stats.kv.blocks_used == 0);
}

TEST_CASE("changing the KV settings mid-stream keeps every answer going", "[engine][engine_thread]") {
  Engine engine;
  engine.load_model(stories_settings());
  Request r;
  r.prompt_tokens = reference()["prompt_ids"].get<std::vector<int32_t>>();
  r.max_tokens = 64;
  r.stop_at_eos = false;
  const RequestId id = engine.submit(r);
  KvLayout layout;
  layout.k_type = KvType::F16;
  layout.v_type = KvType::F16;
  layout.block_size = 32;
  layout.num_blocks = 40;
  engine.reconfigure_kv(layout, 0, true, size_t(1) << 20);
  REQUIRE(engine.wait_idle(60s));
  Collected c;
  c.take(engine.poll_events());
  CHECK(c.tokens[id] == reference()["generated_ids"].get<std::vector<int32_t>>());
  CHECK(engine.stats().kv.layout.block_size == 32);
  CHECK(engine.stats().kv.host_tier.budget_bytes == size_t(1) << 20);
}
