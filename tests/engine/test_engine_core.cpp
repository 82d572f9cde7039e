// The engine step on stories260K, stepped by hand: batching, prefix sharing, preemption,
// chunked prefill and context policies never change what a request generates, and the
// scheduler's invariants hold after every step.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <random>

#include "engine/backend/forward_backend.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/model/model.h"
#include "engine/runtime/engine_core.h"
#include "engine/system/thread_pool.h"
#include "tests/test_support.h"

using namespace kvdesk;
using kvdesk::test::model_path;

namespace {

struct Bench {
  std::unique_ptr<Model> model = Model::load(model_path("stories260K.gguf"));
  std::unique_ptr<KvCache> kv;
  ThreadPool pool{2};
  CpuForward forward{*model, pool};
  std::unique_ptr<EngineCore> core;
  std::map<RequestId, std::vector<int32_t>> tokens;
  std::map<RequestId, Event> finished;
  std::vector<std::vector<RequestId>> steps;   // requests that got a token, per step

  explicit Bench(int32_t num_blocks, SchedulerLimits limits = {}, int32_t block_size = 16) {
    KvCacheConfig config;
    config.layout.block_size = block_size;
    config.layout.num_blocks = num_blocks;
    kv = std::make_unique<KvCache>(model->config(), config);
    core = std::make_unique<EngineCore>(*model, forward, *kv, limits);
  }

  std::vector<int32_t> encode(const std::string& text) const { return model->tokenizer().encode(text, true); }

  void add(RequestId id, std::vector<int32_t> prompt, int32_t max_tokens, Request r = {}) {
    r.max_tokens = max_tokens;
    r.stop_at_eos = false;
    core->add(id, r, std::move(prompt), EngineCore::Clock::now());
  }

  void step() {
    std::vector<Event> events;
    core->step(events);
    std::vector<RequestId> got;
    for (const Event& e : events) {
      if (e.kind == EventKind::Token && e.token >= 0) {
        tokens[e.request].push_back(e.token);
        got.push_back(e.request);
      }
      if (e.kind == EventKind::Finished) finished[e.request] = e;
    }
    steps.push_back(got);
    core->scheduler().check_invariants();
  }

  void run(int max_steps = 10000) {
    for (int i = 0; i < max_steps && core->has_work(); ++i) step();
    REQUIRE_FALSE(core->has_work());
  }
};

const std::vector<std::string> kPrompts = {
    "Once upon a time", "The little dog", "Lily and Tom went to the park to play with a ball",
    "One day", "There was a big red truck that", "Mom said",
};

std::vector<int32_t> alone(const std::string& prompt, int32_t max_tokens) {
  Bench b(64);
  b.add(1, b.encode(prompt), max_tokens);
  b.run();
  return b.tokens[1];
}

}  // namespace

TEST_CASE("concurrent greedy requests with staggered arrivals generate what each generates alone", "[engine][scheduler]") {
  std::vector<std::vector<int32_t>> expected;
  for (size_t i = 0; i < kPrompts.size(); ++i) expected.push_back(alone(kPrompts[i], 20 + int32_t(i) * 7));
  Bench b(256);
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    b.add(RequestId(i + 1), b.encode(kPrompts[i]), 20 + int32_t(i) * 7);
    b.step();
    b.step();
  }
  b.run();
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    INFO("prompt " << kPrompts[i]);
    CHECK(b.tokens[RequestId(i + 1)] == expected[i]);
  }
  CHECK(b.kv->num_available_blocks() == b.kv->num_blocks());
}

