// KvCache and BlockPool: blocks are taken when tokens need them, returned when sequences end,
// and ref counts always equal the number of tables holding a block.
#include <catch2/catch.hpp>

#include "engine/kv_cache.h"

using namespace kvdesk;

namespace {

ModelConfig small_config() {
  ModelConfig c;
  c.block_count = 3;
  c.head_count = 8;
  c.head_count_kv = 2;
  c.head_dim = 16;
  c.embedding_length = 128;
  return c;
}

}  // namespace

TEST_CASE("a sequence takes a block only when a token needs it", "[engine][kv_cache]") {
  KvLayout options;
  options.block_size = 16;
  options.num_blocks = 4;
  KvCache kv(small_config(), options);
  const SeqId s = kv.create_sequence();
  REQUIRE(kv.reserve(s, 1));
  CHECK(kv.block_table(s).size() == 1);
  REQUIRE(kv.reserve(s, 16));
  CHECK(kv.block_table(s).size() == 1);
  REQUIRE(kv.reserve(s, 17));
  CHECK(kv.block_table(s).size() == 2);
  kv.check_invariants();
  kv.free_sequence(s);
  CHECK(kv.pool().num_free() == 4);
  kv.check_invariants();
}

TEST_CASE("reserve fails without side effects when the pool is short", "[engine][kv_cache]") {
  KvLayout options;
  options.block_size = 8;
  options.num_blocks = 3;
  KvCache kv(small_config(), options);
  const SeqId a = kv.create_sequence();
  const SeqId b = kv.create_sequence();
  REQUIRE(kv.reserve(a, 16));
  CHECK_FALSE(kv.reserve(b, 9));
  CHECK(kv.block_table(b).empty());
  CHECK(kv.pool().num_free() == 1);
  kv.check_invariants();
}

TEST_CASE("KV bytes per token follow layers x 2 x kv_heads x head_dim x bytes", "[engine][kv_cache]") {
  const ModelConfig c = small_config();
  CHECK(kv_bytes_per_token(c, KvType::F32, KvType::F32) == 3u * 2 * 2 * 16 * 4);
  CHECK(kv_bytes_per_token(c, KvType::F16, KvType::F16) == 3u * 2 * 2 * 16 * 2);
  KvLayout options;
  options.k_type = KvType::F16;
  options.v_type = KvType::F16;
  options.num_blocks = 2;
  KvCache kv(c, options);
  CHECK(kv.bytes_per_token() == kv_bytes_per_token(c, KvType::F16, KvType::F16));
  CHECK(kv.bytes_per_block() == kv.bytes_per_token() * 16);
}
