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

namespace {

// The next turn of a conversation whose first turn had prompt_tokens tokens from first_token
// and generated `generated` made-up tokens (Rig::step's): everything computed, and one new token.
std::vector<int32_t> next_turn(int32_t prompt_tokens, int32_t generated, int32_t first_token = 1) {
  std::vector<int32_t> next;
  for (int32_t i = 0; i < prompt_tokens; ++i) next.push_back(first_token + i);
  for (int32_t i = 1; i < generated; ++i) next.push_back(1000 + i);
  next.push_back(7);
  return next;
}

}  // namespace

TEST_CASE("under pool pressure a parked conversation goes to the host tier and its next turn computes only the new tokens", "[engine][scheduler][host_tier]") {
  const bool tier_on = GENERATE(true, false);
  SchedulerLimits limits;
  limits.host_tier_bytes = tier_on ? kDefaultHostTierMib << 20 : 0;
  Rig r(4, limits);
  SequenceRequest conversation;
  conversation.conversation_key = 9;
  r.add(1, 20, 5, conversation);
  r.run();
  r.add(2, 50, 10, {}, 300);   // needs every block: the parked turn leaves the pool
  r.run();
  CHECK(r.scheduler->num_parked() == (tier_on ? 1 : 0));
  CHECK(r.scheduler->host_tier().stats().entries == (tier_on ? 1 : 0));

  r.wanted[3] = 2;
  r.scheduler->add(3, next_turn(20, 5), conversation);
  r.step();
  const Admission a = r.plans.back().admitted.at(0);
  if (tier_on) {
    CHECK(a.cached_tokens == 24);
    CHECK(a.host_tier_tokens == 24);
    CHECK(r.plans.back().num_tokens() == 1);
    const HostTierStats s = r.scheduler->host_tier().stats();
    CHECK(s.hits == 1);
    CHECK(s.swap_ins == 1);
    CHECK(s.entries == 0);
  } else {
    CHECK(a.host_tier_tokens == 0);   // what the prefix cache kept of its full block, if anything
    CHECK(a.cached_tokens <= 16);
  }
  r.run();
}

TEST_CASE("a branch of a conversation in the host tier forks it at the branch point after the swap-in", "[engine][scheduler][host_tier]") {
  Rig r(4);
  SequenceRequest conversation;
  conversation.conversation_key = 9;
  r.add(1, 20, 5, conversation);
  r.run();
  r.add(2, 50, 10, {}, 300);
  r.run();
  REQUIRE(r.scheduler->host_tier().stats().entries == 1);
  r.add(3, 20, 3, conversation);   // Regenerate: the same prompt again
  r.step();
  CHECK(r.plans.back().admitted.at(0).cached_tokens == 19);
  CHECK(r.plans.back().admitted.at(0).host_tier_tokens == 19);
  CHECK(r.plans.back().num_tokens() == 1);
  r.run();
  CHECK(r.scheduler->num_parked() == 2);   // both branches
  CHECK(r.scheduler->host_tier().stats().hits == 1);
}

TEST_CASE("over its budget the host tier drops the least recently used conversation, which then recomputes", "[engine][scheduler][host_tier]") {
  SchedulerLimits limits;
  limits.host_tier_bytes = 2 * 16 * test::tiny_model().block_count * 2 * test::kTinyKvHeads * test::kTinyHeadDim * 4;   // 2 blocks
  Rig r(4, limits);
  SequenceRequest first, second;
  first.conversation_key = 1;
  second.conversation_key = 2;
  r.add(1, 20, 5, first);       // 2 blocks
  r.run();
  r.add(2, 20, 5, second, 500);
  r.run();
  r.add(3, 50, 10, {}, 300);    // pushes both out; the tier holds one
  r.run();
  const HostTierStats s = r.scheduler->host_tier().stats();
  CHECK(s.entries == 1);
  CHECK(s.drops == 1);
  CHECK(r.scheduler->num_parked() == 1);

  r.wanted[4] = 2;
  r.scheduler->add(4, next_turn(20, 5, 500), second);   // the newer one is in the tier
  r.step();
  CHECK(r.plans.back().admitted.at(0).host_tier_tokens == 24);
  r.run();
  r.wanted[5] = 2;
  r.scheduler->add(5, next_turn(20, 5), first);         // the older one was dropped
  r.step();
  CHECK(r.plans.back().admitted.at(0).host_tier_tokens == 0);
  r.run();
}

