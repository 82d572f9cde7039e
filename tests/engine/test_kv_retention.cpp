// KV retention (engine/kv/kv_retention.h, engine/kv/kv_cache_retention.cpp): the selection rules on
// crafted attention, compaction per (layer, kv head) on the paged cache (rows moved as stored,
// blocks freed, shared blocks copied, prefix cache never serving rewritten blocks), budgets at
// every step, and on stories260K: budget 100% is bit-identical, new tokens keep their true
// position, and retention composes with int8 / fp8 KV.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "engine/error.h"
#include "engine/kv/kv_retention.h"
#include "engine/model/model.h"
#include "engine/system/thread_pool.h"
#include "tests/engine/kv_test_support.h"
#include "tests/test_support.h"

using namespace kvdesk;
using namespace kvdesk::test;

namespace {

std::vector<int32_t> ids(std::initializer_list<int32_t> l) { return l; }

// Reads (layer, head, slot)'s stored K and V rows as bytes.
std::vector<uint8_t> stored_row(const KvCache& kv, SeqId seq, int32_t layer, int32_t head, int32_t slot) {
  const PagedKvLayer L = kv.layer(layer);
  const std::vector<int32_t>& table = kv.block_table(seq);
  const int32_t B = L.block_size;
  const size_t kb = kv_row_bytes(L.k.type, L.head_dim), vb = kv_row_bytes(L.v.type, L.head_dim);
  const uint8_t* k = L.k.data + size_t(table[size_t(slot / B)]) * L.k.block_stride + size_t(head) * L.k.head_stride + size_t(slot % B) * L.k.row_stride;
  const uint8_t* v = L.v.data + size_t(table[size_t(slot / B)]) * L.v.block_stride + size_t(head) * L.v.head_stride + size_t(slot % B) * L.v.row_stride;
  std::vector<uint8_t> out(k, k + kb);
  out.insert(out.end(), v, v + vb);
  return out;
}

// Per (layer, head): a different kept set of `count` out of n, all sorted.
std::vector<std::vector<int32_t>> staggered_kept(int32_t n, int32_t count) {
  std::vector<std::vector<int32_t>> kept;
  for (int32_t i = 0; i < kTinyLayers * kTinyKvHeads; ++i) {
    std::vector<int32_t> k;
    for (int32_t j = 0; j < count; ++j) k.push_back((j * n) / count + (i % 2 == 1 && j + 1 < count ? 1 : 0));
    kept.push_back(k);
  }
  return kept;
}

}  // namespace

TEST_CASE("sinks keep the first tokens and the most recent ones", "[engine][retention]") {
  CHECK(select_sinks(20, 8, 4) == ids({0, 1, 2, 3, 16, 17, 18, 19}));
  CHECK(select_sinks(20, 3, 4) == ids({0, 1, 2}));
  CHECK(select_sinks(5, 8, 4) == ids({0, 1, 2, 3, 4}));
}

TEST_CASE("h2o keeps the recent window and the heaviest older tokens, older first on ties", "[engine][retention]") {
  std::vector<float> scores(16, 0.1f);
  scores[2] = 5, scores[7] = 3, scores[11] = 4, scores[14] = 9;
  CHECK(select_heavy_hitters(scores, 6, 3) == ids({2, 7, 11, 13, 14, 15}));
  CHECK(select_heavy_hitters(scores, 4, 2) == ids({2, 11, 14, 15}));
  const std::vector<float> flat(10, 1.0f);
  CHECK(select_heavy_hitters(flat, 4, 1) == ids({0, 1, 2, 9}));
}

TEST_CASE("snapkv keeps the observation window and the pooled neighbourhoods of the votes", "[engine][retention]") {
  std::vector<float> votes(20, 0.0f);
  votes[5] = 1.0f;     // one strong prompt position: pooling (kernel 3) keeps 4, 5, 6
  votes[17] = 50.0f;   // inside the window: kept anyway, never pooled into the prefix
  CHECK(select_snapkv(votes, 7, 4, 3) == ids({4, 5, 6, 16, 17, 18, 19}));
  votes[12] = 0.5f;
  CHECK(select_snapkv(votes, 6, 4, 1) == ids({5, 12, 16, 17, 18, 19}));
}

TEST_CASE("a budget is a fraction or a token count, anything else is refused", "[engine][retention]") {
  CHECK(parse_retention_budget("0.5").resolve(100) == 50);
  CHECK(parse_retention_budget("25%").resolve(10) == 3);
  CHECK(parse_retention_budget("1").resolve(7) == 1);
  CHECK(parse_retention_budget("1.0").resolve(7) == 7);
  CHECK(parse_retention_budget("128").resolve(1000) == 128);
  CHECK(parse_retention_budget("128").resolve(100) == 100);
  for (const char* bad : {"0", "1.5", "-3", "abc", "", "50%%", "0%"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_retention_budget(bad), Error);
  }
  CHECK(parse_retention_policy("h2o") == RetentionPolicy::H2O);
  CHECK_THROWS_AS(parse_retention_policy("lru"), Error);
}

