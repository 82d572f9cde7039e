// The newest rows kept in f32 (engine/kv/recent_rows.h): the ring keeps the last rows of
// consecutive slots and forgets what a rewrite or a gap invalidates; through the forward, a
// token reads the same rows however its prompt was chunked or branched, and reading them
// exact brings low-bit KV's logits closer to f32 KV's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "engine/kv/kv_cache.h"
#include "engine/kv/recent_rows.h"
#include "engine/model/model.h"
#include "engine/system/thread_pool.h"
#include "tests/test_support.h"

using namespace kvdesk;

namespace {

constexpr int32_t kRowFloats = 3;

// Rows [count][kRowFloats] whose values name their slot: slot * 10 + column (+ tag for v).
std::vector<float> rows_of(int32_t first, int32_t count, float tag = 0) {
  std::vector<float> rows;
  for (int32_t s = first; s < first + count; ++s) {
    for (int32_t c = 0; c < kRowFloats; ++c) rows.push_back(float(s * 10 + c) + tag);
  }
  return rows;
}

void store(RecentRows& r, int32_t layer, int32_t first, int32_t count, float tag = 0) {
  const std::vector<float> k = rows_of(first, count, tag), v = rows_of(first, count, tag + 0.5f);
  r.store(layer, first, count, k.data(), v.data(), kRowFloats);
}

// The rows gather hands back for slots [from, end): their first slot and k values.
std::pair<int32_t, std::vector<float>> gathered(const RecentRows& r, int32_t layer, int32_t from, int32_t end) {
  std::vector<float> k(size_t(std::max(0, end - from)) * kRowFloats), v(k.size());
  const int32_t start = r.gather(layer, from, end, k.data(), v.data());
  k.resize(size_t(end - start) * kRowFloats);
  for (size_t i = 0; i < k.size(); ++i) REQUIRE(v[i] == k[i] + 0.5f);
  return {start, k};
}

struct ModelRun {
  std::unique_ptr<Model> model = Model::load(test::model_path("stories260K.gguf"));
  ThreadPool pool{2};
};

KvCache cache_of(const Model& model, KvType type, int32_t recent_rows) {
  KvCacheConfig config;
  config.layout.k_type = config.layout.v_type = type;
  config.layout.recent_rows = recent_rows;
  config.layout.num_blocks = model.config().context_length / 16;
  return KvCache(model.config(), config);
}

std::vector<int32_t> story(const Model& model) {
  return model.tokenizer().encode(
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her "
      "friends. One day, she saw a big red ball under a tree and ran to get it.", true);
}

// Computes tokens [from, to) of seq, `chunk` tokens per forward; the logits of every token
// computed, in order.
std::vector<float> prefill(ModelRun& m, KvCache& kv, SeqId seq, const std::vector<int32_t>& tokens, int32_t from,
                           int32_t to, int32_t chunk) {
  std::vector<float> all, logits;
  REQUIRE(kv.append(seq, std::vector<int32_t>(tokens.begin() + from, tokens.begin() + to)));
  for (int32_t first = from; first < to; first += chunk) {
    ForwardBatch batch;
    const int32_t end = std::min(to, first + chunk);
    for (int32_t p = first; p < end; ++p) batch.add(tokens[size_t(p)], p, seq, true);
    m.model->forward(batch, kv, m.pool, logits);
    kv.mark_computed(seq, end);
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

double mean_squared_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return sum / double(a.size());
}

float max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

}  // namespace

TEST_CASE("recent rows keep the newest rows of consecutive slots, per layer", "[engine][recent_rows]") {
  RecentRows r(4, 2, kRowFloats);
  store(r, 0, 0, 3);
  store(r, 0, 3, 1);
  store(r, 0, 4, 6);
  CHECK(r.begin(0) == 6);
  CHECK(r.end(0) == 10);
  CHECK(gathered(r, 0, 0, 10) == std::pair{6, rows_of(6, 4)});
  CHECK(gathered(r, 0, 7, 9) == std::pair{7, rows_of(7, 2)});
  CHECK(gathered(r, 1, 0, 10).first == 10);   // layer 1 keeps nothing yet
  CHECK(gathered(r, 0, 0, 11).first == 11);   // slot 10 is not kept: no run ends there
  CHECK(r.bytes() == 2 * 2 * 4 * kRowFloats * sizeof(float));
}

TEST_CASE("a store at an earlier slot replaces the rows from there on, a gap forgets them", "[engine][recent_rows]") {
  RecentRows r(4, 1, kRowFloats);
  store(r, 0, 0, 10);
  store(r, 0, 8, 1, 1000);
  CHECK(r.begin(0) == 6);
  CHECK(r.end(0) == 9);
  std::vector<float> expected = rows_of(6, 2);
  const std::vector<float> rewritten = rows_of(8, 1, 1000);
  expected.insert(expected.end(), rewritten.begin(), rewritten.end());
  CHECK(gathered(r, 0, 0, 9) == std::pair{6, expected});
  store(r, 0, 20, 2);
  CHECK(r.begin(0) == 20);
  CHECK(gathered(r, 0, 0, 22) == std::pair{20, rows_of(20, 2)});
  r.truncate(21);
  CHECK(r.end(0) == 21);
  r.truncate(5);
  CHECK(r.begin(0) == r.end(0));
  CHECK(gathered(r, 0, 0, 5).first == 5);
}

TEST_CASE("a cache keeps recent rows only for low-bit kv in host memory", "[engine][recent_rows]") {
  ModelRun m;
  CHECK(cache_of(*m.model, KvType::F16, 16).layout().recent_rows == 0);
  CHECK(cache_of(*m.model, KvType::BF16, 16).layout().recent_rows == 0);
  for (KvType type : {KvType::FP8_E4M3, KvType::FP8_E5M2, KvType::INT8, KvType::INT4}) {
    CHECK(cache_of(*m.model, type, 16).layout().recent_rows == 16);
  }
  CHECK(cache_of(*m.model, KvType::INT4, 0).layout().recent_rows == 0);
}

// Chunks of 7 and single tokens put run boundaries everywhere in the 16-row window: each token
// must still read its 15 predecessors in f32, so the logits match one pass up to the f32
// rounding of batched matmuls, far closer than reading any row quantized would be.
TEST_CASE("a token reads the same recent rows however its prompt was chunked", "[engine][recent_rows]") {
  ModelRun m;
  const std::vector<int32_t> tokens = story(*m.model);
  const int32_t n = int32_t(tokens.size());
  std::vector<float> whole, fewer;
  {
    KvCache kv = cache_of(*m.model, KvType::INT4, 16);
    whole = prefill(m, kv, kv.create_sequence(), tokens, 0, n, n);
  }
  {
    KvCache kv = cache_of(*m.model, KvType::INT4, 15);
    fewer = prefill(m, kv, kv.create_sequence(), tokens, 0, n, n);
  }
  const float one_row_quantized = max_difference(whole, fewer);
  INFO("one row fewer in f32 moves a logit by " << one_row_quantized);
  REQUIRE(one_row_quantized > 1e-3f);
  for (int32_t chunk : {1, 7, 16}) {
    KvCache kv = cache_of(*m.model, KvType::INT4, 16);
    const SeqId seq = kv.create_sequence();
    const std::vector<float> chunked = prefill(m, kv, seq, tokens, 0, n, chunk);
    INFO("chunk " << chunk << ": max logit difference " << max_difference(whole, chunked));
    CHECK(max_difference(whole, chunked) < one_row_quantized / 100);
    CHECK(kv.recent_rows(seq).begin(0) == n - 16);
    CHECK(kv.recent_rows(seq).end(m.model->config().block_count - 1) == n);
  }
}

// A branch takes its parent's kept rows before the cut: continuing it equals continuing the
// parent. Rows the parent no longer keeps (more than 16 before its end) the branch reads as
// stored, as a sequence attached to a cached prefix does.
TEST_CASE("a branch of a sequence's first tokens keeps the parent's recent rows before the cut", "[engine][recent_rows]") {
  ModelRun m;
  const std::vector<int32_t> tokens = story(*m.model);
  const int32_t n = int32_t(tokens.size());
  const int32_t cut = n - 9;
  KvCache kv = cache_of(*m.model, KvType::INT8, 16);
  const SeqId parent = kv.create_sequence();
  prefill(m, kv, parent, tokens, 0, cut, cut);
  const SeqId branch = kv.fork_prefix(parent, cut - 2);
  CHECK(kv.recent_rows(branch).begin(0) == cut - 16);
  CHECK(kv.recent_rows(branch).end(0) == cut - 2);
  const SeqId twin = kv.fork_prefix(parent, cut);
  const std::vector<float> expected = prefill(m, kv, parent, tokens, cut, n, n);
  const std::vector<float> continued = prefill(m, kv, twin, tokens, cut, n, n);
  CHECK(max_difference(expected, continued) == 0);
  const SeqId early = kv.fork_prefix(parent, n - 17);
  CHECK(kv.recent_rows(early).begin(0) == kv.recent_rows(early).end(0));
  kv.check_invariants();
}

// Every position's logits against f32 KV's: int4 KV with its newest rows exact is much closer
// than with every row quantized (measured over the story's 43 positions: mean squared difference
// 0.0116 against 0.535).
TEST_CASE("reading the newest rows exact brings int4 kv closer to f32 kv", "[engine][recent_rows]") {
  ModelRun m;
  const std::vector<int32_t> tokens = story(*m.model);
  const int32_t n = int32_t(tokens.size());
  const auto logits_of = [&](KvType type, int32_t recent_rows) {
    KvCache kv = cache_of(*m.model, type, recent_rows);
    return prefill(m, kv, kv.create_sequence(), tokens, 0, n, n);
  };
  const std::vector<float> f32 = logits_of(KvType::F32, 0);
  const double all_quantized = mean_squared_difference(f32, logits_of(KvType::INT4, 0));
  const double recent_exact = mean_squared_difference(f32, logits_of(KvType::INT4, 16));
  INFO("mean squared logit difference from f32 KV: every row int4 " << all_quantized << ", newest 16 exact "
                                                                    << recent_exact);
  CHECK(recent_exact < all_quantized / 10);
}