TEST_CASE("swap preemption stores into the host tier and recomputes when the budget cannot take the victim", "[engine][scheduler][host_tier]") {
  const bool room = GENERATE(true, false);
  SchedulerLimits limits;
  limits.preempt_mode = PreemptMode::Swap;
  limits.host_tier_bytes = room ? kDefaultHostTierMib << 20 : 1;
  Rig r(5, limits);
  for (RequestId id = 1; id <= 3; ++id) r.add(id, 20, 30, {}, int32_t(id) * 100);
  r.run();
  CHECK(r.scheduler->preemptions() > 0);
  const HostTierStats s = r.scheduler->host_tier().stats();
  CHECK((r.scheduler->swapped_bytes() > 0) == room);   // a victim holding no block yet fits any budget
  CHECK((s.refusals > 0) == !room);
  CHECK(s.swap_outs == s.swap_ins);
  for (RequestId id = 1; id <= 3; ++id) CHECK(r.generated[id] == 30);
}

TEST_CASE("multi-turn conversations in pools from one request up, both preemption modes, host tier on, small and off: every step progresses", "[engine][scheduler][host_tier]") {
  const PreemptMode mode = GENERATE(PreemptMode::Recompute, PreemptMode::Swap);
  const size_t tier = GENERATE(size_t(0), size_t(4096), kDefaultHostTierMib << 20);
  const uint64_t seed = GENERATE(1u, 2u, 3u);
  std::mt19937_64 rng(seed);
  for (int32_t blocks : {6, 7, 12, 60}) {
    INFO(preempt_mode_name(mode) << ", tier " << tier << " bytes, seed " << seed << ", " << blocks << " blocks");
    SchedulerLimits limits;
    limits.preempt_mode = mode;
    limits.host_tier_bytes = tier;
    limits.step_token_budget = int32_t(8 + rng() % 40);
    Rig r(blocks, limits);
    // Conversation c's turns: its tokens so far plus a few new ones, arriving when the last ended.
    std::map<uint64_t, std::vector<int32_t>> history;
    std::map<RequestId, uint64_t> owner;
    RequestId next_id = 1;
    auto start_turn = [&](uint64_t c) {
      std::vector<int32_t>& h = history[c];
      const int32_t fresh = int32_t(1 + rng() % 20);
      for (int32_t i = 0; i < fresh; ++i) h.push_back(int32_t(c * 50 + rng() % 3));
      const int32_t max_tokens = int32_t(1 + rng() % 20);
      if (int64_t(h.size()) + max_tokens > int64_t(blocks) * 16) return;   // the conversation is over
      SequenceRequest sr;
      sr.conversation_key = c;
      sr.priority = int32_t(rng() % 2);
      r.wanted[next_id] = max_tokens;
      owner[next_id] = c;
      r.scheduler->add(next_id++, h, sr);
    };
    for (uint64_t c = 1; c <= 5; ++c) start_turn(c);
    int32_t turns = 0;
    for (int i = 0; i < 100000 && r.scheduler->has_work(); ++i) {
      StepPlan plan = r.scheduler->plan();
      REQUIRE(plan.num_tokens() > 0);
      r.scheduler->computed(plan);
      for (const ScheduledChunk& c : plan.chunks) {
        if (!c.reaches_end) continue;
        std::vector<int32_t>& h = history[owner[c.id]];
        h = r.scheduler->tokens(c.id);
        if (++r.generated[c.id] < r.wanted[c.id]) {
          r.scheduler->append_token(c.id, 1000 + r.generated[c.id]);
          continue;
        }
        h.push_back(1000 + r.generated[c.id]);
        r.scheduler->finish(c.id, true);
        if (++turns < 25) start_turn(owner[c.id]);
      }
      r.scheduler->check_invariants();
    }
    REQUIRE_FALSE(r.scheduler->has_work());
    for (const auto& [id, n] : r.wanted) CHECK(r.generated[id] == n);
  }
}