TEST_CASE("h2o scores are per layer and kv head: each keeps what its own group attended to", "[engine][retention]") {
  RetentionOptions o;
  o.policy = RetentionPolicy::H2O;
  o.budget.tokens = 4;
  o.recent_fraction = 0.25;   // 1 recent + 3 heavy hitters
  RetentionState state(o, 1, 2);
  const int32_t n = 10, group = 2;
  std::vector<float> w(size_t(group * n), 0.0f);   // [group][n]
  w[1] = 0.5f, w[n + 3] = 0.5f, w[5] = 0.2f;       // kv head 0: heads of the group vote 1, 3, 5
  state.add_attention(0, 0, w.data(), group, n);
  std::fill(w.begin(), w.end(), 0.0f);
  w[2] = 0.9f, w[n + 6] = 0.4f, w[n + 7] = 0.3f;   // kv head 1: 2, 6, 7
  state.add_attention(0, 1, w.data(), group, n);
  const std::vector<std::vector<int32_t>> kept = state.plan(n, n);
  REQUIRE(kept.size() == 2);
  CHECK(kept[0] == ids({1, 3, 5, 9}));
  CHECK(kept[1] == ids({2, 6, 7, 9}));
  state.compact(kept);
  CHECK(state.scores(0, 1).size() == 4);
  CHECK(state.scores(0, 1)[0] == Approx(0.9f));
}

TEST_CASE("compaction moves each head's kept rows as stored and frees the trailing blocks", "[engine][retention]") {
  const KvType type = GENERATE(KvType::F32, KvType::INT8, KvType::FP8_E4M3);
  KvCacheConfig config = tiny_cache_config(8, 8);
  config.layout.k_type = config.layout.v_type = type;
  KvCache kv(tiny_model(), config);
  const SeqId seq = kv.create_sequence();
  REQUIRE(append_and_compute(kv, seq, token_range(1, 40)));
  const int32_t available = kv.num_available_blocks();
  const std::vector<std::vector<int32_t>> kept = staggered_kept(40, 12);
  std::vector<std::vector<uint8_t>> before;
  for (int32_t l = 0; l < kTinyLayers; ++l) {
    for (int32_t g = 0; g < kTinyKvHeads; ++g) {
      for (int32_t j : kept[size_t(l * kTinyKvHeads + g)]) before.push_back(stored_row(kv, seq, l, g, j));
    }
  }
  REQUIRE(kv.compact(seq, kept));
  kv.check_invariants();
  CHECK(kv.num_slots(seq) == 12);
  CHECK(kv.num_evicted(seq) == 28);
  CHECK(kv.num_tokens(seq) == 40);
  CHECK(kv.block_table(seq).size() == 2);
  CHECK(kv.num_available_blocks() == available + 3);
  CHECK(kv.snapshot().retention_blocks_freed == 3);
  size_t r = 0;
  for (int32_t l = 0; l < kTinyLayers; ++l) {
    for (int32_t g = 0; g < kTinyKvHeads; ++g) {
      for (int32_t i = 0; i < 12; ++i) CHECK(stored_row(kv, seq, l, g, i) == before[r++]);
    }
  }
  // The next token is position 40, written at slot 12.
  REQUIRE(append_and_compute(kv, seq, {99}));
  CHECK(kv.num_slots(seq) == 13);
  CHECK(kv.view(seq, 41).num_tokens == 13);
}

TEST_CASE("compaction copies blocks shared with a fork and never frees a referenced block", "[engine][retention]") {
  KvCache kv(tiny_model(), tiny_cache_config(12, 8));
  const SeqId a = kv.create_sequence();
  REQUIRE(append_and_compute(kv, a, token_range(1, 36)));
  const SeqId b = kv.fork(a);
  const uint64_t copies = kv.snapshot().cow_copies;
  REQUIRE(kv.compact(a, staggered_kept(36, 10)));
  kv.check_invariants();
  CHECK(first_wrong_position(kv, b) == -1);              // the fork reads what it read before
  CHECK(kv.block_table(b).size() == 5);
  CHECK(kv.snapshot().cow_copies == copies + 2);          // a's two kept blocks were shared: copied
  for (int32_t block : kv.block_table(a)) CHECK(kv.snapshot().blocks[size_t(block)].ref_count == 1);
  kv.free_sequence(a);
  kv.check_invariants();
  CHECK(first_wrong_position(kv, b) == -1);
}

