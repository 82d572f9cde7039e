// The prefix cache with the real stories260K model: a repeated prompt and a second turn reuse
// the cached blocks through Generator and produce the same greedy tokens as computing anew.
#include <catch2/catch.hpp>

#include "engine/runtime/generator.h"
#include "engine/model/model.h"
#include "engine/system/thread_pool.h"
#include "tests/test_support.h"

using namespace kvdesk;
using kvdesk::test::model_path;
using kvdesk::test::reference;

namespace {

struct Fixture {
  std::unique_ptr<Model> model = Model::load(model_path("stories260K.gguf"));
  ThreadPool pool{2};
  std::unique_ptr<KvCache> kv;

  explicit Fixture(bool prefix_caching) {
    KvCacheConfig config;
    config.layout.block_size = 16;
    config.layout.num_blocks = model->config().context_length / 16;
    config.prefix_caching = prefix_caching;
    kv = std::make_unique<KvCache>(model->config(), config);
  }

  GenerateResult greedy(const std::vector<int32_t>& prompt, int32_t n) {
    GenerateOptions options;
    options.max_tokens = n;
    options.stop_at_eos = false;
    Generator generator(*model, *kv, pool);
    GenerateResult r = generator.generate(prompt, options);
    kv->check_invariants();
    return r;
  }
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
  const GenerateResult first = f.greedy(prompt, 32);
  CHECK(first.cached_tokens == 0);
  CHECK(first.kv.prefix_misses == 4);
  const GenerateResult second = f.greedy(prompt, 32);
  CHECK(second.cached_tokens == 64);
  CHECK(second.kv.prefix_hits == 4);
  CHECK(second.kv.prefix_hit_tokens == 64);
  CHECK(second.tokens == first.tokens);

  Fixture fresh(false);
  CHECK(fresh.greedy(prompt, 32).tokens == first.tokens);
}

TEST_CASE("a second turn attaches the whole history and continues as computing it anew would", "[engine][prefix][reference]") {
  Fixture f(true);
  const std::vector<int32_t> prompt = long_prompt();
  const GenerateResult first = f.greedy(prompt, 40);
  std::vector<int32_t> turn2 = prompt;
  turn2.insert(turn2.end(), first.tokens.begin(), first.tokens.end());
  for (int32_t id : reference()["prompt_ids"].get<std::vector<int32_t>>()) turn2.push_back(id);
  // 69 + 40 + 5 = 114 tokens; the history's last token was sampled but never computed.
  const GenerateResult second = f.greedy(turn2, 16);
  CHECK(second.cached_tokens == (69 + 40 - 1) / 16 * 16);
  CHECK(second.peak_blocks == 9);   // ceil((114 + 15 generated and appended) / 16)

  Fixture fresh(false);
  CHECK(fresh.greedy(turn2, 16).tokens == second.tokens);
}
