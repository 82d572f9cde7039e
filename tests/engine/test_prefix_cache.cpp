// The prefix cache: sequences with a common prompt share its full blocks, a second turn finds
// its history again, a hash collision never serves another prefix's KV, and eviction takes
// the least recently used unreferenced block.
#include <catch2/catch.hpp>

#include "engine/kv/kv_cache.h"
#include "tests/engine/kv_test_support.h"

namespace kvdesk {

// Test hook (a friend of KvCache): replaces the block hash function.
struct KvCacheTestAccess {
  static void set_block_hash(KvCache& kv, BlockHashFn fn) { kv.block_hash_ = fn; }
};

}  // namespace kvdesk

using namespace kvdesk;
using namespace kvdesk::test;

namespace {

// Creates a sequence, attaches its prompt's cached prefix, appends and computes the rest.
SeqId admit(KvCache& kv, const std::vector<int32_t>& prompt, int32_t* attached = nullptr) {
  const SeqId s = kv.create_sequence();
  const int32_t cached = kv.attach_cached_prefix(s, prompt);
  if (attached) *attached = cached;
  REQUIRE(append_and_compute(kv, s, std::vector<int32_t>(prompt.begin() + cached, prompt.end())));
  kv.check_invariants();
  return s;
}

// The tokens a new sequence would attach for prompt (the probe touches what it finds).
int32_t probe(KvCache& kv, const std::vector<int32_t>& prompt) {
  const SeqId s = kv.create_sequence();
  const int32_t attached = kv.attach_cached_prefix(s, prompt);
  kv.free_sequence(s);
  kv.check_invariants();
  return attached;
}

uint64_t constant_hash(uint64_t, std::span<const int32_t>) { return 42; }
uint64_t parentless_hash(uint64_t, std::span<const int32_t> tokens) { return chain_block_hash(0, tokens); }

}  // namespace

TEST_CASE("two sequences with the same 40-token system prompt share exactly its 2 full blocks", "[engine][kv_cache][prefix]") {
  KvCache kv(tiny_model(), tiny_cache_config(16));
  const std::vector<int32_t> system = token_range(1000, 40);
  int32_t attached = -1;
  const SeqId a = admit(kv, concat(system, {1, 2, 3}), &attached);
  CHECK(attached == 0);
  const SeqId b = admit(kv, concat(system, {7, 8}), &attached);
  CHECK(attached == 32);
  CHECK(kv.num_computed(b) == 42);

  const std::vector<int32_t>& ta = kv.block_table(a);
  const std::vector<int32_t>& tb = kv.block_table(b);
  CHECK(ta[0] == tb[0]);
  CHECK(ta[1] == tb[1]);
  CHECK(ta[2] != tb[2]);
  const KvSnapshot s = kv.snapshot();
  CHECK(s.blocks_shared == 2);
  CHECK(s.blocks_used == 4);
  CHECK(s.prefix_hits == 2);
  CHECK(s.prefix_hit_tokens == 32);
  CHECK(first_wrong_position(kv, a) == -1);
  CHECK(first_wrong_position(kv, b) == -1);
}

TEST_CASE("a second turn attaches every full block of the history and appends only the rest", "[engine][kv_cache][prefix]") {
  KvCache kv(tiny_model(), tiny_cache_config(16));
  const SeqId turn1 = admit(kv, token_range(1, 21));
  for (int32_t t = 0; t < 30; ++t) REQUIRE(append_and_compute(kv, turn1, {500 + t}));   // the answer
  const std::vector<int32_t> history = kv.tokens(turn1);   // 51 tokens: 3 full blocks
  const std::vector<int32_t> history_blocks(kv.block_table(turn1).begin(), kv.block_table(turn1).begin() + 3);
  kv.free_sequence(turn1);
  kv.check_invariants();
  CHECK(kv.snapshot().blocks_cached == 3);

  int32_t attached = -1;
  const SeqId turn2 = admit(kv, concat(history, token_range(800, 10)), &attached);
  CHECK(attached == 48);
  CHECK(std::vector<int32_t>(kv.block_table(turn2).begin(), kv.block_table(turn2).begin() + 3) == history_blocks);
  CHECK(kv.num_tokens(turn2) == 61);
  CHECK(first_wrong_position(kv, turn2) == -1);
  CHECK(kv.snapshot().blocks_cached == 0);
}

TEST_CASE("the last prompt token is always left to compute", "[engine][kv_cache][prefix]") {
  KvCache kv(tiny_model(), tiny_cache_config(8));
  const std::vector<int32_t> prompt = token_range(1, 32);
  kv.free_sequence(admit(kv, prompt));
  int32_t attached = -1;
  const SeqId s = admit(kv, prompt, &attached);
  CHECK(attached == 16);   // the second block holds the last token: computed again
  CHECK(kv.snapshot().prefix_hits == 1);
  CHECK(first_wrong_position(kv, s) == -1);
}

