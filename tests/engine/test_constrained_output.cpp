// What the engine step does for the OpenAI surface on stories260K: a grammar holds every
// answer to its language at any temperature (a constraint, not a hope: this model knows
// nothing of JSON), parallel samples share the prompt's KV blocks and draw apart, and
// log-probabilities describe the distribution the token was drawn from.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <map>
#include <set>

#include "engine/backend/forward_backend.h"
#include "engine/grammar/gbnf.h"
#include "engine/grammar/json_schema.h"
#include "engine/kv/kv_cache.h"
#include "engine/model/model.h"
#include "engine/runtime/engine_core.h"
#include "engine/system/thread_pool.h"
#include "tests/test_support.h"

using namespace kvdesk;
using kvdesk::test::model_path;

namespace {

struct Answers {
  std::map<RequestId, std::string> text;
  std::map<RequestId, std::vector<Event>> tokens;
  std::map<RequestId, Event> finished;
};

struct Core {
  std::unique_ptr<Model> model = Model::load(model_path("stories260K.gguf"));
  std::unique_ptr<KvCache> kv;
  ThreadPool pool{2};
  CpuForward forward{*model, pool};
  std::unique_ptr<EngineCore> core;

  Core() {
    KvCacheConfig config;
    config.layout.block_size = 16;
    config.layout.num_blocks = 256;
    kv = std::make_unique<KvCache>(model->config(), config);
    core = std::make_unique<EngineCore>(*model, forward, *kv, SchedulerLimits{});
  }

  Answers run(RequestId id, const Request& request, const std::string& prompt) {
    core->add(id, request, model->tokenizer().encode(prompt, true), EngineCore::Clock::now());
    Answers out;
    for (int i = 0; i < 5000 && core->has_work(); ++i) {
      std::vector<Event> events;
      core->step(events);
      for (const Event& e : events) {
        REQUIRE(e.kind != EventKind::Error);
        if (e.kind == EventKind::Token) {
          out.text[e.request] += e.text;
          if (e.token >= 0) out.tokens[e.request].push_back(e);
        }
        if (e.kind == EventKind::Finished) out.finished[e.request] = e;
      }
    }
    REQUIRE_FALSE(core->has_work());
    return out;
  }
};

const nlohmann::ordered_json kPersonSchema = nlohmann::ordered_json::parse(R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 12},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "pets": {"type": "array", "items": {"enum": ["cat", "dog", "fish"]}, "maxItems": 3},
    "happy": {"type": "boolean"}
  },
  "required": ["name", "age", "pets", "happy"],
  "additionalProperties": false
})");

Request constrained(const nlohmann::ordered_json& schema, float temperature, uint64_t seed) {
  Request r;
  r.max_tokens = 400;
  r.sampling.temperature = temperature;
  r.sampling.seed = seed;
  r.constraint.grammar = grammar::parse_gbnf(grammar::json_schema_gbnf(schema));
  return r;
}

}  // namespace

TEST_CASE("a JSON schema holds every answer, greedy or sampled hot", "[engine][constrained]") {
  Core c;
  for (const float temperature : {0.0f, 1.0f, 1.5f}) {
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      const Answers a = c.run(1, constrained(kPersonSchema, temperature, seed), "Once upon a time");
      INFO("temperature " << temperature << " seed " << seed << ": " << a.text.at(1));
      CHECK(a.finished.at(1).finish == FinishReason::Stop);
      const nlohmann::json j = nlohmann::json::parse(a.text.at(1));
      REQUIRE(j.is_object());
      CHECK(j.size() == 4);
      const std::string name = j.at("name").get<std::string>();
      CHECK(!name.empty());
      CHECK(j.at("age").is_number_integer());
      CHECK(j.at("age").get<int>() >= 0);
      CHECK(j.at("age").get<int>() <= 120);
      CHECK(j.at("pets").size() <= 3);
      for (const auto& pet : j.at("pets")) CHECK((pet == "cat" || pet == "dog" || pet == "fish"));
      CHECK(j.at("happy").is_boolean());
    }
  }
  CHECK(c.kv->num_available_blocks() == c.kv->num_blocks());
}

