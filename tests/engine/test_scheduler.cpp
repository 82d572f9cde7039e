// The scheduler alone, on a KV cache without a model: a fake step writes no KV bytes, only
// marks the plan computed and appends a made-up token for every chunk that reached its end.
// Planning rules (decodes first, the token budget, admission with cached prefixes, preemption
// in both modes) and the invariants after every step.
#include <catch2/catch.hpp>

#include <map>
#include <random>

#include "engine/kv/kv_cache.h"
#include "engine/sched/scheduler.h"
#include "tests/engine/kv_test_support.h"

using namespace kvdesk;

namespace {

struct Rig {
  ModelConfig model = test::tiny_model();
  std::unique_ptr<KvCache> kv;
  std::unique_ptr<Scheduler> scheduler;
  std::map<RequestId, int32_t> wanted;      // tokens each request generates before it ends
  std::map<RequestId, int32_t> generated;
  std::vector<StepPlan> plans;

  explicit Rig(int32_t blocks, SchedulerLimits limits = {}) {
    KvCacheConfig config;
    config.layout.block_size = 16;
    config.layout.num_blocks = blocks;
    kv = std::make_unique<KvCache>(model, config);
    scheduler = std::make_unique<Scheduler>(*kv, limits);
  }

  void add(RequestId id, int32_t prompt_tokens, int32_t max_tokens, SequenceRequest r = {}, int32_t first_token = 1) {
    std::vector<int32_t> prompt(static_cast<size_t>(prompt_tokens));
    for (int32_t i = 0; i < prompt_tokens; ++i) prompt[size_t(i)] = first_token + i;
    wanted[id] = max_tokens;
    scheduler->add(id, std::move(prompt), r);
  }

  // Returns the tokens the step computed.
  int32_t step() {
    StepPlan plan = scheduler->plan();
    scheduler->computed(plan);
    for (const ScheduledChunk& c : plan.chunks) {
      if (!c.reaches_end) continue;
      if (++generated[c.id] >= wanted[c.id]) {
        scheduler->finish(c.id, true);
      } else {
        scheduler->append_token(c.id, 1000 + generated[c.id]);
      }
    }
    scheduler->check_invariants();
    plans.push_back(plan);
    return plan.num_tokens();
  }

  void run() {
    for (int i = 0; i < 100000 && scheduler->has_work(); ++i) REQUIRE(step() > 0);
    REQUIRE_FALSE(scheduler->has_work());
  }
};

}  // namespace

TEST_CASE("a step plans decodes first, then prefill chunks, within the token budget", "[engine][scheduler]") {
  SchedulerLimits limits;
  limits.step_token_budget = 20;
  Rig r(64, limits);
  r.add(1, 5, 50);
  r.step();                 // request 1's prompt
  r.add(2, 70, 3, {}, 100);
  r.step();
  const StepPlan& plan = r.plans.back();
  REQUIRE(plan.chunks.size() == 2);
  CHECK(plan.chunks[0].id == 1);
  CHECK(plan.chunks[0].count == 1);
  CHECK(plan.chunks[1].id == 2);
  CHECK(plan.chunks[1].count == 19);
  CHECK_FALSE(plan.chunks[1].reaches_end);
  CHECK(plan.admitted.size() == 1);
  r.run();
  CHECK(r.generated[1] == 50);
  CHECK(r.generated[2] == 3);
  CHECK(r.kv->num_available_blocks() == r.kv->num_blocks());
}

TEST_CASE("a second request with the same prompt is admitted with its cached full blocks", "[engine][scheduler]") {
  Rig r(64);
  r.add(1, 40, 2);
  r.run();
  r.add(2, 40, 2);
  r.step();
  REQUIRE(r.plans.back().admitted.size() == 1);
  CHECK(r.plans.back().admitted[0].cached_tokens == 32);
  SequenceRequest all;
  all.compute_all = true;
  r.add(3, 40, 2, all);
  r.step();
  CHECK(r.plans.back().admitted.back().cached_tokens == 0);
  r.run();
}