TEST_CASE("rewritten blocks leave the prefix cache: a new sequence never gets compacted KV", "[engine][retention]") {
  const int32_t sinks = GENERATE(2, 8);
  KvCache kv(tiny_model(), tiny_cache_config(16, 8));
  const std::vector<int32_t> prompt = token_range(1, 40);
  const SeqId a = kv.create_sequence();
  REQUIRE(append_and_compute(kv, a, prompt));
  std::vector<std::vector<int32_t>> kept(size_t(kTinyLayers * kTinyKvHeads), select_sinks(40, 20, sinks));
  REQUIRE(kv.compact(a, kept));
  kv.check_invariants();
  const SeqId b = kv.create_sequence();
  const int32_t attached = kv.attach_cached_prefix(b, prompt);
  // sinks 8 leave block 0 (slots 0-7) as it was, so it stays published; sinks 2 rewrite it.
  CHECK(attached == (sinks == 8 ? 8 : 0));
  REQUIRE(kv.append(b, std::span<const int32_t>(prompt).subspan(size_t(attached))));
  compute(kv, b);
  CHECK(first_wrong_position(kv, b) == -1);
  REQUIRE(append_and_compute(kv, a, {7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7}));   // a compacted sequence publishes nothing more
  kv.check_invariants();
}

TEST_CASE("sinks and h2o respect their budget after every step, and blocks return to the pool", "[engine][retention]") {
  const RetentionPolicy policy = GENERATE(RetentionPolicy::Sinks, RetentionPolicy::H2O);
  const std::string keep = GENERATE(std::string("0.5"), std::string("24"));
  KvCache kv(tiny_model(), tiny_cache_config(16, 8));
  const SeqId seq = kv.create_sequence();
  RetentionOptions o;
  o.policy = policy;
  o.budget = parse_retention_budget(keep);
  kv.set_retention(seq, o, 1);
  const std::vector<float> weights(size_t(2 * 256), 0.01f);
  for (int32_t step = 0; step < 100; ++step) {
    REQUIRE(kv.append(seq, std::vector<int32_t>{step % 13 + 1}));
    if (policy == RetentionPolicy::H2O) {
      for (int32_t l = 0; l < kTinyLayers; ++l) {
        for (int32_t g = 0; g < kTinyKvHeads; ++g) kv.retention(seq)->add_attention(l, g, weights.data(), 2, kv.num_slots(seq));
      }
    }
    compute(kv, seq);
    INFO("step " << step);
    REQUIRE(kv.num_slots(seq) <= o.budget.resolve(kv.num_tokens(seq)));
    REQUIRE(int32_t(kv.block_table(seq).size()) == (kv.num_slots(seq) + 7) / 8);
  }
  const KvSnapshot snap = kv.snapshot();
  CHECK(snap.retention_tokens_seen == 100);
  CHECK(snap.retention_tokens_kept == kv.num_slots(seq));
  CHECK(snap.blocks_used == int32_t(kv.block_table(seq).size()));
  kv.free_sequence(seq);
  kv.check_invariants();
  CHECK(kv.num_available_blocks() == 16);
}

