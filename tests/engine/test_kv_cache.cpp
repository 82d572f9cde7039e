// KvCache: block tables grow as tokens are appended, fork shares and copy-on-write separates,
// swapping keeps the exact bytes, and the snapshot's numbers on a hand-computed example.
#include <catch2/catch.hpp>

#include "engine/kv/kv_cache.h"
#include "tests/engine/kv_test_support.h"

using namespace kvdesk;
using namespace kvdesk::test;

TEST_CASE("a sequence takes a block only when a token needs it", "[engine][kv_cache]") {
  KvCache kv(tiny_model(), tiny_cache_config(4));
  const SeqId s = kv.create_sequence();
  CHECK(kv.blocks_needed(s, 1) == 1);
  REQUIRE(kv.append(s, token_range(1, 1)));
  CHECK(kv.block_table(s).size() == 1);
  kv.check_invariants();
  REQUIRE(kv.append(s, token_range(2, 15)));
  CHECK(kv.block_table(s).size() == 1);
  REQUIRE(kv.append(s, token_range(17, 1)));
  CHECK(kv.block_table(s).size() == 2);
  CHECK(kv.tokens(s) == token_range(1, 17));
  kv.check_invariants();
  kv.free_sequence(s);
  CHECK(kv.num_available_blocks() == 4);
  kv.check_invariants();
}

TEST_CASE("append fails without side effects when the pool is short", "[engine][kv_cache]") {
  KvCache kv(tiny_model(), tiny_cache_config(3, 8));
  const SeqId a = kv.create_sequence();
  const SeqId b = kv.create_sequence();
  REQUIRE(kv.append(a, token_range(0, 16)));
  CHECK(kv.blocks_needed(b, 9) == 2);
  CHECK_FALSE(kv.append(b, token_range(0, 9)));
  CHECK(kv.block_table(b).empty());
  CHECK(kv.num_tokens(b) == 0);
  CHECK(kv.num_available_blocks() == 1);
  kv.check_invariants();
}

TEST_CASE("KV bytes per token follow layers x 2 x kv_heads x head_dim x bytes", "[engine][kv_cache]") {
  const ModelConfig c = tiny_model();
  CHECK(kv_bytes_per_token(c, KvType::F32, KvType::F32) == 2u * 2 * 2 * 4 * 4);
  CHECK(kv_bytes_per_token(c, KvType::F16, KvType::F16) == 2u * 2 * 2 * 4 * 2);
  KvCacheConfig config = tiny_cache_config(2);
  config.layout.k_type = KvType::F16;
  config.layout.v_type = KvType::F16;
  KvCache kv(c, config);
  CHECK(kv.bytes_per_token() == kv_bytes_per_token(c, KvType::F16, KvType::F16));
  CHECK(kv.bytes_per_block() == kv.bytes_per_token() * 16);
}

TEST_CASE("mark_computed tracks the computed prefix", "[engine][kv_cache]") {
  KvCache kv(tiny_model(), tiny_cache_config(4));
  const SeqId s = kv.create_sequence();
  REQUIRE(kv.append(s, token_range(0, 20)));
  CHECK(kv.num_computed(s) == 0);
  compute(kv, s, 12);
  CHECK(kv.num_computed(s) == 12);
  kv.check_invariants();
  compute(kv, s);
  CHECK(kv.num_computed(s) == 20);
  CHECK(first_wrong_position(kv, s) == -1);
  kv.check_invariants();
}

TEST_CASE("a fork writing into a shared partial block copies it once and leaves the original intact", "[engine][kv_cache]") {
  KvCache kv(tiny_model(), tiny_cache_config(8));
  const SeqId a = kv.create_sequence();
  REQUIRE(append_and_compute(kv, a, token_range(1, 20)));   // one full block + 4 tokens
  const SeqId b = kv.fork(a);
  kv.check_invariants();
  CHECK(kv.block_table(b) == kv.block_table(a));
  CHECK(kv.num_computed(b) == 20);
  CHECK(kv.snapshot().blocks_shared == 2);

  CHECK(kv.blocks_needed(b, 1) == 1);   // the copy, no new block
  REQUIRE(append_and_compute(kv, b, {99}));
  kv.check_invariants();
  CHECK(kv.snapshot().cow_copies == 1);
  CHECK(kv.block_table(b)[0] == kv.block_table(a)[0]);
  CHECK(kv.block_table(b)[1] != kv.block_table(a)[1]);
  CHECK(kv.tokens(a) == token_range(1, 20));
  CHECK(kv.tokens(b) == concat(token_range(1, 20), {99}));
  CHECK(first_wrong_position(kv, a) == -1);
  CHECK(first_wrong_position(kv, b) == -1);

  // The original now holds its partial block alone: it writes in place.
  REQUIRE(append_and_compute(kv, a, {42}));
  CHECK(kv.snapshot().cow_copies == 1);
  CHECK(first_wrong_position(kv, a) == -1);
  CHECK(first_wrong_position(kv, b) == -1);
  kv.check_invariants();
}

