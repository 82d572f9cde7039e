// HugePageBuffer starts on a 2 MiB boundary (transparent huge pages back only whole aligned
// 2 MiB ranges), is zero-filled and usable to its last byte, and refuses a size it cannot map
// (no wrap-around of the slack it maps); KvStorage keeps every layer slot's K and V in one such
// buffer, each from a cache line boundary, without overlap.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "engine/error.h"
#include "engine/kv/kv_storage.h"
#include "engine/system/huge_page_buffer.h"
#include "tests/engine/kv_test_support.h"

using namespace kvdesk;

TEST_CASE("a huge page buffer starts on a 2 MiB boundary and is zero to its last byte", "[engine][memory]") {
  const size_t bytes = GENERATE(size_t(1), size_t(4095), size_t(2) << 20, (size_t(3) << 20) + 123);
  HugePageBuffer buffer(bytes);
  REQUIRE(buffer.size() == bytes);
  CHECK(reinterpret_cast<uintptr_t>(buffer.get()) % (size_t(2) << 20) == 0);
  CHECK(buffer.get()[0] == 0);
  CHECK(buffer.get()[bytes - 1] == 0);
  buffer.get()[bytes - 1] = 7;
  HugePageBuffer moved(std::move(buffer));
  CHECK(buffer.get() == nullptr);
  CHECK(moved.get()[bytes - 1] == 7);
}

TEST_CASE("a huge page buffer too large to map is refused with a message", "[engine][memory]") {
  const size_t bytes = GENERATE(SIZE_MAX, SIZE_MAX - (size_t(1) << 20), size_t(1) << 62);
  CHECK_THROWS_AS(HugePageBuffer(bytes), Error);
}

TEST_CASE("a KV pool lays every layer's K and V out in one buffer, apart and line-aligned", "[engine][memory]") {
  const ModelConfig config = test::tiny_model();
  KvLayout layout;
  layout.k_type = GENERATE(KvType::F16, KvType::INT4);
  layout.v_type = KvType::INT8;
  layout.block_size = 16;
  layout.num_blocks = 3;
  const KvStorage storage(config, layout);
  const size_t k_bytes = kv_row_bytes(layout.k_type, config.head_dim) * 16 * size_t(config.head_count_kv) * 3;
  const size_t v_bytes = kv_row_bytes(layout.v_type, config.head_dim) * 16 * size_t(config.head_count_kv) * 3;
  const uint8_t* end_of_previous = nullptr;
  for (int32_t l = 0; l < config.block_count; ++l) {
    const PagedKvLayer layer = storage.layer(l);
    CHECK(reinterpret_cast<uintptr_t>(layer.k.data) % 64 == 0);
    CHECK(reinterpret_cast<uintptr_t>(layer.v.data) % 64 == 0);
    CHECK(layer.v.data >= layer.k.data + k_bytes);
    if (end_of_previous) CHECK(layer.k.data >= end_of_previous);
    end_of_previous = layer.v.data + v_bytes;
  }
}
