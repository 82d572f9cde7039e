// kvdesk-bench capacity arithmetic against examples worked by hand: paged blocks round each
// sequence up to its last block, contiguous preallocation reserves the whole context.
#include <catch2/catch.hpp>

#include "app/bench/bench_modes.h"
#include "engine/kv/kv_storage.h"

namespace kvdesk::bench {
namespace {

// 2 layers x 2 (K, V) x 2 kv heads x head dim 8 x 2 bytes (f16): 128 bytes per token.
ModelConfig small_config() {
  ModelConfig c;
  c.architecture = "llama";
  c.context_length = 512;
  c.embedding_length = 16;
  c.block_count = 2;
  c.feed_forward_length = 32;
  c.head_count = 2;
  c.head_count_kv = 2;
  c.head_dim = 8;
  c.rope_dimension_count = 8;
  c.vocab_size = 32;
  return c;
}

const std::vector<int32_t> kLengths{10, 20, 33};

}  // namespace

TEST_CASE("The test config stores 128 bytes per f16 token", "[bench][capacity]") {
  REQUIRE(kv_bytes_per_token(small_config(), KvType::F16, KvType::F16) == 128);
}

TEST_CASE("Paged blocks of 16 reserve 96 slots for lengths 10 20 33 and waste 33", "[bench][capacity]") {
  const size_t budget = 3 * 512 * 128;  // exactly three contiguous contexts
  const CapacityFigures paged = paged_capacity(small_config(), KvType::F16, 16, budget, kLengths);
  CHECK(paged.sequences == 3);
  CHECK(paged.used_tokens == 63);
  CHECK(paged.reserved_tokens == 16 + 32 + 48);
  CHECK(paged.waste_tokens == 33);
  CHECK(paged.waste_pct == Approx(100.0 * 33 / 96));
  CHECK(paged.used_pct == Approx(100.0 * 63 / 96));
  CHECK(paged.pool_used_pct == Approx(100.0 * 63 / 1536));
  CHECK(paged.exhausted);
}

TEST_CASE("Contiguous preallocation reserves 1536 slots for the same lengths and wastes 1473", "[bench][capacity]") {
  const size_t budget = 3 * 512 * 128;
  const CapacityFigures contiguous = contiguous_capacity(small_config(), KvType::F16, budget, kLengths);
  CHECK(contiguous.sequences == 3);
  CHECK(contiguous.used_tokens == 63);
  CHECK(contiguous.reserved_tokens == 1536);
  CHECK(contiguous.waste_tokens == 1473);
  CHECK(contiguous.used_pct == Approx(100.0 * 63 / 1536));
}

TEST_CASE("Other block sizes round the same lengths up to their own blocks", "[bench][capacity]") {
  const size_t budget = 3 * 512 * 128;
  const auto [block, reserved] =
      GENERATE(table<int32_t, int64_t>({{8, 16 + 24 + 40}, {32, 32 + 32 + 64}, {64, 3 * 64}}));
  const CapacityFigures paged = paged_capacity(small_config(), KvType::F16, block, budget, kLengths);
  CHECK(paged.sequences == 3);
  CHECK(paged.reserved_tokens == reserved);
  CHECK(paged.waste_tokens == reserved - 63);
}

TEST_CASE("Paged admission stops at the first sequence the pool cannot hold", "[bench][capacity]") {
  const size_t budget = 5 * 16 * 128;  // five blocks of 16: 10 and 20 take three, 33 needs three more
  const CapacityFigures paged = paged_capacity(small_config(), KvType::F16, 16, budget, kLengths);
  CHECK(paged.sequences == 2);
  CHECK(paged.used_tokens == 30);
  CHECK(paged.reserved_tokens == 48);
  CHECK_FALSE(paged.exhausted);
  const CapacityFigures contiguous = contiguous_capacity(small_config(), KvType::F16, budget, kLengths);
  CHECK(contiguous.sequences == 0);
  CHECK(contiguous.reserved_tokens == 0);
}

TEST_CASE("A budget below one block holds no sequence", "[bench][capacity]") {
  const CapacityFigures paged = paged_capacity(small_config(), KvType::F16, 16, 100, kLengths);
  CHECK(paged.sequences == 0);
  CHECK(paged.reserved_tokens == 0);
}

}  // namespace kvdesk::bench
