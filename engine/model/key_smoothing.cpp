// Key smoothing (see key_smoothing.h): when it applies, the measurement of the mean keys and the
// key scales, and the transformation of one token's keys and queries.
#include "engine/model/key_smoothing.h"

#include <algorithm>
#include <cmath>

#include "engine/error.h"
#include "engine/kv/kv_cache.h"
#include "engine/kv/kv_layer_groups.h"
#include "engine/model/model.h"
#include "kernels/attention.h"

namespace kvdesk {

namespace {

constexpr size_t kMeasuredTokens = 256;   // positions the statistics are taken over (BOS included)

// The channel RoPE turns together with channel i of a head; i itself past the rotated ones.
int32_t rope_partner(int32_t i, int32_t n_rot, ops::RopeMode mode) {
  if (i >= n_rot) return i;
  if (mode == ops::RopeMode::Neox) return i < n_rot / 2 ? i + n_rot / 2 : i - n_rot / 2;
  return i ^ 1;
}

// D of one channel from the mean squares of k - mu and of the queries: (sigma_k / sigma_q)^(1/2);
// 1 where either is zero or not finite (a channel the text never used).
float key_channel_scale(double key_variance, double query_mean_square) {
  const double d = std::sqrt(std::sqrt(key_variance / query_mean_square));
  return std::isfinite(d) && d > 0 ? float(d) : 1.0f;
}

// One layer's keys over positions 1..n-1 of the measured sequence: mean and variance per channel,
// each [kv_dim].
void key_moments(const KvCache& kv, SeqId seq, int32_t n, int32_t layer, const ModelConfig& c,
                 std::vector<double>& mean, std::vector<double>& variance) {
  const int32_t HD = c.head_dim;
  const PagedSeq view = kv.view(seq, n, layer);
  std::vector<double> sum(size_t(c.kv_dim()), 0.0), squares(size_t(c.kv_dim()), 0.0);   // [kv_dim]
  std::vector<float> row(static_cast<size_t>(HD));   // [head_dim]
  for (int32_t p = 1; p < n; ++p) {
    for (int32_t g = 0; g < c.head_count_kv; ++g) {
      paged_kv_read_k(kv.layer(layer), view, p, g, row.data());
      for (int32_t i = 0; i < HD; ++i) {
        sum[size_t(g * HD + i)] += row[size_t(i)];
        squares[size_t(g * HD + i)] += double(row[size_t(i)]) * row[size_t(i)];
      }
    }
  }
  mean.resize(sum.size());
  variance.resize(sum.size());
  for (size_t i = 0; i < sum.size(); ++i) {
    mean[i] = sum[i] / (n - 1);
    variance[i] = std::max(squares[i] / (n - 1) - mean[i] * mean[i], 0.0);
  }
}

}  // namespace

bool kv_keys_smoothed(const KvLayout& layout, const ModelConfig& config) {
  return kv_type_low_bit(layout.k_type) && config.attn_logit_softcap == 0.0f && !config.traits.attention_sinks;
}

bool kv_keys_scaled(const KvLayout& layout, const ModelConfig& config) {
  return kv_keys_smoothed(layout, config) && (layout.k_type == KvType::INT8 || layout.k_type == KvType::INT4);
}

KeySmoothing measure_key_smoothing(const Model& model, ThreadPool& pool) {
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
  const size_t KVD = size_t(c.kv_dim());
  std::vector<double> query_squares(size_t(c.block_count) * KVD, 0.0);   // [layers][kv_dim]
  model.forward_measuring_queries(batch, kv, pool, logits, query_squares);

  const int32_t HD = c.head_dim;
  const int32_t group = c.head_count / c.head_count_kv;
  KeySmoothing s;
  s.mean.resize(size_t(c.block_count) * KVD);
  s.scale.resize(s.mean.size());
  s.inverse_scale.resize(s.mean.size());
  std::vector<double> mean, variance;   // [kv_dim] one layer's
  for (int32_t l = 0; l < c.block_count; ++l) {
    key_moments(kv, seq, n, l, c, mean, variance);
    const size_t layer = size_t(l) * KVD;
    for (size_t i = 0; i < KVD; ++i) {
      const size_t partner = i - i % size_t(HD) + size_t(rope_partner(int32_t(i % size_t(HD)), c.rope_dimension_count, c.rope_mode));
      const double key_variance = (variance[i] + variance[partner]) / 2;
      const double query_mean_square = (query_squares[layer + i] + query_squares[layer + partner]) / (2.0 * group * (n - 1));
      s.mean[layer + i] = float(mean[i]);
      s.scale[layer + i] = key_channel_scale(key_variance, query_mean_square);
      s.inverse_scale[layer + i] = 1.0f / s.scale[layer + i];
    }
  }
  return s;
}

void smooth_keys(const KeySmoothing& s, int32_t layer, bool scaled, float* k, const ModelConfig& c) {
  const int64_t KVD = c.kv_dim();
  const float* mean = s.mean.data() + layer * KVD;
  const float* inverse_scale = s.inverse_scale.data() + layer * KVD;
  for (int64_t i = 0; i < KVD; ++i) k[i] -= mean[i];
  if (scaled) {
    for (int64_t i = 0; i < KVD; ++i) k[i] *= inverse_scale[i];
  }
}

void scale_queries(const KeySmoothing& s, int32_t layer, float* q, const ModelConfig& c) {
  const int32_t HD = c.head_dim;
  const int32_t group = c.head_count / c.head_count_kv;
  const float* scale = s.scale.data() + int64_t(layer) * c.kv_dim();
  for (int32_t h = 0; h < c.head_count; ++h) {
    const float* head_scale = scale + (h / group) * HD;
    for (int32_t i = 0; i < HD; ++i) q[h * HD + i] *= head_scale[i];
  }
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
