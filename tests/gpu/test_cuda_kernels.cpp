// CUDA KV kernels against their CPU references: paged_kv_append writes the same bytes as
// paged_kv_write (the scalar quantizer) for every KvType, block copies and the offload
// gather/scatter (device and mapped pinned staging) move whole blocks, batched decode
// attention equals ref::paged_attention per sequence (NMSE) over shuffled block tables, GQA
// ratios 1/4/8 and MQA, lengths that are not a multiple of the block size, short and split long
// sequences, every KvType and a mixed K/V pair, and causal prefill attention equals it per query
// token with and without a cached prefix.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "kernels/attention.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/kv_quant.h"
#include "tests/gpu/device_buffer.h"
#include "tests/gpu/gpu_test_support.h"

using namespace kvdesk;
using gpu_test::nmse;
using gpu_test::DeviceBuffer;

namespace {

struct Shape {
  int32_t heads, kv_heads, head_dim, block_size;
};

// A batch of sequences in one pool of shuffled physical blocks, on the host (written by the CPU
// quantizer) and mirrored on the device. Unused blocks and rows hold 0xFF (NaN in float types).
class PagedBatch {
 public:
  PagedBatch(const Shape& shape, KvType k_type, KvType v_type, const std::vector<int32_t>& lengths, uint32_t seed)
      : shape_(shape), lengths_(lengths), rng_(seed) {
    int32_t blocks = 0;
    for (int32_t n : lengths) blocks += blocks_of(n);
    const int32_t pool_blocks = blocks + 5;
    std::vector<int32_t> ids(static_cast<size_t>(pool_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng_);
    size_t next = 0;
    for (int32_t n : lengths) {
      tables_.emplace_back(ids.begin() + long(next), ids.begin() + long(next) + blocks_of(n));
      next += size_t(blocks_of(n));
    }
    layer_.block_size = shape.block_size;
    layer_.num_kv_heads = shape.kv_heads;
    layer_.head_dim = shape.head_dim;
    init_tensor(layer_.k, k_store_, k_type, pool_blocks);
    init_tensor(layer_.v, v_store_, v_type, pool_blocks);
  }

  int32_t num_seqs() const { return int32_t(lengths_.size()); }
  int32_t max_tokens() const { return *std::max_element(lengths_.begin(), lengths_.end()); }
  const PagedKvLayer& host_layer() const { return layer_; }
  PagedSeq host_seq(int32_t i) const { return PagedSeq{tables_[size_t(i)].data(), lengths_[size_t(i)]}; }
  std::vector<uint8_t>& k_store() { return k_store_; }
  std::vector<uint8_t>& v_store() { return v_store_; }

  // Random rows k, v [tokens][kv_heads][head_dim] of every sequence, in order.
  std::vector<float> random_rows() {
    std::normal_distribution<float> normal;
    std::vector<float> x(size_t(std::accumulate(lengths_.begin(), lengths_.end(), 0)) * shape_.kv_heads * shape_.head_dim);
    for (float& e : x) e = normal(rng_);
    return x;
  }

  // Writes all rows with the CPU quantizer (paged_kv_write).
  void write_on_host(const std::vector<float>& k, const std::vector<float>& v) {
    size_t row = 0;
    const size_t token_floats = size_t(shape_.kv_heads) * shape_.head_dim;
    for (int32_t s = 0; s < num_seqs(); ++s) {
      for (int32_t pos = 0; pos < lengths_[size_t(s)]; ++pos, ++row) {
        paged_kv_write(layer_, host_seq(s), pos, &k[row * token_floats], &v[row * token_floats]);
      }
    }
  }

  // Device copies: pools, block tables and the PagedSeq array (pointing at the device tables).
  struct Device {
    PagedKvLayer layer;
    DeviceBuffer<uint8_t> k, v;
    std::vector<DeviceBuffer<int32_t>> tables;
    DeviceBuffer<PagedSeq> seqs;
  };
  std::unique_ptr<Device> to_device() const {
    auto dev = std::unique_ptr<Device>(new Device{layer_, DeviceBuffer<uint8_t>(k_store_), DeviceBuffer<uint8_t>(v_store_),
                                                  {}, DeviceBuffer<PagedSeq>(lengths_.size())});
    dev->layer.k.data = dev->k.get();
    dev->layer.v.data = dev->v.get();
    std::vector<PagedSeq> seqs;
    for (size_t s = 0; s < lengths_.size(); ++s) {
      dev->tables.emplace_back(tables_[s]);
      seqs.push_back(PagedSeq{dev->tables.back().get(), lengths_[s]});
    }
    dev->seqs.upload(seqs);
    return dev;
  }

 private:
  int32_t blocks_of(int32_t n) const { return (n + shape_.block_size - 1) / shape_.block_size; }

  void init_tensor(PagedKvTensor& t, std::vector<uint8_t>& store, KvType type, int32_t pool_blocks) {
    t.type = type;
    t.row_stride = kv_row_bytes(type, shape_.head_dim);
    t.head_stride = t.row_stride * size_t(shape_.block_size);
    t.block_stride = t.head_stride * size_t(shape_.kv_heads);
    store.assign(t.block_stride * size_t(pool_blocks), 0xFF);
    t.data = store.data();
  }

  Shape shape_;
  std::vector<int32_t> lengths_;
  std::mt19937 rng_;
  std::vector<std::vector<int32_t>> tables_;
  PagedKvLayer layer_;
  std::vector<uint8_t> k_store_, v_store_;
};

// Rows that exercise the quantizers' edge rules: zeros, +-ties for the int4 maximum, values whose
// scales are subnormal or huge, and a NaN.
void add_edge_rows(std::vector<float>& x, int32_t head_dim) {
  const size_t d = size_t(head_dim);
  std::fill(x.begin(), x.begin() + long(d), 0.0f);
  for (size_t i = 0; i < d; ++i) x[d + i] = (i % 3 == 0) ? -2.0f : (i % 3 == 1 ? 2.0f : 0.5f);
  for (size_t i = 0; i < d; ++i) x[2 * d + i] *= 1e-7f;
  for (size_t i = 0; i < d; ++i) x[3 * d + i] *= 3e5f;
  x[4 * d + 5] = NAN;
}

void check_append(const Shape& shape, KvType k_type, KvType v_type) {
  PagedBatch batch(shape, k_type, v_type, {37, 16, 5}, 11);
  std::vector<float> k = batch.random_rows(), v = batch.random_rows();
  add_edge_rows(k, shape.head_dim);
  add_edge_rows(v, shape.head_dim);
  auto dev = batch.to_device();

  std::vector<PagedSeq> item_seqs;
  std::vector<int32_t> positions;
  for (int32_t s = 0; s < batch.num_seqs(); ++s) {
    for (int32_t pos = 0; pos < batch.host_seq(s).num_tokens; ++pos) {
      item_seqs.push_back(PagedSeq{dev->tables[size_t(s)].get(), batch.host_seq(s).num_tokens});
      positions.push_back(pos);
    }
  }
  DeviceBuffer<PagedSeq> d_items(item_seqs);
  DeviceBuffer<int32_t> d_positions(positions);
  DeviceBuffer<float> d_k(k), d_v(v);
  cuda::paged_kv_append(dev->layer, d_items.get(), d_positions.get(), int32_t(positions.size()), d_k.get(), d_v.get());
  gpu_test::synchronize();

  batch.write_on_host(k, v);
  CHECK(dev->k.download() == batch.k_store());
  CHECK(dev->v.download() == batch.v_store());
}

void check_attention(const Shape& shape, KvType k_type, KvType v_type, const std::vector<int32_t>& lengths,
                     int32_t multiprocessors, bool tensor_cores = true) {
  PagedBatch batch(shape, k_type, v_type, lengths, 7);
  batch.write_on_host(batch.random_rows(), batch.random_rows());
  auto dev = batch.to_device();

  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  const size_t per_seq = size_t(shape.heads) * shape.head_dim;
  std::vector<float> q(per_seq * lengths.size());
  for (float& e : q) e = normal(rng);

  std::vector<float> want(q.size());
  std::vector<float> scratch(size_t(attention_scratch_floats(shape.heads, shape.head_dim)));
  const float scale = 1.0f / std::sqrt(float(shape.head_dim));
  for (int32_t s = 0; s < batch.num_seqs(); ++s) {
    AttentionArgs args{&q[size_t(s) * per_seq], shape.heads, scale, &want[size_t(s) * per_seq], scratch.data()};
    ref::paged_attention(batch.host_layer(), batch.host_seq(s), args);
  }

  cuda::AttentionPlan plan =
      cuda::plan_attention(batch.num_seqs(), shape.heads, shape.kv_heads, batch.max_tokens(), multiprocessors);
  plan.tensor_cores = tensor_cores;
  DeviceBuffer<float> d_q(q), d_out(q.size());
  DeviceBuffer<float> d_work(size_t(cuda::attention_workspace_floats(plan, batch.num_seqs(), shape.heads, shape.head_dim)));
  AttentionArgs args{d_q.get(), shape.heads, scale, d_out.get(), d_work.get()};
  cuda::paged_attention(dev->layer, dev->seqs.get(), batch.num_seqs(), batch.max_tokens(), args, plan);
  gpu_test::synchronize();

  // The tensor-core path rounds q, the decoded K/V values and the softmax weights to f16
  // (2^-11 relative): about 3e-7 NMSE on these normal rows, against 1e-2 and more for a wrong
  // row, scale or split. The f32 path rounds only its sums.
  const bool rounded = tensor_cores && cuda::attention_on_tensor_cores(dev->layer);
  INFO("K " << kv_type_name(k_type) << ", V " << kv_type_name(v_type) << ", heads " << shape.heads << "/"
            << shape.kv_heads << ", d " << shape.head_dim << ", splits " << plan.num_splits
            << (rounded ? ", tensor cores" : ", f32"));
  CHECK(nmse(d_out.download(), want) < (rounded ? 1e-5 : 1e-9));
}

// Prefill of the last num_queries of a sequence of num_tokens (the rest a cached prefix) against
// ref::paged_attention per query token over keys [0, its position].
void check_prefill(const Shape& shape, KvType k_type, KvType v_type, int32_t num_tokens, int32_t num_queries) {
  PagedBatch batch(shape, k_type, v_type, {num_tokens}, 13);
  batch.write_on_host(batch.random_rows(), batch.random_rows());
  auto dev = batch.to_device();
  std::mt19937 rng(4);
  std::normal_distribution<float> normal;
  const size_t per_token = size_t(shape.heads) * shape.head_dim;
  std::vector<float> q(per_token * size_t(num_queries));
  for (float& e : q) e = normal(rng);
  std::vector<float> want(q.size());
  std::vector<float> scratch(size_t(attention_scratch_floats(shape.heads, shape.head_dim)));
  const float scale = 1.0f / std::sqrt(float(shape.head_dim));
  const int32_t first = num_tokens - num_queries;
  for (int32_t t = 0; t < num_queries; ++t) {
    AttentionArgs args{&q[size_t(t) * per_token], shape.heads, scale, &want[size_t(t) * per_token], scratch.data()};
    ref::paged_attention(batch.host_layer(), PagedSeq{batch.host_seq(0).block_table, first + t + 1}, args);
  }
  DeviceBuffer<float> d_q(q), d_out(q.size());
  cuda::paged_prefill_attention(dev->layer, PagedSeq{dev->tables[0].get(), num_tokens}, num_queries, d_q.get(), shape.heads,
                                scale, d_out.get());
  gpu_test::synchronize();
  INFO("K " << kv_type_name(k_type) << ", V " << kv_type_name(v_type) << ", heads " << shape.heads << "/" << shape.kv_heads
            << ", d " << shape.head_dim << ", " << num_queries << " of " << num_tokens << " tokens");
  CHECK(nmse(d_out.download(), want) < 1e-9);
}

}  // namespace

TEST_CASE("CUDA prefill attention equals ref:: per query token, with and without a cached prefix", "[cuda][prefill]") {
  for (KvType type : all_kv_types()) {
    check_prefill(Shape{8, 2, 128, 16}, type, type, 300, 300);   // a whole prompt
    check_prefill(Shape{8, 2, 128, 16}, type, type, 300, 37);    // 263 tokens reused from the prefix cache
  }
  check_prefill(Shape{32, 1, 128, 16}, KvType::F16, KvType::F16, 100, 100);   // MQA
  check_prefill(Shape{12, 4, 96, 32}, KvType::F16, KvType::INT4, 77, 20);     // mixed types, block 32
  check_prefill(Shape{8, 8, 80, 16}, KvType::BF16, KvType::FP8_E4M3, 45, 45);
  check_prefill(Shape{16, 8, 256, 16}, KvType::F16, KvType::F16, 70, 33);
  check_prefill(Shape{8, 2, 64, 16}, KvType::INT8, KvType::INT8, 1, 1);       // the first token alone
  check_prefill(Shape{8, 2, 64, 16}, KvType::F32, KvType::F32, 1000, 1);      // one query behind a long prefix
}

TEST_CASE("CUDA prefill attention rejects shapes it cannot run", "[cuda][prefill]") {
  PagedBatch odd_dim(Shape{4, 2, 12, 16}, KvType::F32, KvType::F32, {3}, 1);
  auto odd_dev = odd_dim.to_device();
  const PagedSeq odd_seq{odd_dev->tables[0].get(), 3};
  CHECK_THROWS_AS(cuda::paged_prefill_attention(odd_dev->layer, odd_seq, 3, nullptr, 4, 1.0f, nullptr), std::invalid_argument);
  PagedBatch f16(Shape{4, 2, 64, 16}, KvType::F16, KvType::F16, {3}, 1);
  auto f16_dev = f16.to_device();
  const PagedSeq seq{f16_dev->tables[0].get(), 3};
  CHECK_THROWS_AS(cuda::paged_prefill_attention(f16_dev->layer, seq, 4, nullptr, 4, 1.0f, nullptr), std::invalid_argument);
  CHECK_THROWS_AS(cuda::paged_prefill_attention(f16_dev->layer, seq, 3, nullptr, 5, 1.0f, nullptr), std::invalid_argument);
}

TEST_CASE("CUDA KV append writes the CPU quantizer's bytes for every KV type", "[cuda][kv_append]") {
  for (KvType type : all_kv_types()) {
    for (int32_t d : {64, 80, 128}) {
      INFO(kv_type_name(type) << ", head_dim " << d);
      check_append(Shape{8, 2, d, 16}, type, type);
    }
  }
  check_append(Shape{8, 2, 128, 16}, KvType::F16, KvType::INT4);
}

TEST_CASE("CUDA block copy copies whole K and V blocks", "[cuda][kv_append]") {
  const Shape shape{8, 2, 64, 16};
  PagedBatch batch(shape, KvType::INT8, KvType::F16, {40, 20}, 5);
  batch.write_on_host(batch.random_rows(), batch.random_rows());
  auto dev = batch.to_device();
  const std::vector<int32_t> src = {batch.host_seq(0).block_table[0], batch.host_seq(1).block_table[1]};
  const std::vector<int32_t> dst = {batch.host_seq(0).block_table[2], batch.host_seq(1).block_table[0]};
  DeviceBuffer<int32_t> d_src(src), d_dst(dst);
  cuda::paged_kv_copy_blocks(dev->layer, d_src.get(), d_dst.get(), int32_t(src.size()));
  gpu_test::synchronize();

  for (auto [store, tensor, device] : {std::tuple{&batch.k_store(), batch.host_layer().k, &dev->k},
                                       std::tuple{&batch.v_store(), batch.host_layer().v, &dev->v}}) {
    for (size_t i = 0; i < src.size(); ++i) {
      std::memcpy(store->data() + size_t(dst[i]) * tensor.block_stride, store->data() + size_t(src[i]) * tensor.block_stride,
                  tensor.block_stride);
    }
    CHECK(device->download() == *store);
  }
}

TEST_CASE("CUDA offload gather/scatter moves whole blocks through device or pinned host staging", "[cuda][kv_append]") {
  const Shape shape{8, 2, 80, 16};
  PagedBatch batch(shape, KvType::INT4, KvType::FP8_E4M3, {40, 20}, 9);
  batch.write_on_host(batch.random_rows(), batch.random_rows());
  auto dev = batch.to_device();
  const PagedKvLayer& host = batch.host_layer();
  const std::vector<int32_t> blocks = {batch.host_seq(0).block_table[1], batch.host_seq(1).block_table[0],
                                       batch.host_seq(0).block_table[2]};
  std::vector<uint8_t> want;   // block i's K bytes, then its V bytes
  for (int32_t b : blocks) {
    for (auto [store, t] : {std::pair{&batch.k_store(), host.k}, std::pair{&batch.v_store(), host.v}}) {
      const uint8_t* begin = store->data() + size_t(b) * t.block_stride;
      want.insert(want.end(), begin, begin + t.block_stride);
    }
  }
  const size_t bytes = cuda::offload_staging_bytes(host, int32_t(blocks.size()));
  REQUIRE(bytes == want.size());
  DeviceBuffer<int32_t> d_blocks(blocks);
  DeviceBuffer<uint8_t> staging(bytes);
  cuda::paged_kv_gather_blocks(dev->layer, d_blocks.get(), int32_t(blocks.size()), staging.get());
  gpu_test::synchronize();
  CHECK(staging.download() == want);

  uint8_t* pinned = nullptr;   // mapped pinned host memory: the kernel writes over the bus
  REQUIRE(cudaHostAlloc(reinterpret_cast<void**>(&pinned), bytes, cudaHostAllocMapped) == cudaSuccess);
  cuda::paged_kv_gather_blocks(dev->layer, d_blocks.get(), int32_t(blocks.size()), pinned);
  gpu_test::synchronize();
  CHECK(std::vector<uint8_t>(pinned, pinned + bytes) == want);

  // Scatter the staged blocks back rotated by one: block i's bytes land in block i + 1.
  const std::vector<int32_t> rotated = {blocks[2], blocks[0], blocks[1]};
  DeviceBuffer<int32_t> d_rotated(rotated);
  cuda::paged_kv_scatter_blocks(dev->layer, d_rotated.get(), int32_t(rotated.size()), pinned);
  gpu_test::synchronize();
  cudaFreeHost(pinned);
  size_t offset = 0;
  for (int32_t b : rotated) {
    for (auto [store, t] : {std::pair{&batch.k_store(), host.k}, std::pair{&batch.v_store(), host.v}}) {
      std::memcpy(store->data() + size_t(b) * t.block_stride, want.data() + offset, t.block_stride);
      offset += t.block_stride;
    }
  }
  CHECK(dev->k.download() == batch.k_store());
  CHECK(dev->v.download() == batch.v_store());
}

TEST_CASE("CUDA paged attention equals ref:: for every KV type and GQA ratio", "[cuda][attention]") {
  for (KvType type : all_kv_types()) {
    for (bool tensor_cores : {true, false}) {
      for (int32_t group : {1, 4, 8}) {
        check_attention(Shape{2 * group, 2, 128, 16}, type, type, {1, 37, 300}, 132, tensor_cores);
      }
      check_attention(Shape{8, 2, 64, 32}, type, type, {45, 17}, 132, tensor_cores);
    }
  }
}

TEST_CASE("CUDA paged attention: MQA, mixed K/V types, odd head dims, split long sequences", "[cuda][attention]") {
  check_attention(Shape{32, 1, 128, 16}, KvType::F16, KvType::F16, {200, 5}, 132);
  check_attention(Shape{12, 4, 96, 16}, KvType::F16, KvType::INT4, {77, 130}, 132);
  check_attention(Shape{8, 8, 80, 16}, KvType::BF16, KvType::FP8_E4M3, {99}, 132);
  check_attention(Shape{16, 2, 96, 16}, KvType::INT8, KvType::INT8, {150, 3}, 132);   // 12 pieces a row
  check_attention(Shape{8, 8, 80, 16}, KvType::F16, KvType::F16, {70}, 132);   // no tensor-core build for 80
  check_attention(Shape{32, 2, 64, 16}, KvType::FP8_E5M2, KvType::FP8_E5M2, {129}, 132);   // one full 16-head chunk
  check_attention(Shape{8, 2, 256, 16}, KvType::F16, KvType::F16, {90}, 132);   // past the tensor cores' 128
  for (KvType type : {KvType::F16, KvType::INT8, KvType::INT4}) {
    check_attention(Shape{32, 8, 128, 16}, type, type, {5000, 1203, 64}, 8);    // few SMs: long splits
    check_attention(Shape{32, 8, 128, 16}, type, type, {5000, 1203, 64}, 1000); // many SMs: 64-token splits
  }
}

TEST_CASE("CUDA paged attention rejects shapes it cannot run", "[cuda][attention]") {
  const cuda::AttentionPlan plan = cuda::plan_attention(1, 4, 2, 3, 132);
  AttentionArgs args{nullptr, 4, 1.0f, nullptr, nullptr};
  PagedBatch odd_dim(Shape{4, 2, 12, 16}, KvType::F32, KvType::F32, {3}, 1);
  auto odd_dev = odd_dim.to_device();
  CHECK_THROWS_AS(cuda::paged_attention(odd_dev->layer, odd_dev->seqs.get(), 1, 3, args, plan), std::invalid_argument);

  PagedBatch f16(Shape{4, 2, 64, 16}, KvType::F16, KvType::F16, {3}, 1);
  auto f16_dev = f16.to_device();
  args.numerics = AttentionNumerics::LlamaCpp;
  CHECK_THROWS_AS(cuda::paged_attention(f16_dev->layer, f16_dev->seqs.get(), 1, 3, args, plan), std::invalid_argument);
  CHECK_THROWS_AS(cuda::plan_attention(1, 5, 2, 3, 132), std::invalid_argument);
}
