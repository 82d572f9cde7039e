// Engine resource limits: a KV pool that does not fit in the memory there is, a budget too
// small for one block of every layer, and a request needing more blocks than the whole pool
// are each refused with a message before anything big is allocated, and the engine keeps
// running (a later request gets a clear error, never a crash).
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "engine/engine.h"
#include "engine/model/model.h"
#include "tests/test_support.h"

using namespace kvdesk;
using kvdesk::test::model_path;
using namespace std::chrono_literals;

namespace {

EngineSettings stories_settings() {
  EngineSettings s;
  s.model_path = model_path("stories260K.gguf");
  s.threads = 1;
  s.kv.k_type = KvType::F32;
  s.kv.v_type = KvType::F32;
  return s;
}

// Runs the engine until idle; the text of every error event, in order.
std::vector<std::string> errors_after(Engine& engine) {
  REQUIRE(engine.wait_idle(60s));
  std::vector<std::string> errors;
  for (const Event& e : engine.poll_events()) {
    if (e.kind == EventKind::Error) errors.push_back(e.text);
  }
  return errors;
}

Request story_request(int32_t max_tokens) {
  Request r;
  r.messages = {{"user", "Once upon a time"}};
  r.max_tokens = max_tokens;
  return r;
}

}  // namespace

TEST_CASE("a KV pool larger than the memory left is refused before it is allocated", "[engine][memory]") {
  // 2^20 blocks of 16 tokens x 5 layers x K and V of 4 heads x 8 floats: 20 GiB if allocated.
  EngineSettings s = stories_settings();
  s.kv.num_blocks = 1 << 20;
  s.memory_limit_bytes = Model::load(s.model_path)->weights().weight_bytes + (64u << 20);
  Engine engine;
  engine.load_model(s);
  const std::vector<std::string> errors = errors_after(engine);
  REQUIRE(errors.size() == 1);
  CHECK_THAT(errors[0], Catch::Contains("the KV pool of 1048576 blocks needs 20480.0 MiB but only 64.0 MiB"));

  engine.submit(story_request(8));
  const std::vector<std::string> later = errors_after(engine);
  REQUIRE(later.size() == 1);
  CHECK_THAT(later[0], Catch::Contains("no model is loaded"));
}

TEST_CASE("a KV budget below one block of every layer is refused naming the block size", "[engine][memory]") {
  EngineSettings s = stories_settings();
  s.kv_budget_bytes = 4096;   // one block: 16 tokens x 5 layers x 2 x 32 floats = 20480 bytes
  Engine engine;
  engine.load_model(s);
  const std::vector<std::string> errors = errors_after(engine);
  REQUIRE(errors.size() == 1);
  CHECK_THAT(errors[0], Catch::Contains("the KV budget of 4096 bytes is smaller than one block (20480 bytes: 16 "
                                        "tokens of K and V in each of 5 layers)"));
}

TEST_CASE("a request that can need more blocks than the whole pool is refused and others go on", "[engine][memory]") {
  EngineSettings s = stories_settings();
  s.kv.num_blocks = 2;   // 32 tokens
  Engine engine;
  engine.load_model(s);
  const RequestId big = engine.submit(story_request(100));
  const RequestId small = engine.submit(story_request(8));
  REQUIRE(engine.wait_idle(60s));
  std::string big_error;
  bool small_finished = false;
  for (const Event& e : engine.poll_events()) {
    if (e.kind == EventKind::Error && e.request == big) big_error = e.text;
    if (e.kind == EventKind::Finished && e.request == small) small_finished = true;
  }
  CHECK_THAT(big_error, Catch::Contains("can need 7 KV blocks but the whole pool has 2"));
  CHECK(small_finished);
}