TEST_CASE("a token mismatch under an equal hash is a miss", "[engine][kv_cache][prefix]") {
  KvCache kv(tiny_model(), tiny_cache_config(8));
  KvCacheTestAccess::set_block_hash(kv, constant_hash);
  const SeqId a = admit(kv, token_range(1, 17));
  int32_t attached = -1;
  const SeqId b = admit(kv, token_range(2, 17), &attached);   // looks up hash 42: a's block
  CHECK(attached == 0);
  CHECK(kv.snapshot().prefix_hits == 0);
  CHECK(kv.snapshot().prefix_misses == 2);
  CHECK(first_wrong_position(kv, b) == -1);
  const SeqId c = admit(kv, token_range(1, 17), &attached);   // the same tokens: a hit
  CHECK(attached == 16);
  CHECK(kv.block_table(c)[0] == kv.block_table(a)[0]);
  CHECK(first_wrong_position(kv, c) == -1);
}

TEST_CASE("a colliding block with equal tokens after another prefix is a miss", "[engine][kv_cache][prefix]") {
  KvCache kv(tiny_model(), tiny_cache_config(16));
  KvCacheTestAccess::set_block_hash(kv, parentless_hash);   // block hash ignores the prefix
  const std::vector<int32_t> x = token_range(100, 16), y = token_range(200, 16), z = token_range(300, 16);
  admit(kv, concat(concat(x, z), {1}));   // publishes x, then z after x
  admit(kv, concat(concat(y, z), {1}));   // publishes y; z's hash is taken by z-after-x
  int32_t attached = -1;
  const SeqId c = admit(kv, concat(concat(y, z), {2}), &attached);
  CHECK(attached == 16);   // y hits; z after y must not be served z-after-x's KV
  CHECK(first_wrong_position(kv, c) == -1);
}

TEST_CASE("eviction takes the least recently used cached block and never a referenced one", "[engine][kv_cache][prefix]") {
  KvCache kv(tiny_model(), tiny_cache_config(3, 4));
  const std::vector<int32_t> pa = {1, 1, 1, 1, 9}, pb = {2, 2, 2, 2, 9}, pc = {3, 3, 3, 3, 9};
  kv.free_sequence(admit(kv, pa));   // a's full block cached
  kv.free_sequence(admit(kv, pb));   // b's full block cached, more recently
  REQUIRE(kv.snapshot().blocks_cached == 2);
  CHECK(probe(kv, pa) == 4);         // a hit touches a: b is now the least recently used

  const SeqId c = admit(kv, pc);     // 2 blocks: the free one, then b's evicted
  CHECK(kv.snapshot().evictions == 1);
  CHECK(probe(kv, pb) == 0);
  CHECK(probe(kv, pa) == 4);

  const SeqId d = kv.create_sequence();
  CHECK_FALSE(kv.append(d, std::vector<int32_t>{4, 4, 4, 4, 4}));   // 2 blocks needed, 1 evictable: no change
  CHECK(kv.snapshot().evictions == 1);
  CHECK(probe(kv, pa) == 4);
  REQUIRE(kv.append(d, std::vector<int32_t>{4, 4, 4, 4}));          // evicts a, the last cached block
  CHECK(kv.snapshot().evictions == 2);

  // Every block is referenced now: nothing can be evicted.
  const SeqId e = kv.create_sequence();
  CHECK(kv.num_available_blocks() == 0);
  CHECK_FALSE(kv.append(e, std::vector<int32_t>{5}));
  CHECK(kv.snapshot().evictions == 2);
  CHECK(first_wrong_position(kv, c) == -1);
  kv.check_invariants();
}

TEST_CASE("with prefix caching off nothing is published or attached", "[engine][kv_cache][prefix]") {
  KvCache kv(tiny_model(), tiny_cache_config(8, 16, false));
  const std::vector<int32_t> prompt = token_range(1, 40);
  kv.free_sequence(admit(kv, prompt));
  CHECK(kv.snapshot().blocks_cached == 0);
  int32_t attached = -1;
  admit(kv, prompt, &attached);
  CHECK(attached == 0);
  CHECK(kv.snapshot().prefix_misses == 0);
}

TEST_CASE("the root hash names the cache identity and the KV types", "[engine][kv_cache][prefix]") {
  const uint64_t base = prefix_root_hash(1, KvType::F16, KvType::F16, 16);
  CHECK(base == prefix_root_hash(1, KvType::F16, KvType::F16, 16));
  CHECK(base != prefix_root_hash(2, KvType::F16, KvType::F16, 16));
  CHECK(base != prefix_root_hash(1, KvType::F32, KvType::F16, 16));
  CHECK(base != prefix_root_hash(1, KvType::F16, KvType::BF16, 16));
  CHECK(base != prefix_root_hash(1, KvType::F16, KvType::F16, 32));
  const std::vector<int32_t> tokens = token_range(0, 16);
  CHECK(chain_block_hash(base, tokens) != chain_block_hash(base + 1, tokens));
}
