// Model load progress and cancellation through the Engine: progress events grow to exactly 1
// before ModelLoaded; a load cancelled while it runs (from the wake callback of its first
// progress event, so the cancel lands inside the load without any timing) ends with a
// Cancelled error and leaves no model, and the engine loads and answers afterwards.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>

#include "engine/engine.h"
#include "engine/lab/random_model.h"
#include "tests/test_support.h"

using namespace kvdesk;
using namespace std::chrono_literals;
using test::model_path;

namespace {

// A random f32 model of about 50 MB: the file is read in several chunks, so the load reports
// several fractions.
std::string write_big_model(const test::TempDir& dir) {
  RandomModelSpec spec;
  spec.layers = 4;
  spec.embd = 512;
  spec.heads = 8;
  spec.kv_heads = 8;
  spec.ff = 1408;
  spec.vocab_from = model_path("tokenizer.model");
  spec.mix = *find_weight_mix("f32");
  const std::string path = dir.file("big.gguf");
  write_random_model(spec, path);
  return path;
}

EngineSettings settings_for(const std::string& path) {
  EngineSettings s;
  s.model_path = path;
  s.threads = 1;
  s.kv.num_blocks = 64;
  return s;
}

std::vector<double> progress_of(const std::vector<Event>& events) {
  std::vector<double> out;
  for (const Event& e : events) {
    if (e.kind == EventKind::LoadProgress) out.push_back(e.progress);
  }
  return out;
}

bool non_decreasing(const std::vector<double>& values) {
  for (size_t i = 1; i < values.size(); ++i) {
    if (values[i] < values[i - 1]) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("a model load reports progress that only grows and reaches 1 before ModelLoaded", "[engine][load_progress]") {
  test::TempDir dir;
  Engine engine;
  engine.load_model(settings_for(write_big_model(dir)));
  REQUIRE(engine.wait_idle(60s));
  const std::vector<Event> events = engine.poll_events();
  const std::vector<double> progress = progress_of(events);
  INFO("progress events: " << progress.size());
  REQUIRE(progress.size() >= 3);
  CHECK(progress.front() == 0.0);
  CHECK(non_decreasing(progress));
  CHECK(progress.back() == 1.0);
  REQUIRE_FALSE(events.empty());
  CHECK(events.back().kind == EventKind::ModelLoaded);
  CHECK(events[events.size() - 2].kind == EventKind::LoadProgress);
  CHECK(engine.stats().model_loaded);
}

TEST_CASE("a load cancelled while it runs ends cleanly with no model, and the engine goes on", "[engine][load_progress]") {
  test::TempDir dir;
  const std::string big = write_big_model(dir);
  std::atomic<bool> cancel_on_wake{false};
  Engine engine([&] {
    if (cancel_on_wake.exchange(false)) engine.cancel_load();
  });
  engine.load_model(settings_for(model_path("stories260K.gguf")));
  REQUIRE(engine.wait_idle(60s));
  engine.poll_events();
  REQUIRE(engine.stats().model_loaded);

  cancel_on_wake = true;   // the first progress event's wake-up cancels the load it belongs to
  engine.load_model(settings_for(big));
  REQUIRE(engine.wait_idle(60s));
  const std::vector<Event> events = engine.poll_events();
  const std::vector<double> progress = progress_of(events);
  REQUIRE_FALSE(progress.empty());
  CHECK(non_decreasing(progress));
  CHECK(progress.back() < 1.0);
  REQUIRE_FALSE(events.empty());
  const Event& last = events.back();
  CHECK(last.kind == EventKind::Error);
  CHECK(last.request == 0);
  CHECK(last.finish == FinishReason::Cancelled);
  CHECK_THAT(last.text, Catch::Contains("cancelled"));
  for (const Event& e : events) CHECK(e.kind != EventKind::ModelLoaded);
  CHECK_FALSE(engine.stats().model_loaded);   // the design: the old model went before the new one was read

  Request r;
  r.prompt_tokens = {1, 403};
  r.max_tokens = 4;
  const RequestId refused = engine.submit(r);
  REQUIRE(engine.wait_idle(10s));
  bool refused_without_model = false;
  for (const Event& e : engine.poll_events()) {
    refused_without_model |= e.request == refused && e.kind == EventKind::Error && e.text == "no model is loaded";
  }
  CHECK(refused_without_model);

  engine.load_model(settings_for(model_path("stories260K.gguf")));
  const RequestId answered = engine.submit(r);
  REQUIRE(engine.wait_idle(60s));
  bool finished = false;
  for (const Event& e : engine.poll_events()) finished |= e.request == answered && e.kind == EventKind::Finished;
  CHECK(finished);
}

TEST_CASE("cancel_load after a load has finished keeps the model", "[engine][load_progress]") {
  Engine engine;
  engine.load_model(settings_for(model_path("stories260K.gguf")));
  REQUIRE(engine.wait_idle(60s));
  engine.cancel_load();
  Request r;
  r.prompt_tokens = {1, 403};
  r.max_tokens = 4;
  const RequestId id = engine.submit(r);
  REQUIRE(engine.wait_idle(60s));
  bool finished = false;
  for (const Event& e : engine.poll_events()) {
    CHECK(e.kind != EventKind::Error);
    finished |= e.request == id && e.kind == EventKind::Finished;
  }
  CHECK(finished);
  CHECK(engine.stats().model_loaded);
}