TEST_CASE("a full shared block is never written: appends after it take a new block", "[engine][kv_cache]") {
  KvCache kv(tiny_model(), tiny_cache_config(8));
  const SeqId a = kv.create_sequence();
  REQUIRE(append_and_compute(kv, a, token_range(1, 32)));
  const SeqId b = kv.fork(a);
  CHECK(kv.blocks_needed(b, 1) == 1);
  REQUIRE(append_and_compute(kv, b, {7}));
  CHECK(kv.snapshot().cow_copies == 0);
  CHECK(kv.block_table(b).size() == 3);
  CHECK(std::vector<int32_t>(kv.block_table(b).begin(), kv.block_table(b).begin() + 2) == kv.block_table(a));
  CHECK(first_wrong_position(kv, a) == -1);
  CHECK(first_wrong_position(kv, b) == -1);
  kv.check_invariants();
}

TEST_CASE("swap_out and swap_in restore the exact bytes", "[engine][kv_cache]") {
  KvCache kv(tiny_model(), tiny_cache_config(4));
  const SeqId a = kv.create_sequence();
  REQUIRE(append_and_compute(kv, a, token_range(3, 37)));   // 3 blocks
  const std::vector<int32_t> tokens = kv.tokens(a);
  const std::vector<uint8_t> host = kv.swap_out(a);
  CHECK(host.size() == 3 * kv.bytes_per_block());
  kv.check_invariants();
  CHECK(kv.is_swapped(a));
  CHECK(kv.blocks_to_swap_in(a) == 3);
  CHECK(kv.block_table(a).empty());
  CHECK(kv.num_available_blocks() == 4);

  // Another sequence overwrites the blocks meanwhile; swap_in must wait for room.
  const SeqId b = kv.create_sequence();
  REQUIRE(append_and_compute(kv, b, token_range(500, 40)));
  CHECK_FALSE(kv.swap_in(a, host));
  CHECK(kv.is_swapped(a));
  kv.check_invariants();
  kv.free_sequence(b);

  REQUIRE(kv.swap_in(a, host));
  kv.check_invariants();
  CHECK_FALSE(kv.is_swapped(a));
  CHECK(kv.blocks_to_swap_in(a) == 0);
  CHECK(kv.tokens(a) == tokens);
  CHECK(kv.num_computed(a) == 37);
  CHECK(first_wrong_position(kv, a) == -1);
  REQUIRE(append_and_compute(kv, a, {1, 2, 3}));
  CHECK(first_wrong_position(kv, a) == -1);
  kv.check_invariants();
}

// Three live sequences over blocks of 16 in a context of 256:
//   A: 40 tokens, computed (blocks a0 a1 full, a2 with 8);
//   B: the same first 32 tokens + 3 of its own: attaches a0 a1, one new block with 3;
//   C: fork of A: shares a0 a1 a2.
TEST_CASE("the snapshot's numbers on a hand-computed example", "[engine][kv_cache][stats]") {
  KvCache kv(tiny_model(256), tiny_cache_config(10));
  const std::vector<int32_t> prompt_a = token_range(1, 40);
  const SeqId a = kv.create_sequence();
  CHECK(kv.attach_cached_prefix(a, prompt_a) == 0);
  REQUIRE(append_and_compute(kv, a, prompt_a));
  const std::vector<int32_t> prompt_b = concat(token_range(1, 32), {900, 901, 902});
  const SeqId b = kv.create_sequence();
  CHECK(kv.attach_cached_prefix(b, prompt_b) == 32);
  REQUIRE(append_and_compute(kv, b, {900, 901, 902}));
  const SeqId c = kv.fork(a);
  kv.check_invariants();

  const KvSnapshot s = kv.snapshot();
  const size_t per_token = 2 * 2 * 2 * 4 * 4;   // layers x K,V x kv heads x head_dim x f32
  CHECK(s.bytes_per_token == per_token);
  CHECK(s.bytes_per_block == 16 * per_token);
  CHECK(s.pool_bytes == 10 * 16 * per_token);
  CHECK(s.max_context == 256);
  CHECK(s.blocks_total == 10);
  CHECK(s.blocks_used == 4);
  CHECK(s.blocks_shared == 3);
  CHECK(s.blocks_cached == 0);
  CHECK(s.blocks_free == 6);
  REQUIRE(s.blocks.size() == 10);
  CHECK(s.blocks[size_t(kv.block_table(a)[0])].ref_count == 3);
  CHECK(s.blocks[size_t(kv.block_table(a)[2])].ref_count == 2);
  CHECK(s.blocks[size_t(kv.block_table(a)[2])].filled_tokens == 8);
  CHECK(s.blocks[size_t(kv.block_table(b)[2])].state == BlockState::Used);
  CHECK(s.blocks[size_t(kv.block_table(b)[2])].filled_tokens == 3);
  REQUIRE(s.sequences.size() == 3);
  CHECK(s.sequences[0].seq_id == a);
  CHECK(s.sequences[0].shared_blocks == 3);
  CHECK(s.sequences[1].shared_blocks == 2);
  CHECK(s.sequences[2].num_tokens == 40);

  CHECK(s.tokens_stored == 16 + 16 + 8 + 3);
  CHECK(s.slots_reserved == 64);
  CHECK(s.internal_waste_tokens == 21);
  CHECK(s.internal_waste_bytes == 21 * per_token);
  CHECK(s.internal_waste_pct == Approx(100.0 * 21 / 64));
  CHECK(s.contiguous_reserved_tokens == 3 * 256);
  CHECK(s.contiguous_waste_tokens == 3 * 256 - (40 + 35 + 40));
  CHECK(s.contiguous_waste_bytes == size_t(3 * 256 - 115) * per_token);
  CHECK(s.contiguous_waste_pct == Approx(100.0 * 653 / 768));
  REQUIRE(s.what_if.size() == kKvBlockSizes.size());
  CHECK(s.what_if[0].block_size == 8);
  CHECK(s.what_if[0].waste_tokens == 0 + 5 + 0);
  CHECK(s.what_if[1].waste_tokens == 8 + 13 + 8);
  CHECK(s.what_if[2].waste_tokens == 24 + 29 + 24);
  CHECK(s.what_if[3].block_size == 64);
  CHECK(s.what_if[3].waste_tokens == 24 + 29 + 24);
  CHECK(s.what_if[3].waste_bytes == 77 * per_token);

  CHECK(s.prefix_hits == 2);     // B found a0 a1
  CHECK(s.prefix_misses == 2);   // A looked up 2 full blocks in an empty cache
  CHECK(s.prefix_hit_tokens == 32);
  CHECK(s.prefix_hit_rate == Approx(0.5));
  CHECK(s.evictions == 0);
  CHECK(s.cow_copies == 0);

  for (SeqId seq : {a, b, c}) kv.free_sequence(seq);
  kv.check_invariants();
  const KvSnapshot after = kv.snapshot();
  CHECK(after.blocks_used == 0);
  CHECK(after.blocks_cached == 2);   // a0 a1: full and computed; the partial blocks are free
  CHECK(after.blocks_free == 8);
  CHECK(after.internal_waste_pct == 0);
  CHECK(after.contiguous_reserved_tokens == 0);
  CHECK(after.sequences.empty());
}