TEST_CASE("eight conversations with one 64-token system prompt store its blocks once", "[engine][scheduler]") {
  Bench b(256);
  std::vector<int32_t> system = b.encode("Lily and Tom were best friends. They liked to play in the park every day.");
  while (system.size() < 64) system.push_back(system[system.size() % 16 + 1]);
  system.resize(64);
  for (int i = 0; i < 8; ++i) {
    std::vector<int32_t> prompt = system;
    const std::vector<int32_t> user = b.encode(kPrompts[size_t(i) % kPrompts.size()]);
    prompt.insert(prompt.end(), user.begin() + 1, user.end());
    b.add(RequestId(i + 1), prompt, 8);
  }
  b.step();
  b.step();
  const KvSnapshot snap = b.kv->snapshot();
  // The 4 system-prompt blocks are held by all 8 sequences; nothing else is shared.
  int held_by_eight = 0;
  for (const KvBlockInfo& block : snap.blocks) held_by_eight += block.ref_count == 8;
  CHECK(held_by_eight == 4);
  CHECK(snap.blocks_shared == 4);
  b.run();
}

TEST_CASE("a pool too small for all requests still completes each one identically in recompute and swap mode", "[engine][scheduler]") {
  const PreemptMode mode = GENERATE(PreemptMode::Recompute, PreemptMode::Swap);
  std::vector<std::vector<int32_t>> expected;
  for (size_t i = 0; i < 4; ++i) expected.push_back(alone(kPrompts[i], 60));
  SchedulerLimits limits;
  limits.preempt_mode = mode;
  Bench b(10, limits);   // 160 token slots; four requests want about 4 x 70
  for (size_t i = 0; i < 4; ++i) b.add(RequestId(i + 1), b.encode(kPrompts[i]), 60);
  b.run();
  CHECK(b.core->scheduler().preemptions() > 0);
  if (mode == PreemptMode::Swap) CHECK(b.core->scheduler().swapped_bytes() > 0);
  for (size_t i = 0; i < 4; ++i) CHECK(b.tokens[RequestId(i + 1)] == expected[i]);
  CHECK(b.kv->num_available_blocks() == b.kv->num_blocks());
}

TEST_CASE("a request that can never fit in the pool is refused at submission", "[engine][scheduler]") {
  Bench b(4);
  CHECK_THROWS_WITH(b.add(1, b.encode("Once upon a time"), 100), Catch::Contains("KV blocks"));
}

TEST_CASE("cancel returns every block and fork survives the cancel of either branch", "[engine][scheduler]") {
  const bool cancel_source = GENERATE(true, false);
  Bench b(64);
  const std::vector<int32_t> expected = alone("Once upon a time", 40);
  b.add(1, b.encode("Once upon a time"), 40);
  for (int i = 0; i < 10; ++i) b.step();
  SamplingParams greedy;
  REQUIRE(b.core->fork(1, 2, greedy, 30));
  std::vector<Event> events;
  REQUIRE(b.core->cancel(cancel_source ? 1 : 2, events));
  b.run();
  const RequestId survivor = cancel_source ? 2 : 1;
  std::vector<int32_t> survivor_tokens = b.tokens[survivor];
  if (cancel_source) {
    // The fork continues from the source's 10 tokens with the same greedy choices.
    survivor_tokens.insert(survivor_tokens.begin(), b.tokens[1].begin(), b.tokens[1].end());
  }
  CHECK(std::vector<int32_t>(expected.begin(), expected.begin() + int(survivor_tokens.size())) == survivor_tokens);
  CHECK(b.kv->num_available_blocks() == b.kv->num_blocks());
}

TEST_CASE("while a long prompt is prefilled in chunks a running sequence gets a token every step", "[engine][scheduler]") {
  SchedulerLimits limits;
  limits.step_token_budget = 32;
  Bench b(128, limits);
  b.add(1, b.encode("Once upon a time"), 60);
  for (int i = 0; i < 3; ++i) b.step();
  std::vector<int32_t> long_prompt = b.encode("Lily and Tom went to the park to play with a ball.");
  while (long_prompt.size() < 300) long_prompt.push_back(long_prompt[long_prompt.size() % 12 + 1]);
  b.add(2, long_prompt, 5);
  const size_t first = b.steps.size();
  for (int i = 0; i < 9; ++i) b.step();
  for (size_t s = first; s < b.steps.size(); ++s) {
    INFO("step " << s);
    CHECK(std::count(b.steps[s].begin(), b.steps[s].end(), RequestId(1)) == 1);
  }
  CHECK(b.tokens[2].empty());   // 300 tokens at 31 a step take 10 steps
  b.run();
  CHECK(b.tokens[1] == alone("Once upon a time", 60));
}

