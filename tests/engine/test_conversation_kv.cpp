// A conversation's KV on a real model. Branches: a Regenerate or an edited last message forks
// the parked turn at the branch point, so only the tokens after it are prefilled, and what the
// branch generates is what a fresh run of its prompt generates (the shared KV is exact).
// Saving: a parked turn exported as bytes and imported into another engine serves the next
// turn there as if it had never left; an engine of other KV settings refuses it, saying why.
#include <catch2/catch.hpp>

#include <map>

#include "engine/engine.h"

#include "engine/backend/forward_backend.h"
#include "engine/lab/random_model.h"
#include "engine/model/model.h"
#include "engine/runtime/engine_core.h"
#include "engine/system/thread_pool.h"
#include "tests/test_support.h"

using namespace kvdesk;
using kvdesk::test::model_path;

namespace {

constexpr uint64_t kConversation = 5;

struct Chat {
  std::unique_ptr<Model> model;
  std::unique_ptr<KvCache> kv;
  ThreadPool pool{2};
  std::unique_ptr<CpuForward> forward;
  std::unique_ptr<EngineCore> core;
  RequestId next_id = 1;

  Chat(const std::string& path, int32_t num_blocks) : model(Model::load(path)) {
    forward = std::make_unique<CpuForward>(*model, pool);
    KvCacheConfig config;
    config.layout.block_size = 16;
    config.layout.num_blocks = num_blocks;
    kv = std::make_unique<KvCache>(model->config(), config);
    core = std::make_unique<EngineCore>(*model, *forward, *kv, SchedulerLimits{});
  }

  // One turn of the conversation: its generated tokens and its metrics.
  std::pair<std::vector<int32_t>, RequestMetrics> turn(const std::vector<int32_t>& prompt, int32_t max_tokens,
                                                       uint64_t conversation = kConversation) {
    Request r;
    r.max_tokens = max_tokens;
    r.stop_at_eos = false;
    r.conversation_key = conversation;
    const RequestId id = next_id++;
    core->add(id, r, prompt, EngineCore::Clock::now());
    std::vector<int32_t> tokens;
    RequestMetrics metrics;
    while (core->has_work()) {
      std::vector<Event> events;
      core->step(events);
      core->scheduler().check_invariants();
      for (const Event& e : events) {
        if (e.kind == EventKind::Token && e.token >= 0) tokens.push_back(e.token);
        if (e.kind == EventKind::Finished) metrics = e.metrics;
      }
    }
    return {tokens, metrics};
  }

  std::vector<int32_t> words(int32_t seed, int32_t count) const {
    std::vector<int32_t> out;
    const int32_t vocab = model->config().vocab_size;
    for (int32_t i = 0; i < count; ++i) out.push_back(3 + (seed * 7919 + i * 104729) % (vocab - 3));
    return out;
  }
};

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Turns of `user_tokens` each with `answer_tokens` answers until the prompt reaches
// history_tokens; returns the last prompt and its answer.
std::pair<std::vector<int32_t>, std::vector<int32_t>> converse(Chat& chat, int32_t history_tokens, int32_t user_tokens,
                                                               int32_t answer_tokens) {
  std::vector<int32_t> prompt;
  std::vector<int32_t> answer;
  for (int32_t t = 1;; ++t) {
    prompt = concat(prompt, answer);
    prompt = concat(prompt, chat.words(t, user_tokens));
    const auto [tokens, metrics] = chat.turn(prompt, answer_tokens);
    answer = tokens;
    if (int32_t(prompt.size()) + user_tokens + answer_tokens > history_tokens) return {prompt, answer};
  }
}

// stories260K with 64 blocks of KV stored as `kv_type`.
EngineSettings engine_settings_with_kv(KvType kv_type) {
  EngineSettings settings;
  settings.model_path = model_path("stories260K.gguf");
  settings.threads = 2;
  settings.kv.num_blocks = 64;
  settings.kv.k_type = kv_type;
  settings.kv.v_type = kv_type;
  return settings;
}

// Loads the model, runs one turn of conversation 4 and returns its exported KV.
std::optional<ConversationKv> one_parked_turn(Engine& engine, const EngineSettings& settings) {
  using namespace std::chrono_literals;
  engine.load_model(settings);
  Request r;
  r.messages = {{"user", "Once upon a time"}};
  r.max_tokens = 12;
  r.stop_at_eos = false;
  r.conversation_key = 4;
  engine.submit(r);
  REQUIRE(engine.wait_idle(60s));
  std::optional<ConversationKv> saved = engine.export_conversation(4).get();
  REQUIRE(saved.has_value());
  return saved;
}

}  // namespace

