// The host tier on stories260K: multi-turn conversations arriving at random steps, in pools
// from one context up to large ones, with both preemption modes and the host tier off, small
// and large. Every turn finishes with the greedy tokens the conversation gets alone in a large
// pool, no step makes zero progress while work exists, and the scheduler's invariants (the
// tier's with them) hold after every step.
#include <catch2/catch.hpp>

#include <map>
#include <random>

#include "engine/backend/forward_backend.h"
#include "engine/model/model.h"
#include "engine/runtime/engine_core.h"
#include "engine/system/thread_pool.h"
#include "tests/test_support.h"

using namespace kvdesk;
using kvdesk::test::model_path;

namespace {

const std::vector<std::string> kTexts = {
    "Once upon a time", "The little dog ran to the tree", "Lily and Tom went to the park to play with a ball",
    "One day", "There was a big red truck that", "Mom said no", "The cat was happy",
};

// A conversation's script: its turns' user texts and answer lengths, when its first turn
// arrives, and how many steps after each answer the next turn does.
struct Script {
  uint64_t key = 0;
  std::vector<std::string> texts;
  std::vector<int32_t> max_tokens;
  int32_t arrival = 0;
  std::vector<int32_t> gaps;
};

std::vector<Script> make_scripts(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Script> scripts;
  for (uint64_t key = 1; key <= 5; ++key) {
    Script s;
    s.key = key;
    s.arrival = int32_t(rng() % 10);
    const int turns = int(2 + rng() % 2);
    for (int t = 0; t < turns; ++t) {
      s.texts.push_back(kTexts[rng() % kTexts.size()]);
      s.max_tokens.push_back(int32_t(4 + rng() % 24));
      s.gaps.push_back(int32_t(rng() % 6));
    }
    scripts.push_back(std::move(s));
  }
  return scripts;
}

struct Rig {
  std::unique_ptr<Model> model;
  ThreadPool pool{2};
  std::unique_ptr<CpuForward> forward;
  std::unique_ptr<KvCache> kv;
  std::unique_ptr<EngineCore> core;

  // tier_blocks: the host tier's budget in blocks; -1 for the default budget.
  Rig(int32_t num_blocks, SchedulerLimits limits, int32_t tier_blocks, KvType kv_type = KvType::F32) {
    model = Model::load(model_path("stories260K.gguf"));
    forward = std::make_unique<CpuForward>(*model, pool);
    KvCacheConfig config;
    config.layout.k_type = kv_type;
    config.layout.v_type = kv_type;
    config.layout.block_size = 16;
    config.layout.num_blocks = num_blocks;
    kv = std::make_unique<KvCache>(model->config(), config);
    if (tier_blocks >= 0) limits.host_tier_bytes = size_t(tier_blocks) * kv->bytes_per_block();
    core = std::make_unique<EngineCore>(*model, *forward, *kv, limits);
  }

  std::vector<int32_t> encode(const std::string& text, bool first) const {
    std::vector<int32_t> t = model->tokenizer().encode(text, true);
    if (!first) t.erase(t.begin());   // BOS only at the conversation's start
    return t;
  }
};

// What one run produced: each conversation's answers in turn order, and the tier's use.
struct Outcome {
  std::map<uint64_t, std::vector<std::vector<int32_t>>> answers;
  std::map<uint64_t, std::vector<RequestMetrics>> metrics;
  HostTierStats tier;
  HostTierStats last_held;   // the tier after the last step it held something
};

// Runs the scripts: a turn's prompt is the conversation so far (every earlier prompt and
// answer) plus its text; the next turn arrives gaps[t] steps after the answer finished.
Outcome run_scripts(Rig& rig, const std::vector<Script>& scripts) {
  struct Pending {
    size_t turn = 0;
    int32_t due = 0;
    bool in_flight = false;
    std::vector<int32_t> history;
  };
  std::map<uint64_t, Pending> state;
  std::map<uint64_t, const Script*> by_key;
  for (const Script& s : scripts) {
    state[s.key].due = s.arrival;
    by_key[s.key] = &s;
  }
  std::map<RequestId, uint64_t> owner;
  std::map<RequestId, std::vector<int32_t>> generated;
  Outcome out;
  RequestId next_id = 1;
  for (int32_t step = 0;; ++step) {
    bool pending = false;
    for (const Script& s : scripts) {
      Pending& p = state[s.key];
      if (p.turn >= s.texts.size()) continue;
      pending = true;
      if (p.in_flight || p.due > step) continue;
      const std::vector<int32_t> text = rig.encode(s.texts[p.turn], p.turn == 0);
      p.history.insert(p.history.end(), text.begin(), text.end());
      Request r;
      r.max_tokens = s.max_tokens[p.turn];
      r.stop_at_eos = false;
      r.conversation_key = s.key;
      owner[next_id] = s.key;
      rig.core->add(next_id++, r, p.history, EngineCore::Clock::now());
      p.in_flight = true;
    }
    if (!pending && !rig.core->has_work()) break;
    if (!rig.core->has_work()) continue;
    std::vector<Event> events;
    REQUIRE(rig.core->step(events) > 0);
    rig.core->scheduler().check_invariants();
    if (rig.core->scheduler().host_tier().stats().entries > 0) out.last_held = rig.core->scheduler().host_tier().stats();
    for (const Event& e : events) {
      if (e.kind == EventKind::Token && e.token >= 0) generated[e.request].push_back(e.token);
      if (e.kind != EventKind::Finished) continue;
      REQUIRE(e.finish == FinishReason::Length);
      const uint64_t key = owner.at(e.request);
      const Script& s = *by_key.at(key);
      Pending& p = state[key];
      const std::vector<int32_t>& answer = generated[e.request];
      p.history.insert(p.history.end(), answer.begin(), answer.end());
      out.answers[key].push_back(answer);
      out.metrics[key].push_back(e.metrics);
      p.in_flight = false;
      p.due = step + 1 + s.gaps[p.turn];
      ++p.turn;
    }
    REQUIRE(step < 20000);
  }
  out.tier = rig.core->scheduler().host_tier().stats();
  return out;
}

// Blocks the longest conversation's last turn can take: prompt + answer.
int32_t one_context(const Rig& rig, const std::vector<Script>& scripts) {
  int32_t most = 0;
  for (const Script& s : scripts) {
    int64_t tokens = 0;
    for (size_t t = 0; t < s.texts.size(); ++t) tokens += int64_t(rig.encode(s.texts[t], t == 0).size()) + s.max_tokens[t];
    most = std::max(most, kv_blocks_for(tokens, 16));
  }
  return most;
}

}  // namespace