TEST_CASE("at the context limit the stop policy ends with context full", "[engine][scheduler]") {
  Bench b(64);
  std::vector<int32_t> prompt = b.encode("Once upon a time");
  while (prompt.size() < 500) prompt.push_back(prompt[prompt.size() % 4 + 1]);
  b.add(1, prompt, 100);
  b.run();
  CHECK(b.finished[1].finish == FinishReason::ContextFull);
  CHECK(b.tokens[1].size() == 512 - 500 + 1);
}

TEST_CASE("at the context limit the sink-window policy keeps generating", "[engine][scheduler]") {
  Bench b(64);
  std::vector<int32_t> prompt = b.encode("Once upon a time");
  while (prompt.size() < 500) prompt.push_back(prompt[prompt.size() % 4 + 1]);
  Request r;
  r.context_policy = ContextPolicy::SinkWindow;
  r.sink_tokens = 4;
  b.add(1, prompt, 100, r);
  b.run();
  CHECK(b.finished[1].finish == FinishReason::Length);
  CHECK(b.tokens[1].size() == 100);
}

TEST_CASE("a request's own context limit acts as the model's context would", "[engine][scheduler]") {
  Bench b(64);
  const std::vector<int32_t> prompt = b.encode("Once upon a time");
  Request stop;
  stop.context_limit = 24;
  Request slide = stop;
  slide.context_policy = ContextPolicy::SinkWindow;
  Request above_model;
  above_model.context_limit = 4096;
  std::vector<int32_t> near_model_context = prompt;
  while (near_model_context.size() < 500) near_model_context.push_back(prompt[near_model_context.size() % 4 + 1]);
  b.add(1, prompt, 100, stop);
  b.add(2, prompt, 100, slide);
  b.add(3, near_model_context, 100, above_model);
  b.run();
  CHECK(b.finished[1].finish == FinishReason::ContextFull);
  CHECK(prompt.size() + b.tokens[1].size() == 24 + 1);
  CHECK(b.finished[2].finish == FinishReason::Length);
  CHECK(b.tokens[2].size() == 100);
  CHECK(b.finished[3].finish == FinishReason::ContextFull);
  CHECK(b.tokens[3].size() == 512 - 500 + 1);

  std::vector<int32_t> too_long = prompt;
  while (too_long.size() < 24) too_long.push_back(prompt[1]);
  CHECK_THROWS_WITH(b.add(4, too_long, 10, stop),
                    Catch::Contains("the prompt has 24 tokens; the request's context limit is 24"));
  Request negative;
  negative.context_limit = -1;
  CHECK_THROWS_WITH(b.add(5, prompt, 10, negative), Catch::Contains("context_limit must be 0"));
}

TEST_CASE("a conversation's next turn appends only its new tokens", "[engine][scheduler]") {
  Bench b(64);
  Request r;
  r.conversation_key = 7;
  const std::vector<int32_t> first = b.encode("Once upon a time");
  b.add(1, first, 20, r);
  b.run();
  std::vector<int32_t> second = first;
  second.insert(second.end(), b.tokens[1].begin(), b.tokens[1].end() - 1);   // what was computed
  const std::vector<int32_t> more = b.encode("The end");
  second.insert(second.end(), more.begin() + 1, more.end());
  b.add(2, second, 10, r);
  b.run();
  CHECK(b.finished[2].metrics.cached_tokens == int32_t(first.size() + b.tokens[1].size() - 1));
  CHECK(b.finished[2].metrics.prompt_tokens - b.finished[2].metrics.cached_tokens == int32_t(more.size() - 1));
}

