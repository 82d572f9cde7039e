// The prefix cache with the real stories260K model: a repeated prompt and a second turn reuse
// the cached blocks through the engine step and produce the same greedy tokens as computing anew.
#include <catch2/catch.hpp>

#include "tests/engine/model_run.h"
#include "tests/test_support.h"

using namespace kvdesk;
using kvdesk::test::model_path;
using kvdesk::test::reference;

namespace {

struct Fixture {
  test::ModelRun run;

  explicit Fixture(bool prefix_caching) : run(Model::load(model_path("stories260K.gguf")), cache_config(prefix_caching), 2) {}

  static KvCacheConfig cache_config(bool prefix_caching) {
    KvCacheConfig config;
    config.prefix_caching = prefix_caching;
    return config;
  }

  Completion greedy(const std::vector<int32_t>& prompt, int32_t n) {
    Completion r = run.greedy(prompt, n);
    run.kv->check_invariants();
    return r;
  }
  KvSnapshot kv() const { return run.kv->snapshot(); }
};

// The reference prompt and its continuation: 69 tokens, 4 full blocks of 16.
std::vector<int32_t> long_prompt() {
  std::vector<int32_t> p = reference()["prompt_ids"].get<std::vector<int32_t>>();
  for (int32_t id : reference()["generated_ids"].get<std::vector<int32_t>>()) p.push_back(id);
  return p;
}

}  // namespace

TEST_CASE("generating twice with the same prompt reuses its cached blocks and the same tokens", "[engine][prefix][reference]") {
  Fixture f(true);
  const std::vector<int32_t> prompt = long_prompt();
  const Completion first = f.greedy(prompt, 32);
  CHECK(first.metrics.cached_tokens == 0);
  CHECK(f.kv().prefix_misses == 4);
  const Completion second = f.greedy(prompt, 32);
  CHECK(second.metrics.cached_tokens == 64);
  CHECK(f.kv().prefix_hits == 4);
  CHECK(f.kv().prefix_hit_tokens == 64);
  CHECK(second.tokens == first.tokens);

  Fixture fresh(false);
  CHECK(fresh.greedy(prompt, 32).tokens == first.tokens);
}

TEST_CASE("a second turn attaches the whole history and continues as computing it anew would", "[engine][prefix][reference]") {
  Fixture f(true);
  const std::vector<int32_t> prompt = long_prompt();
  const Completion first = f.greedy(prompt, 40);
  std::vector<int32_t> turn2 = prompt;
  turn2.insert(turn2.end(), first.tokens.begin(), first.tokens.end());
  for (int32_t id : reference()["prompt_ids"].get<std::vector<int32_t>>()) turn2.push_back(id);
  // 69 + 40 + 5 = 114 tokens; the history's last token was sampled but never computed.
  const Completion second = f.greedy(turn2, 16);
  CHECK(second.metrics.cached_tokens == (69 + 40 - 1) / 16 * 16);
  CHECK(second.metrics.peak_blocks == 9);   // ceil((114 + 15 generated and appended) / 16)

  Fixture fresh(false);
  CHECK(fresh.greedy(turn2, 16).tokens == second.tokens);
}