TEST_CASE("a conversation's finished turn is parked and its next turn continues on it", "[engine][scheduler]") {
  Rig r(64);
  SequenceRequest conversation;
  conversation.conversation_key = 9;
  r.add(1, 20, 5, conversation);
  r.run();
  CHECK(r.scheduler->num_parked() == 1);
  std::vector<int32_t> next;
  for (int32_t i = 0; i < 20; ++i) next.push_back(1 + i);
  for (int32_t i = 1; i < 5; ++i) next.push_back(1000 + i);
  next.push_back(7);
  r.wanted[2] = 3;
  r.scheduler->add(2, next, conversation);
  r.step();
  CHECK(r.plans.back().admitted[0].cached_tokens == 24);
  r.run();
}

TEST_CASE("a regenerated or edited turn forks the parked turn at the branch point and the original stays", "[engine][scheduler]") {
  Rig r(64);
  SequenceRequest conversation;
  conversation.conversation_key = 9;
  r.add(1, 20, 5, conversation);
  r.run();
  REQUIRE(r.scheduler->num_parked() == 1);

  r.add(2, 20, 3, conversation);   // Regenerate: the same prompt again
  r.step();
  CHECK(r.plans.back().admitted[0].cached_tokens == 19);
  CHECK(r.plans.back().num_tokens() == 1);
  r.run();
  CHECK(r.scheduler->num_parked() == 2);

  std::vector<int32_t> edited;   // Edit: the prompt differs from its 15th token on
  for (int32_t i = 0; i < 20; ++i) edited.push_back(i == 14 ? 500 : 1 + i);
  r.wanted[3] = 2;
  r.scheduler->add(3, edited, conversation);
  r.step();
  CHECK(r.plans.back().admitted[0].cached_tokens == 14);
  r.run();
  CHECK(r.kv->snapshot().forks == 2);

  std::vector<int32_t> next;   // The first branch goes on: it takes its parked turn over
  for (int32_t i = 0; i < 20; ++i) next.push_back(1 + i);
  for (int32_t i = 1; i < 5; ++i) next.push_back(1000 + i);
  next.push_back(7);
  r.wanted[4] = 2;
  r.scheduler->add(4, next, conversation);
  r.step();
  CHECK(r.plans.back().admitted[0].cached_tokens == 24);
  r.run();
  r.scheduler->release_conversation(9);
  CHECK(r.scheduler->num_parked() == 0);
  CHECK(r.kv->snapshot().blocks_used == 0);
}

TEST_CASE("a conversation keeps at most its newest parked branches", "[engine][scheduler]") {
  Rig r(64);
  SequenceRequest conversation;
  conversation.conversation_key = 3;
  for (RequestId id = 1; id <= RequestId(Scheduler::kMaxParkedBranches) + 2; ++id) {
    r.add(id, 20, 2, conversation, int32_t(id) * 100);   // unrelated prompts: separate branches
    r.run();
  }
  CHECK(r.scheduler->num_parked() == Scheduler::kMaxParkedBranches);
}

TEST_CASE("pools from one request up finish every request in both preemption modes, each step progressing", "[engine][scheduler]") {
  const PreemptMode mode = GENERATE(PreemptMode::Recompute, PreemptMode::Swap);
  const uint64_t seed = GENERATE(1u, 2u, 3u, 4u);
  std::mt19937_64 rng(seed);
  for (int32_t blocks : {5, 6, 9, 40}) {
    INFO(preempt_mode_name(mode) << ", seed " << seed << ", " << blocks << " blocks");
    SchedulerLimits limits;
    limits.preempt_mode = mode;
    limits.step_token_budget = int32_t(8 + rng() % 40);
    Rig r(blocks, limits);
    for (RequestId id = 1; id <= 8; ++id) {
      SequenceRequest sr;
      sr.priority = int32_t(rng() % 2);
      sr.conversation_key = rng() % 3 == 0 ? id : 0;
      r.add(id, int32_t(1 + rng() % 40), int32_t(1 + rng() % 40), sr, int32_t(rng() % 3) * 16 + 1);
    }
    r.run();
    for (RequestId id = 1; id <= 8; ++id) CHECK(r.generated[id] == r.wanted[id]);
  }
}
