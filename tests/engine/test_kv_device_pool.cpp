// A KV pool whose bytes live outside KvStorage (KvCacheConfig::device_pool, as the CUDA
// backend's CudaKvPool): the layer views point into it and every byte operation KvCache decides
// on (copy-on-write, swap out and in) goes to it, so the host bookkeeping and the pool's bytes
// stay one cache. The pool here is ordinary memory standing where device memory would be, which
// lets the prefix-checking forward stand-in of kv_test_support.h read the bytes back.
#include <catch2/catch.hpp>

#include <cstring>

#include "engine/error.h"
#include "engine/kv/kv_cache.h"
#include "tests/engine/kv_test_support.h"

using namespace kvdesk;
using namespace kvdesk::test;

namespace {

struct PoolCalls {
  int copies = 0;
  int saves = 0;
  int loads = 0;
};

// KvDevicePool over host vectors, counting the operations KvStorage forwards.
class SeparatePool final : public KvDevicePool {
 public:
  SeparatePool(const KvPoolShape& shape, PoolCalls& calls) : shape_(shape), calls_(calls) {
    for (int32_t l = 0; l < shape.num_layers; ++l) {
      k_.emplace_back(shape.k_block_bytes * size_t(shape.num_blocks), 0);
      v_.emplace_back(shape.v_block_bytes * size_t(shape.num_blocks), 0);
    }
  }
  uint8_t* k_data(int32_t layer) const override { return const_cast<uint8_t*>(k_[size_t(layer)].data()); }
  uint8_t* v_data(int32_t layer) const override { return const_cast<uint8_t*>(v_[size_t(layer)].data()); }
  void copy_block(int32_t src, int32_t dst) override {
    ++calls_.copies;
    for (int32_t l = 0; l < shape_.num_layers; ++l) {
      std::memcpy(k_data(l) + size_t(dst) * shape_.k_block_bytes, k_data(l) + size_t(src) * shape_.k_block_bytes,
                  shape_.k_block_bytes);
      std::memcpy(v_data(l) + size_t(dst) * shape_.v_block_bytes, v_data(l) + size_t(src) * shape_.v_block_bytes,
                  shape_.v_block_bytes);
    }
  }
  void save_block(int32_t block, uint8_t* dst) const override {
    ++calls_.saves;
    for (int32_t l = 0; l < shape_.num_layers; ++l) {
      std::memcpy(dst, k_data(l) + size_t(block) * shape_.k_block_bytes, shape_.k_block_bytes);
      dst += shape_.k_block_bytes;
      std::memcpy(dst, v_data(l) + size_t(block) * shape_.v_block_bytes, shape_.v_block_bytes);
      dst += shape_.v_block_bytes;
    }
  }
  void load_block(int32_t block, const uint8_t* src) override {
    ++calls_.loads;
    for (int32_t l = 0; l < shape_.num_layers; ++l) {
      std::memcpy(k_data(l) + size_t(block) * shape_.k_block_bytes, src, shape_.k_block_bytes);
      src += shape_.k_block_bytes;
      std::memcpy(v_data(l) + size_t(block) * shape_.v_block_bytes, src, shape_.v_block_bytes);
      src += shape_.v_block_bytes;
    }
  }

 private:
  KvPoolShape shape_;
  PoolCalls& calls_;
  std::vector<std::vector<uint8_t>> k_;   // [layers][num_blocks * k_block_bytes]
  std::vector<std::vector<uint8_t>> v_;   // [layers][num_blocks * v_block_bytes]
};

KvCacheConfig separate_pool_config(int32_t num_blocks, PoolCalls& calls, const SeparatePool** made) {
  KvCacheConfig config = tiny_cache_config(num_blocks);
  config.device_pool = [&calls, made](const KvPoolShape& shape) {
    auto pool = std::make_unique<SeparatePool>(shape, calls);
    *made = pool.get();
    return pool;
  };
  return config;
}

}  // namespace

TEST_CASE("a device KV pool holds the bytes: views, copy-on-write and swapping go to it", "[engine][kv_cache]") {
  PoolCalls calls;
  const SeparatePool* pool = nullptr;
  KvCache kv(tiny_model(), separate_pool_config(8, calls, &pool));
  REQUIRE(pool != nullptr);
  CHECK(kv.on_device());
  CHECK(kv.layer(1).k.data == pool->k_data(1));
  CHECK(kv.layer(0).v.data == pool->v_data(0));

  const SeqId a = kv.create_sequence();
  REQUIRE(append_and_compute(kv, a, token_range(1, 20)));   // one full block + 4 tokens
  const SeqId b = kv.fork(a);
  REQUIRE(append_and_compute(kv, b, {99}));                 // copy-on-write of the shared partial block
  CHECK(calls.copies == 1);
  CHECK(first_wrong_position(kv, a) == -1);
  CHECK(first_wrong_position(kv, b) == -1);

  const std::vector<uint8_t> host = kv.swap_out(a);
  CHECK(host.size() == 2 * kv.bytes_per_block());
  CHECK(calls.saves == 2);
  REQUIRE(kv.swap_in(a, host));
  CHECK(calls.loads == 2);
  CHECK(first_wrong_position(kv, a) == -1);
  kv.check_invariants();
}

TEST_CASE("KV retention is refused for a pool in device memory", "[engine][kv_cache]") {
  PoolCalls calls;
  const SeparatePool* pool = nullptr;
  KvCache kv(tiny_model(), separate_pool_config(4, calls, &pool));
  const SeqId s = kv.create_sequence();
  RetentionOptions options;
  options.policy = RetentionPolicy::Sinks;
  CHECK_THROWS_AS(kv.set_retention(s, options, 0), Error);
  kv.set_retention(s, RetentionOptions{}, 0);   // switching it off is fine
  CHECK(kv.retention(s) == nullptr);
}