TEST_CASE("a conversation back from the host tier computes only its new tokens and answers as from the pool", "[engine][scheduler][host_tier]") {
  // Between conversation 1's turns conversation 2 takes the whole pool of 4 blocks: the
  // parked turn goes to the tier, kept as stored or zstd-compressed.
  const KvType type = GENERATE(KvType::F32, KvType::F16);
  const int32_t zstd = GENERATE(0, 3);
  const std::vector<Script> scripts = {{1, {kTexts[0], kTexts[1]}, {20, 10}, 0, {80, 0}},
                                       {2, {kTexts[2]}, {40}, 30, {0}}};
  Rig large(64, {}, -1, type);
  const Outcome expected = run_scripts(large, scripts);
  CHECK(expected.tier.swap_outs == 0);
  SchedulerLimits limits;
  limits.host_tier_zstd_level = zstd;
  Rig small(4, limits, -1, type);
  const Outcome got = run_scripts(small, scripts);
  INFO(kv_type_name(type) << " KV, zstd " << zstd << ": " << got.last_held.stored_bytes << " bytes held as "
                          << got.last_held.held_bytes);
  CHECK((got.last_held.held_bytes < got.last_held.stored_bytes) == (zstd > 0));
  CHECK(got.answers == expected.answers);
  const RequestMetrics& second = got.metrics.at(1).at(1);
  const int32_t history = int32_t(small.encode(kTexts[0], true).size()) + 20 - 1;   // the last answer token was never computed
  CHECK(got.tier.hits == 1);
  CHECK(second.host_tier_tokens == history);
  CHECK(second.cached_tokens == history);
  CHECK(expected.metrics.at(1).at(1).cached_tokens == history);
}

TEST_CASE("random multi-turn conversations in pools from one context up finish as alone, with the host tier on, small and off, in both preemption modes", "[engine][scheduler][host_tier]") {
  const PreemptMode mode = GENERATE(PreemptMode::Recompute, PreemptMode::Swap);
  const int32_t tier_blocks = GENERATE(0, 3, -1);   // -1: the default budget
  const uint64_t seed = GENERATE(1u, 2u, 3u, 4u);
  const std::vector<Script> scripts = make_scripts(seed);
  std::map<uint64_t, std::vector<std::vector<int32_t>>> expected;
  Rig probe(1, {}, -1);
  const int32_t one = one_context(probe, scripts);
  for (const Script& s : scripts) {
    Rig alone(8 * one, {}, -1);
    expected[s.key] = run_scripts(alone, {s}).answers.at(s.key);
  }
  uint64_t hits = 0;
  for (int32_t blocks : {one, one + 1, 2 * one, 8 * one}) {
    INFO(preempt_mode_name(mode) << ", tier " << tier_blocks << " blocks, seed " << seed << ", pool " << blocks);
    SchedulerLimits limits;
    limits.preempt_mode = mode;
    limits.step_token_budget = 24;
    Rig rig(blocks, limits, tier_blocks);
    const Outcome got = run_scripts(rig, scripts);
    for (const Script& s : scripts) {
      INFO("conversation " << s.key);
      CHECK(got.answers.at(s.key) == expected.at(s.key));
    }
    CHECK(rig.kv->snapshot().blocks_used <= blocks);
    if (tier_blocks == 0) CHECK(got.tier.swap_outs == 0);
    hits += got.tier.hits;
  }
  if (tier_blocks != 0) CHECK(hits > 0);
}
