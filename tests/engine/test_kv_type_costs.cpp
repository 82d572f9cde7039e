// KV type costs: the bytes-per-token arithmetic (layers x kv heads x (K row + V row)) for every
// type, in all_kv_types() order.
#include <catch2/catch.hpp>

#include "engine/kv/kv_type_costs.h"
#include "kernels/kv_quant.h"

using namespace kvdesk;

TEST_CASE("kv_type_costs follows the bytes-per-token arithmetic for every type", "[engine][kv_costs]") {
  ModelConfig config;
  config.block_count = 5;
  config.head_count_kv = 4;
  config.head_dim = 64;
  const std::vector<KvTypeCost> costs = kv_type_costs(config);
  REQUIRE(costs.size() == all_kv_types().size());
  for (size_t i = 0; i < costs.size(); ++i) {
    CHECK(costs[i].type == all_kv_types()[i]);
    CHECK(costs[i].bytes_per_token == uint64_t(5 * 4 * 2) * kv_row_bytes(costs[i].type, 64));
  }
  CHECK(costs[0].bytes_per_token == 5 * 2 * 4 * 64 * 4);
}