TEST_CASE("a request with KV retention runs beside others without changing their output", "[engine][scheduler][retention]") {
  const RetentionPolicy policy = GENERATE(RetentionPolicy::Sinks, RetentionPolicy::H2O, RetentionPolicy::SnapKV);
  Bench b(64);
  Request retained;
  retained.retention.policy = policy;
  retained.retention.budget.tokens = 8;
  retained.conversation_key = 3;
  b.add(1, b.encode(kPrompts[2]), 40, retained);
  b.add(2, b.encode(kPrompts[0]), 40);
  int32_t most_rows = 0;
  for (int i = 0; i < 10000 && b.core->has_work(); ++i) {
    b.step();
    for (const KvSequenceInfo& s : b.kv->snapshot().sequences) {
      if (s.retained) most_rows = std::max(most_rows, s.num_tokens);
    }
  }
  CHECK(b.tokens[2] == alone(kPrompts[0], 40));
  CHECK(b.tokens[1].size() == 40);
  // sinks and h2o hold the budget after every step; snapkv compresses the prompt once and then appends.
  CHECK(most_rows <= (policy == RetentionPolicy::SnapKV ? 8 + 40 : 8));
  const KvSnapshot snap = b.kv->snapshot();   // the parked conversation
  CHECK(snap.retention_compactions > 0);
  CHECK(snap.retention_tokens_kept < snap.retention_tokens_seen);
  // The conversation's next turn continues on its compacted sequence.
  std::vector<int32_t> next = b.encode(kPrompts[2]);
  next.insert(next.end(), b.tokens[1].begin(), b.tokens[1].end() - 1);
  const std::vector<int32_t> more = b.encode("The end");
  next.insert(next.end(), more.begin() + 1, more.end());
  b.add(3, next, 8, retained);
  b.run();
  CHECK(b.tokens[3].size() == 8);
  CHECK(b.finished[3].metrics.cached_tokens == int32_t(next.size() - more.size() + 1));
}

TEST_CASE("random arrivals in pools from one context up finish every request as alone, each step progressing", "[engine][scheduler]") {
  const PreemptMode mode = GENERATE(PreemptMode::Recompute, PreemptMode::Swap);
  const uint64_t seed = GENERATE(1u, 2u, 3u);
  std::mt19937_64 rng(seed);
  struct Job {
    RequestId id;
    std::string prompt;
    int32_t max_tokens;
    int32_t arrival_step;
  };
  std::vector<Job> jobs;
  for (RequestId id = 1; id <= 6; ++id) {
    jobs.push_back({id, kPrompts[rng() % kPrompts.size()], int32_t(10 + rng() % 50), int32_t(rng() % 12)});
  }
  std::map<RequestId, std::vector<int32_t>> expected;
  int32_t one_context = 0;
  for (const Job& j : jobs) {
    expected[j.id] = alone(j.prompt, j.max_tokens);
    Bench probe(1);
    one_context = std::max(one_context, kv_blocks_for(int64_t(probe.encode(j.prompt).size()) + j.max_tokens, 16));
  }
  for (int32_t blocks : {one_context, one_context + 1, 2 * one_context, 8 * one_context}) {
    INFO("pool of " << blocks << " blocks, " << preempt_mode_name(mode) << ", seed " << seed);
    SchedulerLimits limits;
    limits.preempt_mode = mode;
    limits.step_token_budget = 24;
    Bench b(blocks, limits);
    int32_t step = 0;
    size_t next = 0;
    std::vector<Job> by_arrival = jobs;
    std::sort(by_arrival.begin(), by_arrival.end(), [](const Job& x, const Job& y) { return x.arrival_step < y.arrival_step; });
    while (next < by_arrival.size() || b.core->has_work()) {
      while (next < by_arrival.size() && by_arrival[next].arrival_step <= step) {
        b.add(by_arrival[next].id, b.encode(by_arrival[next].prompt), by_arrival[next].max_tokens);
        ++next;
      }
      if (b.core->has_work()) {
        std::vector<Event> events;
        REQUIRE(b.core->step(events) > 0);
        for (const Event& e : events) {
          if (e.kind == EventKind::Token && e.token >= 0) b.tokens[e.request].push_back(e.token);
          if (e.kind == EventKind::Finished) b.finished[e.request] = e;
        }
        b.core->scheduler().check_invariants();
      }
      REQUIRE(++step < 20000);
    }
    for (const Job& j : jobs) {
      INFO("request " << j.id);
      CHECK(b.finished[j.id].finish == FinishReason::Length);
      CHECK(b.tokens[j.id] == expected[j.id]);
    }
    CHECK(b.kv->num_available_blocks() == b.kv->num_blocks());
  }
}