TEST_CASE("a seeded constrained answer is the same from an engine that kept the schema's tables", "[engine][constrained]") {
  // One engine answers seeds 1 to 4 in turn (each request starts from the grammar tables the one
  // before left); each answer must equal a fresh engine's for that seed.
  Core warm;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const std::string kept = warm.run(1, constrained(kPersonSchema, 1.0f, seed), "Once upon a time").text.at(1);
    Core fresh;
    CHECK(fresh.run(1, constrained(kPersonSchema, 1.0f, seed), "Once upon a time").text.at(1) == kept);
  }
}

TEST_CASE("an answer cut by max_tokens inside the grammar ends as length", "[engine][constrained]") {
  Core c;
  Request r = constrained(kPersonSchema, 1.0f, 7);
  r.max_tokens = 3;
  const Answers a = c.run(1, r, "Once upon a time");
  CHECK(a.finished.at(1).finish == FinishReason::Length);
  CHECK(a.text.at(1).starts_with("{"));
}

TEST_CASE("parallel samples compute the prompt once, share its blocks and draw apart", "[engine][samples]") {
  Core c;
  const std::string prompt = "Lily and Tom went to the park to play with a ball. They saw a big dog and";
  Request r;
  r.max_tokens = 24;
  r.stop_at_eos = false;
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 11;
  r.samples = 4;
  const Answers a = c.run(10, r, prompt);
  REQUIRE(a.finished.size() == 4);
  const int32_t prompt_tokens = a.finished.at(10).metrics.prompt_tokens;
  for (RequestId id = 11; id <= 13; ++id) {
    CHECK(a.finished.at(id).metrics.prompt_tokens == prompt_tokens);
    CHECK(a.finished.at(id).metrics.cached_tokens == prompt_tokens);   // none computed again
    CHECK(a.tokens.at(id).size() == 24);
  }
  std::set<std::string> distinct;
  for (const auto& [id, text] : a.text) distinct.insert(text);
  CHECK(distinct.size() >= 3);
  CHECK(c.kv->snapshot().forks >= 3);
  CHECK(c.kv->num_available_blocks() == c.kv->num_blocks());

  // Greedy samples are the one greedy answer, four times.
  r.sampling.temperature = 0;
  const Answers greedy = c.run(20, r, prompt);
  Request one = r;
  one.samples = 1;
  const Answers alone = c.run(30, one, prompt);
  for (RequestId id = 20; id <= 23; ++id) CHECK(greedy.text.at(id) == alone.text.at(30));
}

TEST_CASE("log-probabilities are the drawn distribution's, most likely first", "[engine][samples]") {
  Core c;
  Request r;
  r.max_tokens = 8;
  r.stop_at_eos = false;
  r.top_logprobs = 5;
  const Answers a = c.run(1, r, "Once upon a time");
  REQUIRE(a.tokens.at(1).size() == 8);
  for (const Event& e : a.tokens.at(1)) {
    REQUIRE(e.top_logprobs.size() == 5);
    // Greedy: the token drawn is the most likely one.
    CHECK(e.top_logprobs[0].token == e.token);
    CHECK(e.logprob == Approx(e.top_logprobs[0].logprob));
    CHECK(e.token_bytes == e.top_logprobs[0].bytes);
    double mass = 0;
    for (size_t i = 0; i < e.top_logprobs.size(); ++i) {
      CHECK(e.top_logprobs[i].logprob <= 0);
      if (i > 0) CHECK(e.top_logprobs[i].logprob <= e.top_logprobs[i - 1].logprob);
      mass += std::exp(e.top_logprobs[i].logprob);
    }
    CHECK(mass <= 1.0 + 1e-5);
  }
}
