// KV quality on stories260K: f32 KV against itself is exact, f16 is almost, int4 costs more than
// int8; the engine measures every type in the background, one event each, without touching
// a chat running beside it, and abandons the measurement when the model is replaced.
#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <thread>

#include "engine/backend/forward_backend.h"
#include "engine/engine.h"
#include "engine/model/model.h"
#include "engine/quality/kv_quality.h"
#include "engine/system/thread_pool.h"
#include "tests/test_support.h"

using namespace kvdesk;
using kvdesk::test::model_path;
using kvdesk::test::reference;
using namespace std::chrono_literals;

namespace {

constexpr int kThreads = 2;

EngineSettings stories_settings(const char* file = "stories260K.gguf") {
  EngineSettings s;
  s.model_path = model_path(file);
  s.threads = kThreads;
  s.kv.k_type = KvType::F32;
  s.kv.v_type = KvType::F32;
  s.kv.num_blocks = 128;
  return s;
}

// Every type measured on the test's thread, as kvdesk-cli info does.
std::map<KvType, KvQuality> measured_here() {
  const std::unique_ptr<Model> model = Model::load(model_path("stories260K.gguf"));
  ThreadPool pool(kThreads);
  CpuForward forward(*model, pool);
  std::map<KvType, KvQuality> by_type;
  for (const KvQuality& q : measure_kv_quality(*model, forward, all_kv_types())) by_type[q.type] = q;
  return by_type;
}

const std::map<KvType, KvQuality>& reference_quality() {
  static const std::map<KvType, KvQuality> quality = measured_here();
  return quality;
}

// Polls the engine until `done` holds or 60 s pass, keeping every event.
template <class Done>
std::vector<Event> collect(Engine& engine, Done done) {
  std::vector<Event> events;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < deadline) {
    for (Event& e : engine.poll_events()) events.push_back(std::move(e));
    if (done(events)) break;
    std::this_thread::sleep_for(2ms);
  }
  return events;
}

std::vector<KvQuality> quality_events(const std::vector<Event>& events) {
  std::vector<KvQuality> out;
  for (const Event& e : events) {
    if (e.kind == EventKind::KvQuality) {
      INFO(e.text);
      CHECK(e.text.empty());
      out.push_back(e.kv_quality);
    }
  }
  return out;
}

// q's figures are the ones measured alone (the same steps, so the same floating-point sums).
void check_matches_reference(const KvQuality& q) {
  CHECK(q.kl == Approx(reference_quality().at(q.type).kl).margin(1e-12).epsilon(1e-6));
  CHECK(q.top1 == reference_quality().at(q.type).top1);
}

}  // namespace

TEST_CASE("f32 kv measured against itself is exact and f16 is almost", "[engine][kv_quality]") {
  const std::map<KvType, KvQuality>& q = reference_quality();
  REQUIRE(q.size() == all_kv_types().size());
  for (const auto& [type, quality] : q) {
    INFO(kv_type_name(type) << ": KL " << quality.kl << ", top-1 " << quality.top1);
    CHECK(quality.tokens == kKvQualityTokens - 1);   // BOS and 127 tokens of the text
    CHECK(quality.text_id == kv_quality_text_id(8));   // stories260K's head dim
    CHECK(quality.kl >= 0);
    CHECK(quality.top1 <= 100);
  }
  CHECK(q.at(KvType::F32).kl == 0);
  CHECK(q.at(KvType::F32).top1 == 100);
  CHECK(q.at(KvType::F16).kl < 1e-5);
  CHECK(q.at(KvType::F16).top1 == 100);
}

TEST_CASE("fewer bits cost the model more: int4 kv diverges more than int8 and fp8_e5m2 more than fp8_e4m3", "[engine][kv_quality]") {
  const std::map<KvType, KvQuality>& q = reference_quality();
  INFO("int8 " << q.at(KvType::INT8).kl << ", int4 " << q.at(KvType::INT4).kl << ", fp8_e4m3 "
               << q.at(KvType::FP8_E4M3).kl << ", fp8_e5m2 " << q.at(KvType::FP8_E5M2).kl);
  CHECK(q.at(KvType::INT8).kl > 0);
  CHECK(q.at(KvType::INT4).kl > 10 * q.at(KvType::INT8).kl);
  CHECK(q.at(KvType::FP8_E5M2).kl > q.at(KvType::FP8_E4M3).kl);
  CHECK(q.at(KvType::INT4).top1 < 100);
}