TEST_CASE("a Regenerate on a stories260K conversation near its context prefills one token and answers the same", "[engine][scheduler][branches]") {
  Chat chat(model_path("stories260K.gguf"), 96);
  const auto [prompt, answer] = converse(chat, 500, 90, 30);
  INFO("prompt of " << prompt.size() << " tokens");
  REQUIRE(prompt.size() > 400);
  const auto [again, metrics] = chat.turn(prompt, 30);
  CHECK(metrics.prompt_tokens == int32_t(prompt.size()));
  CHECK(metrics.cached_tokens == int32_t(prompt.size()) - 1);
  CHECK(again == answer);   // greedy over the same, exactly shared KV
  CHECK(chat.kv->snapshot().forks == 1);
}

TEST_CASE("an edited last message reuses the KV up to the edit and answers as a fresh run", "[engine][scheduler][branches]") {
  Chat chat(model_path("stories260K.gguf"), 96);
  const auto [prompt, answer] = converse(chat, 300, 80, 20);
  std::vector<int32_t> edited = prompt;
  const size_t edit_at = prompt.size() - 10;
  edited.resize(edit_at);
  edited = concat(edited, chat.words(99, 12));
  const auto [tokens, metrics] = chat.turn(edited, 20);
  CHECK(metrics.cached_tokens == int32_t(edit_at));
  CHECK(chat.kv->snapshot().cow_copies >= 1);
  CHECK(chat.core->scheduler().num_parked() == 2);   // the original branch's turn stays

  Chat fresh(model_path("stories260K.gguf"), 96);
  CHECK(fresh.turn(edited, 20, 0).first == tokens);
}

TEST_CASE("a Regenerate on a 1K-token conversation caches every prompt token but the last", "[engine][scheduler][branches]") {
  test::TempDir dir;
  RandomModelSpec spec;
  spec.layers = 2;
  spec.embd = 64;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.ff = 96;
  spec.context_length = 2048;
  spec.vocab_from = model_path("tokenizer.model");
  spec.mix = *find_weight_mix("f32");
  write_random_model(spec, dir.file("m.gguf"));
  Chat chat(dir.file("m.gguf"), 160);
  const auto [prompt, answer] = converse(chat, 1200, 250, 40);
  INFO("prompt of " << prompt.size() << " tokens");
  REQUIRE(prompt.size() >= 1000);
  const auto [again, metrics] = chat.turn(prompt, 40);
  CHECK(metrics.cached_tokens == int32_t(prompt.size()) - 1);
  CHECK(again == answer);
}

TEST_CASE("a conversation's KV exported from one engine core and imported into another continues exactly", "[engine][scheduler][conversation_kv]") {
  Chat first(model_path("stories260K.gguf"), 96);
  const auto [prompt, answer] = converse(first, 300, 80, 20);
  const std::optional<ConversationKv> saved = first.core->export_conversation(kConversation);
  REQUIRE(saved.has_value());
  CHECK(saved->tokens.size() == prompt.size() + answer.size() - 1);   // the last answer token is not computed yet
  CHECK(saved->blocks.size() == size_t(kv_blocks_for(int64_t(saved->tokens.size()), 16)) * first.kv->bytes_per_block());
  CHECK_FALSE(first.core->export_conversation(kConversation + 1).has_value());

  const std::vector<int32_t> next = concat(concat(prompt, answer), first.words(50, 30));
  Chat second(model_path("stories260K.gguf"), 96);
  REQUIRE(second.core->import_conversation(kConversation, *saved));
  CHECK(second.kv->snapshot().imports == 1);
  const auto [restored, metrics] = second.turn(next, 20);
  CHECK(metrics.cached_tokens == int32_t(saved->tokens.size()));
  CHECK(restored == first.turn(next, 20).first);

  ConversationKv torn = *saved;
  torn.blocks.pop_back();
  CHECK_FALSE(second.core->import_conversation(kConversation, torn));
  second.core->scheduler().check_invariants();
}