TEST_CASE("a request scoring its prompt gets every position's logits and no token", "[engine][scheduler]") {
  SchedulerLimits limits;
  limits.step_token_budget = 7;
  Bench b(64, limits);
  const std::vector<int32_t> prompt = b.encode("Once upon a time there was a little girl");
  Request r;
  r.logits = LogitsOutput::Prompt;
  r.max_tokens = 0;
  b.core->add(1, r, prompt, EngineCore::Clock::now());
  std::vector<float> logits;
  int32_t next_position = 0;
  while (b.core->has_work()) {
    std::vector<Event> events;
    b.core->step(events);
    for (const Event& e : events) {
      CHECK(e.kind != EventKind::Token);
      if (e.kind != EventKind::Logits) continue;
      CHECK(e.position == next_position);
      next_position += int32_t(e.logits.size()) / b.model->config().vocab_size;
      logits.insert(logits.end(), e.logits.begin(), e.logits.end());
    }
  }
  REQUIRE(next_position == int32_t(prompt.size()));
  // The last position's row is the greedy first token of the same prompt run alone.
  const int32_t vocab = b.model->config().vocab_size;
  const float* last = logits.data() + size_t(prompt.size() - 1) * size_t(vocab);
  const int32_t argmax = int32_t(std::max_element(last, last + vocab) - last);
  CHECK(argmax == alone("Once upon a time there was a little girl", 1)[0]);
}

TEST_CASE("NaN logits end the request with an error instead of sampled tokens", "[engine][scheduler]") {
  // stories260K with its final norm's weights overwritten by NaN (bytes 0xFF), found in the file
  // by their bytes.
  std::ifstream in(model_path("stories260K.gguf"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  {
    const auto file = GgufFile::open(model_path("stories260K.gguf"));
    const GgufTensorInfo* norm = file->find_tensor("output_norm.weight");
    REQUIRE(norm != nullptr);
    const char* data = reinterpret_cast<const char*>(file->tensor_data(*norm));
    const auto at = std::search(bytes.begin(), bytes.end(), data, data + norm->num_bytes);
    REQUIRE(at != bytes.end());
    std::fill_n(at, norm->num_bytes, char(0xFF));
  }
  test::TempDir dir;
  const std::string path = dir.file("nan.gguf");
  std::ofstream(path, std::ios::binary) << bytes;
  const std::unique_ptr<Model> model = Model::load(path);
  KvCacheConfig config;
  config.layout.num_blocks = 16;
  KvCache kv(model->config(), config);
  ThreadPool pool{2};
  CpuForward forward{*model, pool};
  EngineCore core(*model, forward, kv, {});
  Request r;
  r.max_tokens = 8;
  core.add(1, r, model->tokenizer().encode("Once upon a time", true), EngineCore::Clock::now());
  std::vector<Event> events;
  for (int i = 0; i < 100 && core.has_work(); ++i) core.step(events);
  CHECK_FALSE(core.has_work());
  CHECK(std::none_of(events.begin(), events.end(), [](const Event& e) { return e.kind == EventKind::Token; }));
  REQUIRE(std::count_if(events.begin(), events.end(), [](const Event& e) { return e.kind == EventKind::Error; }) == 1);
  CHECK_THAT(events.back().text, Catch::Contains("NaN logits"));
  CHECK(kv.num_available_blocks() == 16);
}