TEST_CASE("a fork truncated mid-block shares the full blocks and copies the partial one once at its first write", "[engine][kv_cache]") {
  KvCache kv(tiny_model(), tiny_cache_config(8));
  const SeqId a = kv.create_sequence();
  REQUIRE(append_and_compute(kv, a, token_range(1, 40)));   // two full blocks + 8 tokens
  const SeqId b = kv.fork_prefix(a, 37);
  kv.check_invariants();
  CHECK(kv.tokens(b) == token_range(1, 37));
  CHECK(kv.num_computed(b) == 37);
  CHECK(kv.block_table(b) == kv.block_table(a));
  CHECK(kv.snapshot().forks == 1);
  CHECK(first_wrong_position(kv, b) == -1);

  CHECK(kv.blocks_needed(b, 1) == 1);
  REQUIRE(append_and_compute(kv, b, {99, 98}));
  CHECK(kv.snapshot().cow_copies == 1);
  CHECK(kv.block_table(b)[1] == kv.block_table(a)[1]);
  CHECK(kv.block_table(b)[2] != kv.block_table(a)[2]);
  CHECK(first_wrong_position(kv, a) == -1);
  CHECK(first_wrong_position(kv, b) == -1);
  kv.check_invariants();
}

TEST_CASE("a fork truncated inside a published full block copies it even after the original is freed", "[engine][kv_cache]") {
  KvCache kv(tiny_model(), tiny_cache_config(8));
  const SeqId a = kv.create_sequence();
  REQUIRE(append_and_compute(kv, a, token_range(1, 32)));   // two full, published blocks
  const SeqId b = kv.fork_prefix(a, 20);
  kv.check_invariants();
  CHECK(kv.block_table(b).size() == 2);
  kv.free_sequence(a);
  kv.check_invariants();
  REQUIRE(append_and_compute(kv, b, {77}));
  CHECK(kv.snapshot().cow_copies == 1);
  CHECK(first_wrong_position(kv, b) == -1);

  // The cached block still serves its whole prefix to a new sequence.
  const SeqId c = kv.create_sequence();
  CHECK(kv.attach_cached_prefix(c, token_range(1, 33)) == 32);
  CHECK(first_wrong_position(kv, c) == -1);
  kv.check_invariants();
}

TEST_CASE("a fork truncated at a block boundary copies nothing", "[engine][kv_cache]") {
  KvCache kv(tiny_model(), tiny_cache_config(8));
  const SeqId a = kv.create_sequence();
  REQUIRE(append_and_compute(kv, a, token_range(1, 40)));
  const SeqId b = kv.fork_prefix(a, 32);
  CHECK(kv.block_table(b).size() == 2);
  REQUIRE(append_and_compute(kv, b, {5}));
  CHECK(kv.snapshot().cow_copies == 0);
  CHECK(first_wrong_position(kv, a) == -1);
  CHECK(first_wrong_position(kv, b) == -1);
  kv.check_invariants();
}
