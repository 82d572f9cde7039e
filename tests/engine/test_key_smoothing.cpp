// Key smoothing (engine/model/key_smoothing.h): which layouts and models it applies to, the mean
// keys and key scales measured on stories260K (one per layer and kv channel, finite, the means
// carrying the large constant part of the keys' outlier channel pair, the scales tied within
// RoPE pairs), and that the transformation of keys and queries leaves attention's softmax as it
// was up to rounding.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/model/key_smoothing.h"
#include "engine/model/model.h"
#include "engine/system/thread_pool.h"
#include "kernels/hadamard.h"
#include "tests/test_support.h"

using namespace kvdesk;
using kvdesk::test::model_path;

namespace {

// softmax(scores[n]) in place.
void softmax(std::vector<float>& scores) {
  const float top = *std::max_element(scores.begin(), scores.end());
  double sum = 0;
  for (float& s : scores) sum += s = std::exp(s - top);
  for (float& s : scores) s = float(s / sum);
}

}  // namespace

TEST_CASE("keys are smoothed for quantized kv types of models without soft-capped scores or sinks", "[engine][key_smoothing]") {
  ModelConfig config;
  KvLayout layout;
  for (KvType type : all_kv_types()) {
    layout.k_type = type;
    const bool quantized = type != KvType::F32 && type != KvType::F16 && type != KvType::BF16;
    INFO(kv_type_name(type));
    CHECK(kv_keys_smoothed(layout, config) == quantized);
    CHECK(kv_keys_scaled(layout, config) == (type == KvType::INT8 || type == KvType::INT4));
  }
  config.attn_logit_softcap = 50.0f;
  layout.k_type = KvType::INT8;
  CHECK_FALSE(kv_keys_smoothed(layout, config));
  CHECK_FALSE(kv_keys_scaled(layout, config));
  // A sink logit is not moved by the shift q·mu that every key's score takes (gpt-oss).
  config.attn_logit_softcap = 0.0f;
  config.traits.attention_sinks = true;
  CHECK_FALSE(kv_keys_smoothed(layout, config));
}

TEST_CASE("stories260K's key smoothing holds its outlier channels, scales per RoPE pair and is measured once",
          "[engine][key_smoothing]") {
  const std::unique_ptr<Model> model = Model::load(model_path("stories260K.gguf"));
  ThreadPool pool(2);
  const ModelConfig& c = model->config();
  const KeySmoothing& s = model->key_smoothing(pool);
  REQUIRE(s.mean.size() == size_t(c.block_count) * size_t(c.kv_dim()));
  REQUIRE(s.scale.size() == s.mean.size());
  REQUIRE(s.inverse_scale.size() == s.mean.size());
  REQUIRE(c.rope_mode == ops::RopeMode::Normal);
  REQUIRE(c.rope_dimension_count == c.head_dim);
  float largest = 0, smallest_scale = INFINITY, largest_scale = 0;
  for (size_t i = 0; i < s.mean.size(); ++i) {
    REQUIRE(std::isfinite(s.mean[i]));
    REQUIRE(std::isfinite(s.scale[i]));
    REQUIRE(s.scale[i] > 0);
    CHECK(s.scale[i] * s.inverse_scale[i] == Approx(1.0f).epsilon(1e-6));
    CHECK(s.scale[i] == s.scale[i ^ 1]);   // adjacent pairs turn together under RoPE
    largest = std::fmax(largest, std::fabs(s.mean[i]));
    smallest_scale = std::fmin(smallest_scale, s.scale[i]);
    largest_scale = std::fmax(largest_scale, s.scale[i]);
  }
  // Keys reach |k| = 28 in one channel pair among values of a few units; its mean stays large.
  CHECK(largest > 8.0f);
  // Some channel pairs carry queries several times larger than the rest, and get finer steps.
  CHECK(largest_scale / smallest_scale > 2.0f);
  CHECK(&model->key_smoothing(pool) == &s);
}

// What an int8 / int4 pool stores and reads: keys (k - mu) / D then rotated, queries D q then
// rotated. Every score moves by the same -q·mu, so the attention weights stay those of the plain
// keys; only rounding differs.
TEST_CASE("smoothed, scaled and rotated keys and queries leave attention weights unchanged", "[engine][key_smoothing]") {
  const std::unique_ptr<Model> model = Model::load(model_path("stories260K.gguf"));
  ThreadPool pool(2);
  const ModelConfig& c = model->config();
  const KeySmoothing& s = model->key_smoothing(pool);
  const int32_t HD = c.head_dim, KVD = c.kv_dim(), QD = c.q_dim(), group = c.head_count / c.head_count_kv;
  constexpr int32_t kKeys = 40;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int32_t l = 0; l < c.block_count; ++l) {
    std::vector<float> q(static_cast<size_t>(QD));   // [heads][head_dim]
    for (float& x : q) x = normal(rng);
    std::vector<float> keys(size_t(kKeys) * size_t(KVD));   // [keys][kv_heads][head_dim]
    for (size_t i = 0; i < keys.size(); ++i) keys[i] = s.mean[size_t(l) * size_t(KVD) + i % size_t(KVD)] + normal(rng);

    std::vector<float> q_stored = q, keys_stored = keys;
    scale_queries(s, l, q_stored.data(), c);
    hadamard_rotate_rows(q_stored.data(), c.head_count, HD);
    for (int32_t j = 0; j < kKeys; ++j) {
      smooth_keys(s, l, true, keys_stored.data() + j * KVD, c);
      hadamard_rotate_rows(keys_stored.data() + j * KVD, c.head_count_kv, HD);
    }
    for (int32_t h = 0; h < c.head_count; ++h) {
      std::vector<float> plain(static_cast<size_t>(kKeys)), stored(static_cast<size_t>(kKeys));   // [keys] scores
      for (int32_t j = 0; j < kKeys; ++j) {
        const int64_t k = int64_t(j) * KVD + (h / group) * HD;
        for (int32_t i = 0; i < HD; ++i) {
          plain[size_t(j)] += q[size_t(h * HD + i)] * keys[size_t(k + i)] * c.attention_scale;
          stored[size_t(j)] += q_stored[size_t(h * HD + i)] * keys_stored[size_t(k + i)] * c.attention_scale;
        }
      }
      softmax(plain);
      softmax(stored);
      for (int32_t j = 0; j < kKeys; ++j) {
        INFO("layer " << l << " head " << h << " key " << j);
        CHECK(stored[size_t(j)] == Approx(plain[size_t(j)]).margin(1e-5));
      }
    }
  }
}
