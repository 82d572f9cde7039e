// BlockPool: free list first, then the least recently used cached block; cached blocks stay
// findable by hash until evicted; a held block is never evicted.
#include <catch2/catch.hpp>

#include "engine/kv/block_pool.h"

using namespace kvdesk;

TEST_CASE("the pool hands out blocks in id order and takes them back", "[engine][block_pool]") {
  BlockPool pool(3);
  CHECK(pool.allocate() == 0);
  CHECK(pool.allocate() == 1);
  CHECK(pool.allocate() == 2);
  CHECK_FALSE(pool.allocate().has_value());
  pool.check_invariants();
  pool.retain(1);
  CHECK(pool.ref_count(1) == 2);
  pool.release(1);
  pool.release(1);
  CHECK(pool.num_free() == 1);
  CHECK(pool.allocate() == 1);
  pool.check_invariants();
}

TEST_CASE("a released published block stays cached and findable", "[engine][block_pool]") {
  BlockPool pool(2);
  const int32_t b = *pool.allocate();
  REQUIRE(pool.publish(b, 77));
  CHECK(pool.find(77) == b);
  pool.release(b);
  pool.check_invariants();
  CHECK(pool.is_cached(b));
  CHECK(pool.num_cached() == 1);
  CHECK(pool.num_free() == 1);
  CHECK(pool.num_available() == 2);
  CHECK(pool.find(77) == b);
  CHECK(pool.block_hash(b) == 77);
}

TEST_CASE("publish refuses a hash another block already carries", "[engine][block_pool]") {
  BlockPool pool(2);
  const int32_t a = *pool.allocate();
  const int32_t b = *pool.allocate();
  REQUIRE(pool.publish(a, 5));
  CHECK_FALSE(pool.publish(b, 5));
  CHECK_FALSE(pool.is_published(b));
  CHECK(pool.find(5) == a);
  pool.release(b);
  CHECK(pool.num_free() == 1);   // unpublished: free, not cached
  pool.check_invariants();
}

TEST_CASE("allocation evicts the least recently used cached block only when none is free", "[engine][block_pool]") {
  BlockPool pool(4);
  for (int32_t b = 0; b < 4; ++b) REQUIRE(pool.allocate() == b);
  for (int32_t b = 0; b < 3; ++b) REQUIRE(pool.publish(b, uint64_t(100 + b)));
  pool.release(2);
  pool.release(0);
  pool.release(1);
  pool.release(3);   // unpublished: free
  CHECK(pool.lru_order() == std::vector<int32_t>{2, 0, 1});
  pool.check_invariants();

  CHECK(pool.allocate() == 3);   // the free block first
  CHECK(pool.num_evictions() == 0);
  CHECK(pool.allocate() == 2);   // then the least recently used cached one
  CHECK(pool.num_evictions() == 1);
  CHECK_FALSE(pool.find(102).has_value());
  CHECK_FALSE(pool.is_published(2));
  CHECK(pool.lru_order() == std::vector<int32_t>{0, 1});
  pool.check_invariants();
}

TEST_CASE("a cache hit leaves the LRU list and returns at the most recently used end", "[engine][block_pool]") {
  BlockPool pool(3);
  for (int32_t b = 0; b < 3; ++b) {
    REQUIRE(pool.allocate() == b);
    REQUIRE(pool.publish(b, uint64_t(b + 1)));
  }
  for (int32_t b = 0; b < 3; ++b) pool.release(b);
  REQUIRE(pool.lru_order() == std::vector<int32_t>{0, 1, 2});
  pool.retain(1);   // removed from the middle
  CHECK(pool.ref_count(1) == 1);
  CHECK(pool.lru_order() == std::vector<int32_t>{0, 2});
  pool.check_invariants();
  pool.release(1);
  CHECK(pool.lru_order() == std::vector<int32_t>{0, 2, 1});
  pool.check_invariants();
}

TEST_CASE("a referenced block is never evicted", "[engine][block_pool]") {
  BlockPool pool(2);
  const int32_t a = *pool.allocate();
  const int32_t b = *pool.allocate();
  REQUIRE(pool.publish(a, 1));
  REQUIRE(pool.publish(b, 2));
  pool.release(b);
  CHECK(pool.allocate() == b);   // evicts the cached one
  CHECK_FALSE(pool.allocate().has_value());
  CHECK(pool.find(1) == a);      // the held, published block stays
  CHECK(pool.ref_count(a) == 1);
  CHECK(pool.num_evictions() == 1);
  pool.check_invariants();
}
