// Key smoothing (see key_smoothing.h): when it applies and the measurement of the mean keys.
#include "engine/model/key_smoothing.h"

#include <algorithm>

#include "engine/error.h"
#include "engine/kv/kv_cache.h"
#include "engine/kv/kv_layer_groups.h"
#include "engine/model/model.h"
#include "kernels/attention.h"

namespace kvdesk {

namespace {
constexpr size_t kMeasuredTokens = 256;   // positions the mean is taken over (BOS included)
}  // namespace

bool kv_keys_smoothed(const KvLayout& layout, const ModelConfig& config) {
  const KvType k = layout.k_type;
  const bool quantized = k != KvType::F32 && k != KvType::F16 && k != KvType::BF16;
  return quantized && config.attn_logit_softcap == 0.0f;
}

std::vector<float> measure_key_means(const Model& model, ThreadPool& pool) {
  const ModelConfig& c = model.config();
  std::vector<int32_t> tokens = model.tokenizer().encode(key_smoothing_text(), false);
  if (model.tokenizer().bos_id() >= 0) tokens.insert(tokens.begin(), model.tokenizer().bos_id());
  tokens.resize(std::min({tokens.size(), kMeasuredTokens, size_t(c.context_length)}));
  const int32_t n = int32_t(tokens.size());
  if (n < 2) return {};

  KvCacheConfig config;
  config.prefix_caching = false;
  // Every layer group holds the whole text (nothing is marked computed, so no window lets go).
  config.layout.num_blocks = (n + config.layout.block_size - 1) / config.layout.block_size * kv_layer_groups(c).num_groups;
  KvCache kv(c, config);
  const SeqId seq = kv.create_sequence();
  if (!kv.append(seq, tokens)) throw Error("no KV room to measure the model's mean keys");
  ForwardBatch batch;
  for (int32_t p = 0; p < n; ++p) batch.add(tokens[size_t(p)], p, seq, false);
  std::vector<float> logits;
  model.forward(batch, kv, pool, logits);

  const int32_t KVD = int32_t(c.kv_dim()), HD = c.head_dim;
  std::vector<float> means(static_cast<size_t>(c.block_count) * static_cast<size_t>(KVD), 0.0f);   // [layers][kv_dim]
  std::vector<double> sum(static_cast<size_t>(KVD));   // [kv_dim] one layer's
  std::vector<float> row(static_cast<size_t>(HD));   // [head_dim]
  for (int32_t l = 0; l < c.block_count; ++l) {
    const PagedSeq view = kv.view(seq, n, l);
    std::fill(sum.begin(), sum.end(), 0.0);
    for (int32_t p = 1; p < n; ++p) {
      for (int32_t g = 0; g < c.head_count_kv; ++g) {
        paged_kv_read_k(kv.layer(l), view, p, g, row.data());
        for (int32_t i = 0; i < HD; ++i) sum[size_t(g * HD + i)] += row[size_t(i)];
      }
    }
    for (int32_t i = 0; i < KVD; ++i) means[size_t(l) * size_t(KVD) + size_t(i)] = float(sum[size_t(i)] / (n - 1));
  }
  return means;
}

const char* key_smoothing_text() {
  return "The old lighthouse keeper climbed the stairs every evening to light the lamp. Ships passed the "
         "rocky coast at night, and their captains were glad of the light. One winter a storm broke the "
         "window at the top of the tower, so the keeper carried a heavy lantern up the steps and held it "
         "until morning. When the sun rose, the fishermen came to thank him, and the children of the "
         "village brought him bread, apples and a warm blanket. In the spring the town painted the tower "
         "white again and put new glass in the window. The keeper showed the children how the lamp turned "
         "and how the lens made its small flame shine far over the sea. A girl named Mia asked if she "
         "could help, and every Saturday she cleaned the brass and wrote the weather in the big book. "
         "Years later, when the keeper was too old to climb, Mia lit the lamp herself, and the ships still "
         "found their way home through the dark and the fog.";
}

}  // namespace kvdesk
