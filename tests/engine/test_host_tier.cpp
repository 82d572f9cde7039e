// The host tier alone: exact bytes back (kept as stored or zstd-compressed), the byte budget,
// least-recently-used drops of droppable entries only, and refusals that change nothing.
#include <catch2/catch.hpp>

#include <random>

#include "engine/kv/host_tier.h"

using namespace kvdesk;

namespace {

constexpr size_t kBlock = 1024;

// num_blocks blocks of bytes: random ones (incompressible) or a repeating ramp (compressible).
std::vector<uint8_t> blocks(int32_t num_blocks, uint32_t seed, bool compressible = false) {
  std::vector<uint8_t> bytes(size_t(num_blocks) * kBlock);
  std::mt19937 rng(seed);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = compressible ? uint8_t(i % 7 + seed) : uint8_t(rng());
  return bytes;
}

}  // namespace

TEST_CASE("the host tier gives back the exact bytes, kept as stored or compressed", "[engine][host_tier]") {
  const int32_t level = GENERATE(0, 3);
  const bool compressible = GENERATE(false, true);
  HostTier tier(64 * kBlock, level);
  const std::vector<uint8_t> a = blocks(3, 1, compressible);
  const std::vector<uint8_t> b = blocks(2, 2, compressible);
  REQUIRE(tier.store(10, a, 3, true).stored);
  REQUIRE(tier.store(11, b, 2, false).stored);
  tier.check_invariants();
  HostTierStats s = tier.stats();
  CHECK(s.entries == 2);
  CHECK(s.blocks == 5);
  CHECK(s.stored_bytes == 5 * kBlock);
  if (level > 0 && compressible) {
    CHECK(s.held_bytes < s.stored_bytes / 4);
  } else {
    CHECK(s.held_bytes == s.stored_bytes);   // random bytes do not shrink: kept as stored
  }
  CHECK(tier.peek(10) == a);
  CHECK(tier.take(10) == a);
  CHECK_FALSE(tier.contains(10));
  CHECK(tier.take(11) == b);
  s = tier.stats();
  CHECK(s.entries == 0);
  CHECK(s.held_bytes == 0);
  CHECK(s.swap_outs == 2);
  CHECK(s.swap_ins == 2);
  tier.check_invariants();
}

TEST_CASE("over budget the host tier drops its least recently used droppable entries first", "[engine][host_tier]") {
  HostTier tier(6 * kBlock, 0);
  REQUIRE(tier.store(1, blocks(2, 1), 2, true).stored);
  REQUIRE(tier.store(2, blocks(2, 2), 2, true).stored);
  REQUIRE(tier.store(3, blocks(2, 3), 2, true).stored);
  tier.touch(1);   // 2 is now the least recently used
  HostTier::StoreResult r = tier.store(4, blocks(3, 4), 3, true);
  REQUIRE(r.stored);
  CHECK(r.dropped == std::vector<SeqId>{2, 3});
  CHECK(tier.contains(1));
  CHECK(tier.contains(4));
  CHECK(tier.held_bytes() == 5 * kBlock);
  CHECK(tier.stats().drops == 2);
  tier.check_invariants();
}

TEST_CASE("the host tier never drops a swapped running sequence and refuses what cannot fit", "[engine][host_tier]") {
  HostTier tier(6 * kBlock, 0);
  REQUIRE(tier.store(1, blocks(4, 1), 4, false).stored);
  REQUIRE(tier.store(2, blocks(1, 2), 1, true).stored);
  // 3 blocks would fit only by dropping the running sequence's 4: refused, nothing dropped.
  HostTier::StoreResult r = tier.store(3, blocks(3, 3), 3, false);
  CHECK_FALSE(r.stored);
  CHECK(r.dropped.empty());
  CHECK(tier.contains(1));
  CHECK(tier.contains(2));
  // 2 blocks fit by dropping the parked one.
  r = tier.store(4, blocks(2, 4), 2, true);
  CHECK(r.stored);
  CHECK(r.dropped == std::vector<SeqId>{2});
  CHECK_FALSE(tier.store(5, blocks(7, 5), 7, true).stored);   // larger than the whole budget
  CHECK(tier.stats().refusals == 2);
  tier.erase(1);
  CHECK(tier.held_bytes() == 2 * kBlock);
  tier.check_invariants();
}

TEST_CASE("a host tier with no budget stores nothing", "[engine][host_tier]") {
  HostTier tier(0, 0);
  CHECK_FALSE(tier.enabled());
  CHECK_FALSE(tier.store(1, blocks(1, 1), 1, true).stored);
  CHECK(tier.stats().entries == 0);
}