namespace {

struct ModelRun {
  std::unique_ptr<Model> model = Model::load(model_path("stories260K.gguf"));
  ThreadPool pool{2};
};

// Prefill of prompt then teacher-forced decode of next; every row of logits, in order.
std::vector<float> run_logits(ModelRun& m, KvCache& kv, SeqId seq, const std::vector<int32_t>& prompt,
                              const std::vector<int32_t>& next) {
  std::vector<float> all, logits;
  REQUIRE(kv.append(seq, prompt));
  ForwardBatch batch;
  for (size_t i = 0; i < prompt.size(); ++i) batch.add(prompt[i], int32_t(i), seq, i + 1 == prompt.size());
  m.model->forward(batch, kv, m.pool, logits);
  kv.mark_computed(seq, int32_t(prompt.size()));
  all = logits;
  for (int32_t token : next) {
    const int32_t pos = kv.num_tokens(seq);
    REQUIRE(kv.append(seq, std::vector<int32_t>{token}));
    ForwardBatch one;
    one.add(token, pos, seq, true);
    m.model->forward(one, kv, m.pool, logits);
    kv.mark_computed(seq, pos + 1);
    kv.check_invariants();
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

KvCache model_cache(const Model& model, KvType type = KvType::F32) {
  KvCacheConfig config;
  config.layout.k_type = config.layout.v_type = type;
  config.layout.num_blocks = model.config().context_length / 16;
  return KvCache(model.config(), config);
}

std::vector<int32_t> story(const Model& model, int32_t n) {
  std::vector<int32_t> t = model.tokenizer().encode(
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her "
      "friends. One day, she saw a big red ball under a tree and ran to get it.", true);
  const std::vector<int32_t> body(t.begin() + 1, t.end());
  while (int32_t(t.size()) < n) t.insert(t.end(), body.begin(), body.end());
  t.resize(size_t(n));
  return t;
}

}  // namespace

TEST_CASE("with a 100% budget every policy gives logits bit-identical to no retention", "[engine][retention][model]") {
  ModelRun m;
  const std::vector<int32_t> text = story(*m.model, 80);
  const std::vector<int32_t> prompt(text.begin(), text.begin() + 48), next(text.begin() + 48, text.end());
  KvCache plain = model_cache(*m.model);
  const std::vector<float> expected = run_logits(m, plain, plain.create_sequence(), prompt, next);
  const RetentionPolicy policy = GENERATE(RetentionPolicy::Sinks, RetentionPolicy::H2O, RetentionPolicy::SnapKV);
  KvCache kv = model_cache(*m.model);
  const SeqId seq = kv.create_sequence();
  RetentionOptions o;
  o.policy = policy;
  o.budget = parse_retention_budget("1.0");
  kv.set_retention(seq, o, int32_t(prompt.size()));
  const std::vector<float> got = run_logits(m, kv, seq, prompt, next);
  REQUIRE(got.size() == expected.size());
  CHECK(std::memcmp(got.data(), expected.data(), sizeof(float) * got.size()) == 0);
  CHECK(kv.num_evicted(seq) == 0);
}

// Layer 0's K of a token depends only on the token and its RoPE position, so the row a
// retained sequence writes for its next token must equal the full cache's row at that position.
TEST_CASE("after eviction a new token is written at its true position with keys as computed there", "[engine][retention][model]") {
  ModelRun m;
  const std::vector<int32_t> text = story(*m.model, 61);
  const std::vector<int32_t> prompt(text.begin(), text.begin() + 60);
  const int32_t next = text[60];
  KvCache plain = model_cache(*m.model);
  const SeqId p = plain.create_sequence();
  run_logits(m, plain, p, prompt, {next});
  const RetentionPolicy policy = GENERATE(RetentionPolicy::Sinks, RetentionPolicy::SnapKV);
  KvCache kv = model_cache(*m.model);
  const SeqId seq = kv.create_sequence();
  RetentionOptions o;
  o.policy = policy;
  o.budget.tokens = 20;
  kv.set_retention(seq, o, int32_t(prompt.size()));
  run_logits(m, kv, seq, prompt, {next});
  REQUIRE(kv.num_evicted(seq) >= 40);   // sinks evict once more after the decode step
  const int32_t newest = kv.num_slots(seq) - 1;
  for (int32_t g = 0; g < m.model->config().head_count_kv; ++g) {
    CHECK(stored_row(kv, seq, 0, g, newest) == stored_row(plain, p, 0, g, 60));
  }
}

TEST_CASE("retention composes with int8 and fp8 KV: budgets hold and logits stay finite and close", "[engine][retention][model]") {
  ModelRun m;
  const KvType type = GENERATE(KvType::INT8, KvType::FP8_E4M3);
  const RetentionPolicy policy = GENERATE(RetentionPolicy::H2O, RetentionPolicy::SnapKV);
  const std::vector<int32_t> text = story(*m.model, 120);
  const std::vector<int32_t> prompt(text.begin(), text.begin() + 80), next(text.begin() + 80, text.end());
  KvCache full = model_cache(*m.model, type);
  const std::vector<float> expected = run_logits(m, full, full.create_sequence(), prompt, next);
  KvCache kv = model_cache(*m.model, type);
  const SeqId seq = kv.create_sequence();
  RetentionOptions o;
  o.policy = policy;
  o.budget = parse_retention_budget("0.75");
  kv.set_retention(seq, o, int32_t(prompt.size()));
  const std::vector<float> got = run_logits(m, kv, seq, prompt, next);
  CHECK(kv.num_evicted(seq) > 0);
  CHECK(kv.num_slots(seq) <= (policy == RetentionPolicy::H2O ? o.budget.resolve(kv.num_tokens(seq)) : 60 + 40));
  int32_t agree = 0;
  const int32_t vocab = m.model->config().vocab_size;
  for (size_t row = 0; row < got.size() / size_t(vocab); ++row) {
    const float* a = got.data() + row * size_t(vocab);
    const float* b = expected.data() + row * size_t(vocab);
    for (int32_t i = 0; i < vocab; ++i) REQUIRE(std::isfinite(a[i]));
    agree += std::max_element(a, a + vocab) - a == std::max_element(b, b + vocab) - b;
  }
  CHECK(agree >= int32_t(got.size() / size_t(vocab)) / 2);
}