TEST_CASE("the engine measures every kv type in the background, one event each, in order", "[engine][kv_quality][engine_thread]") {
  Engine engine;
  engine.load_model(stories_settings());
  REQUIRE(engine.wait_idle(60s));
  const std::string identity = engine.stats().model.identity;
  CHECK(identity.size() == 16);
  engine.measure_kv_quality({all_kv_types().begin(), all_kv_types().end()});
  const std::vector<KvQuality> measured = quality_events(
      collect(engine, [](const std::vector<Event>& events) { return quality_events(events).size() >= all_kv_types().size(); }));
  REQUIRE(measured.size() == all_kv_types().size());
  for (size_t i = 0; i < measured.size(); ++i) {
    const KvQuality& q = measured[i];
    INFO(kv_type_name(q.type));
    CHECK(q.type == all_kv_types()[i]);
    CHECK(q.model_identity == identity);
    check_matches_reference(q);
  }
}

TEST_CASE("a chat beside a kv quality measurement keeps its greedy tokens and the measurement its figures", "[engine][kv_quality][engine_thread]") {
  Engine engine;
  engine.load_model(stories_settings());
  REQUIRE(engine.wait_idle(60s));
  engine.measure_kv_quality({all_kv_types().begin(), all_kv_types().end()});
  Request r;
  r.prompt_tokens = reference()["prompt_ids"].get<std::vector<int32_t>>();
  r.max_tokens = 64;
  r.stop_at_eos = false;
  // Two chats: one posted with the measurement, one once it has begun reporting.
  const RequestId first = engine.submit(r);
  std::vector<Event> events = collect(engine, [](const std::vector<Event>& e) { return !quality_events(e).empty(); });
  const RequestId second = engine.submit(r);
  const auto finished = [&](const std::vector<Event>& e) {
    int done = 0;
    for (const Event& x : e) done += x.kind == EventKind::Finished;
    return done == 2 && quality_events(e).size() >= all_kv_types().size();
  };
  for (Event& e : collect(engine, [&](const std::vector<Event>& more) {
         std::vector<Event> all = events;
         all.insert(all.end(), more.begin(), more.end());
         return finished(all);
       })) {
    events.push_back(std::move(e));
  }
  std::map<RequestId, std::vector<int32_t>> tokens;
  for (const Event& e : events) {
    CHECK(e.kind != EventKind::Error);
    if (e.kind == EventKind::Token && e.token >= 0) tokens[e.request].push_back(e.token);
  }
  const std::vector<int32_t> expected = reference()["generated_ids"].get<std::vector<int32_t>>();
  CHECK(tokens[first] == expected);
  CHECK(tokens[second] == expected);
  const std::vector<KvQuality> measured = quality_events(events);
  REQUIRE(measured.size() == all_kv_types().size());
  for (const KvQuality& q : measured) {
    INFO(kv_type_name(q.type));
    check_matches_reference(q);
  }
}

TEST_CASE("replacing the model abandons its kv quality measurement", "[engine][kv_quality][engine_thread]") {
  Engine engine;
  engine.load_model(stories_settings());
  REQUIRE(engine.wait_idle(60s));
  const std::string first_identity = engine.stats().model.identity;
  engine.measure_kv_quality({all_kv_types().begin(), all_kv_types().end()});
  engine.load_model(stories_settings("stories260K-Q8_0.gguf"));
  const auto loaded_twice = [](const std::vector<Event>& events) {
    int loaded = 0;
    for (const Event& e : events) loaded += e.kind == EventKind::ModelLoaded;
    return loaded == 2;
  };
  std::vector<Event> events = collect(engine, loaded_twice);
  REQUIRE(loaded_twice(events));
  REQUIRE(engine.wait_idle(60s));
  std::this_thread::sleep_for(100ms);
  for (Event& e : engine.poll_events()) events.push_back(std::move(e));
  CHECK(engine.stats().model.identity != first_identity);
  // Whatever the first model finished before the load is its own; nothing comes after the load.
  int loads = 0;
  for (const Event& e : events) {
    loads += e.kind == EventKind::ModelLoaded;
    if (e.kind != EventKind::KvQuality) continue;
    CHECK(e.kv_quality.model_identity == first_identity);
    CHECK(loads == 1);
  }
}

TEST_CASE("kv quality asked of an engine without a model reports nothing and fails nothing", "[engine][kv_quality][engine_thread]") {
  Engine engine;
  engine.measure_kv_quality({KvType::INT8});
  REQUIRE(engine.wait_idle(10s));
  std::this_thread::sleep_for(50ms);
  CHECK(engine.poll_events().empty());
}
