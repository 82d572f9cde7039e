// Key smoothing (engine/model/key_smoothing.h): which layouts and models it applies to, and the
// mean keys measured on stories260K: one per layer and kv channel, finite, carrying the large
// constant part of the keys' outlier channel pair that the quantized types then no longer store.
#include <catch2/catch.hpp>

#include <cmath>

#include "engine/model/key_smoothing.h"
#include "engine/model/model.h"
#include "engine/system/thread_pool.h"
#include "tests/test_support.h"

using namespace kvdesk;
using kvdesk::test::model_path;

TEST_CASE("keys are smoothed for quantized kv types of models without soft-capped scores", "[engine][key_smoothing]") {
  ModelConfig config;
  KvLayout layout;
  for (KvType type : all_kv_types()) {
    layout.k_type = type;
    const bool quantized = type != KvType::F32 && type != KvType::F16 && type != KvType::BF16;
    INFO(kv_type_name(type));
    CHECK(kv_keys_smoothed(layout, config) == quantized);
  }
  config.attn_logit_softcap = 50.0f;
  layout.k_type = KvType::INT8;
  CHECK_FALSE(kv_keys_smoothed(layout, config));
}

TEST_CASE("stories260K's mean keys hold its outlier channels and are measured once", "[engine][key_smoothing]") {
  const std::unique_ptr<Model> model = Model::load(model_path("stories260K.gguf"));
  ThreadPool pool(2);
  const ModelConfig& c = model->config();
  const std::vector<float>& means = model->key_means(pool);
  REQUIRE(means.size() == size_t(c.block_count) * size_t(c.kv_dim()));
  float largest = 0;
  for (float m : means) {
    REQUIRE(std::isfinite(m));
    largest = std::fmax(largest, std::fabs(m));
  }
  // Keys reach |k| = 28 in one channel pair among values of a few units; its mean stays large.
  CHECK(largest > 8.0f);
  CHECK(&model->key_means(pool) == &means);
}