TEST_CASE("the engine exports a parked conversation with its identity and refuses it under another block size", "[engine][engine_thread][conversation_kv]") {
  using namespace std::chrono_literals;
  const EngineSettings settings = engine_settings_with_kv(KvType::F32);
  Engine engine;
  const std::optional<ConversationKv> saved = one_parked_turn(engine, settings);
  CHECK(saved->identity.find("block 16; template plain") != std::string::npos);
  CHECK(engine.import_conversation(5, *saved).get().empty());
  REQUIRE(engine.wait_idle(10s));
  CHECK(engine.stats().parked == 2);

  KvLayout bigger = settings.kv;
  bigger.block_size = 32;
  engine.reconfigure_kv(bigger, 0, true, settings.scheduler.host_tier_bytes);
  const std::string why = engine.import_conversation(6, *saved).get();
  INFO(why);
  CHECK(why.find("another block size") != std::string::npos);
  CHECK_FALSE(engine.export_conversation(6).get().has_value());
}

// int8 keys are stored smoothed, scaled and Hadamard-rotated, values rotated
// (engine/model/key_smoothing.h, kernels/hadamard.h), so int8 KV saved by a build that stored
// plain rows (its identity has no scheme part) or unscaled keys would read as wrong keys: it is
// refused, naming the scheme, while its own imports.
TEST_CASE("saved int8 kv names its rows' scheme and kv of other rows is refused", "[engine][engine_thread][conversation_kv]") {
  Engine engine;
  const std::optional<ConversationKv> saved = one_parked_turn(engine, engine_settings_with_kv(KvType::INT8));
  INFO(saved->identity);
  const std::string scheme = "; scheme k=mean+scale+hadamard v=hadamard";
  CHECK(saved->identity.find("; kv int8/int8" + scheme + "; block 16;") != std::string::npos);
  CHECK(engine.import_conversation(5, *saved).get().empty());

  ConversationKv plain = *saved;
  plain.identity.erase(plain.identity.find(scheme), scheme.size());
  ConversationKv unscaled = *saved;
  unscaled.identity.replace(unscaled.identity.find(scheme), scheme.size(), "; scheme k=mean+hadamard v=hadamard");
  uint64_t key = 6;
  for (const ConversationKv& other : {plain, unscaled}) {
    const std::string why = engine.import_conversation(key++, other).get();
    INFO(other.identity << ": " << why);
    CHECK(why.find("another KV row scheme") != std::string::npos);
  }
}

// A head dim of 80 (Phi-2's) as int4 rows is one group of 80 (kernels/kv_quant.h), where rows of
// earlier builds ended in a group of 16: the scheme part says so, and 64 dims (one whole group)
// keep their old identity.
TEST_CASE("saved int4 kv of a head dim past a whole group names its wide last group", "[engine][engine_thread][conversation_kv]") {
  test::TempDir dir;
  for (int32_t head_dim : {80, 64}) {
    RandomModelSpec spec;
    spec.layers = 1;
    spec.embd = 2 * head_dim;
    spec.heads = 2;
    spec.kv_heads = 1;
    spec.ff = 96;
    spec.vocab_from = model_path("tokenizer.model");
    spec.mix = *find_weight_mix("f32");
    const std::string path = dir.file("d" + std::to_string(head_dim) + ".gguf");
    write_random_model(spec, path);
    EngineSettings settings = engine_settings_with_kv(KvType::INT4);
    settings.model_path = path;
    Engine engine;
    const std::optional<ConversationKv> saved = one_parked_turn(engine, settings);
    INFO(saved->identity);
    CHECK((saved->identity.find(" v=hadamard wide last group; block 16;") != std::string::npos) == (head_dim == 80));
    CHECK(engine.import_conversation(5, *saved).get().empty());
  }
}
