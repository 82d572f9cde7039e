// The CUDA attention kernels' math run on the host: rows read through the block table with
// fetch8/decode8 and folded in with online_softmax_step (base-2 scores), causally as the
// prefill kernel does, give ref::paged_attention's output for every KV type; and which layers
// the decode launcher sends to its tensor-core kernel. Needs no GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/attention.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kv_codec.cuh"
#include "kernels/cuda/online_softmax.cuh"
#include "kernels/kv_quant.h"

using namespace kvdesk;

namespace {

constexpr int32_t kHeads = 4, kKvHeads = 2, kHeadDim = 64, kBlockSize = 16, kTokens = 70;

// One sequence of kTokens random rows in shuffled blocks, written by the CPU quantizer.
struct HostSequence {
  std::vector<uint8_t> k_store, v_store;
  std::vector<int32_t> table;
  PagedKvLayer layer;

  HostSequence(KvType k_type, KvType v_type) {
    const int32_t blocks = (kTokens + kBlockSize - 1) / kBlockSize;
    table.resize(size_t(blocks));
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), std::mt19937(2));
    layer.block_size = kBlockSize;
    layer.num_kv_heads = kKvHeads;
    layer.head_dim = kHeadDim;
    for (auto [t, store, type] : {std::tuple{&layer.k, &k_store, k_type}, std::tuple{&layer.v, &v_store, v_type}}) {
      t->type = type;
      t->row_stride = kv_row_bytes(type, kHeadDim);
      t->head_stride = t->row_stride * kBlockSize;
      t->block_stride = t->head_stride * kKvHeads;
      store->assign(t->block_stride * size_t(blocks), 0);
      t->data = store->data();
    }
    std::mt19937 rng(5);
    std::normal_distribution<float> normal;
    std::vector<float> k(size_t(kKvHeads) * kHeadDim), v(k.size());
    for (int32_t pos = 0; pos < kTokens; ++pos) {
      for (float& e : k) e = normal(rng);
      for (float& e : v) e = normal(rng);
      paged_kv_write(layer, PagedSeq{table.data(), kTokens}, pos, k.data(), v.data());
    }
  }

  const uint8_t* row(const PagedKvTensor& t, int32_t pos, int32_t kv_head) const {
    return t.data + size_t(table[size_t(pos / kBlockSize)]) * t.block_stride + size_t(kv_head) * t.head_stride +
           size_t(pos % kBlockSize) * t.row_stride;
  }

  std::vector<float> decoded(const PagedKvTensor& t, int32_t pos, int32_t kv_head) const {
    std::vector<float> x(kHeadDim);
    for (int32_t e0 = 0; e0 < kHeadDim; e0 += 8) {
      cuda::RowPart part;
      float values[8];
      cuda::fetch8<cuda::kAnyKvType>(t.type, row(t, pos, kv_head), kHeadDim, e0, part);
      cuda::decode8<cuda::kAnyKvType>(t.type, part, values);
      std::copy(values, values + 8, x.begin() + e0);
    }
    return x;
  }
};

// The prefill kernel's work for one query row: keys [0, position], base-2 online softmax.
std::vector<float> attend_like_kernel(const HostSequence& s, const float* q, int32_t head, int32_t position, float scale) {
  const int32_t kv_head = head / (kHeads / kKvHeads);
  float m = -INFINITY, l = 0.0f;
  std::vector<float> acc(kHeadDim, 0.0f);
  for (int32_t pos = 0; pos <= position; ++pos) {
    const std::vector<float> k = s.decoded(s.layer.k, pos, kv_head), v = s.decoded(s.layer.v, pos, kv_head);
    float dot = 0.0f;
    for (int32_t e = 0; e < kHeadDim; ++e) dot = std::fma(q[e] * (scale * cuda::kLog2e), k[size_t(e)], dot);
    const cuda::SoftmaxStep step = cuda::online_softmax_step(m, l, dot);
    for (int32_t e = 0; e < kHeadDim; ++e) acc[size_t(e)] = std::fma(acc[size_t(e)], step.acc_scale, v[size_t(e)] * step.weight);
  }
  for (float& e : acc) e /= l;
  return acc;
}

}  // namespace

TEST_CASE("CUDA attention math (codec + base-2 online softmax, causal) equals ref::paged_attention", "[cuda_codec][attention]") {
  for (KvType type : all_kv_types()) {
    const HostSequence s(type, type == KvType::F16 ? KvType::INT4 : type);
    std::mt19937 rng(9);
    std::normal_distribution<float> normal;
    std::vector<float> q(size_t(kHeads) * kHeadDim);
    for (float& e : q) e = normal(rng);
    const float scale = 1.0f / std::sqrt(float(kHeadDim));
    std::vector<float> want(q.size()), scratch(size_t(attention_scratch_floats(kHeads, kHeadDim)));
    for (int32_t position : {0, 15, 16, 69}) {
      AttentionArgs args{q.data(), kHeads, scale, want.data(), scratch.data()};
      ref::paged_attention(s.layer, PagedSeq{s.table.data(), position + 1}, args);
      double err = 0, ref = 0;
      for (int32_t h = 0; h < kHeads; ++h) {
        const std::vector<float> got = attend_like_kernel(s, &q[size_t(h) * kHeadDim], h, position, scale);
        for (int32_t e = 0; e < kHeadDim; ++e) {
          const double w = want[size_t(h) * kHeadDim + size_t(e)];
          err += (got[size_t(e)] - w) * (got[size_t(e)] - w);
          ref += w * w;
        }
      }
      INFO(kv_type_name(type) << ", position " << position);
      CHECK(err / ref < 1e-10);
    }
  }
}

TEST_CASE("CUDA paged attention takes tensor cores for one 16-bit-or-narrower KV type at head dims 64, 96 and 128", "[cuda][attention]") {
  const auto layer = [](KvType k, KvType v, int32_t head_dim) {
    PagedKvLayer l;
    l.k.type = k;
    l.v.type = v;
    l.head_dim = head_dim;
    return l;
  };
  for (KvType type : {KvType::F16, KvType::FP8_E4M3, KvType::FP8_E5M2, KvType::INT8, KvType::INT4}) {
    for (int32_t d : {64, 96, 128}) CHECK(cuda::attention_on_tensor_cores(layer(type, type, d)));
    for (int32_t d : {8, 80, 256}) CHECK_FALSE(cuda::attention_on_tensor_cores(layer(type, type, d)));
  }
  CHECK_FALSE(cuda::attention_on_tensor_cores(layer(KvType::F32, KvType::F32, 128)));
  CHECK_FALSE(cuda::attention_on_tensor_cores(layer(KvType::BF16, KvType::BF16, 128)));
  CHECK_FALSE(cuda::attention_on_tensor_cores(layer(KvType::F16, KvType::INT4, 128)));
}
