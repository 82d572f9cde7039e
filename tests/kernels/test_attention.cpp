// Paged attention equals attention over the same keys and values laid out contiguously,
// whatever the block table's order, block size, GQA ratio or length.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "kernels/attention.h"

using namespace kvdesk;

namespace {

// Contiguous reference: k, v [num_tokens][kv_heads][head_dim].
void contiguous_attention(const std::vector<float>& q, const std::vector<float>& k,
                          const std::vector<float>& v, int n, int heads, int kv_heads, int d,
                          std::vector<float>& out) {
  const int group = heads / kv_heads;
  out.assign(size_t(heads) * d, 0.0f);
  for (int h = 0; h < heads; ++h) {
    const int g = h / group;
    std::vector<double> s(n);
    double max_s = -1e30;
    for (int j = 0; j < n; ++j) {
      double dot = 0;
      for (int i = 0; i < d; ++i) dot += double(q[h * d + i]) * k[(size_t(j) * kv_heads + g) * d + i];
      s[j] = dot / std::sqrt(double(d));
      max_s = std::max(max_s, s[j]);
    }
    double sum = 0;
    for (double& x : s) sum += (x = std::exp(x - max_s));
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < d; ++i) out[h * d + i] += float(s[j] / sum * v[(size_t(j) * kv_heads + g) * d + i]);
    }
  }
}

}  // namespace

TEST_CASE("paged attention over shuffled blocks equals contiguous attention", "[kernels][attention]") {
  const int block_size = GENERATE(8, 16, 32, 64);
  const int group = GENERATE(1, 2, 4, 8);
  const int kv_heads = GENERATE(1, 2);
  const int n = GENERATE(1, 37, 130);
  const int d = 16;
  const int heads = kv_heads * group;
  std::mt19937 rng(block_size * 1000 + group * 10 + n);
  std::normal_distribution<float> normal;
  std::vector<float> q(size_t(heads) * d), k(size_t(n) * kv_heads * d), v(k.size());
  for (float& x : q) x = normal(rng);
  for (float& x : k) x = normal(rng);
  for (float& x : v) x = normal(rng);

  const int blocks = (n + block_size - 1) / block_size;
  const int pool_blocks = blocks + 3;
  std::vector<int32_t> table(pool_blocks);
  for (int i = 0; i < pool_blocks; ++i) table[i] = i;
  std::shuffle(table.begin(), table.end(), rng);
  table.resize(blocks);

  PagedKvLayer layer;
  layer.block_size = block_size;
  layer.num_kv_heads = kv_heads;
  layer.head_dim = d;
  std::vector<float> k_store(size_t(pool_blocks) * kv_heads * block_size * d, NAN);
  std::vector<float> v_store(k_store.size(), NAN);
  for (auto [t, store] : {std::pair{&layer.k, &k_store}, std::pair{&layer.v, &v_store}}) {
    t->type = KvType::F32;
    t->data = reinterpret_cast<uint8_t*>(store->data());
    t->row_stride = sizeof(float) * d;
    t->head_stride = t->row_stride * block_size;
    t->block_stride = t->head_stride * kv_heads;
  }
  const PagedSeq seq{table.data(), n};
  for (int j = 0; j < n; ++j) paged_kv_write(layer, seq, j, &k[size_t(j) * kv_heads * d], &v[size_t(j) * kv_heads * d]);

  std::vector<float> expected, out(size_t(heads) * d), scratch(attention_scratch_floats(d));
  contiguous_attention(q, k, v, n, heads, kv_heads, d, expected);
  AttentionArgs args;
  args.q = q.data();
  args.num_heads = heads;
  args.scale = 1.0f / std::sqrt(float(d));
  args.out = out.data();
  args.scratch = scratch.data();
  ref::paged_attention(layer, seq, args);
  for (size_t i = 0; i < out.size(); ++i) {
    INFO("i=" << i);
    CHECK(std::fabs(out[i] - expected[i]) <= 1e-5f * (1.0f + std::fabs(expected[i])));
  }
}
