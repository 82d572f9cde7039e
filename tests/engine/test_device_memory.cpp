// The device memory split (engine/backend/device_memory.h) against hand-computed examples: what other
// processes hold comes off the budget, weights and activations come first, the KV pool is
// whole blocks, and every impossible split is an Error that names its figures.
#include <catch2/catch.hpp>

#include "engine/backend/device_memory.h"
#include "engine/error.h"

using namespace kvdesk;

namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kMiB = uint64_t{1} << 20;

// An 80 GiB device with 2 GiB held elsewhere, a 13.5 GiB model, 1 GiB of activations and
// blocks of 2 MiB (a 7B model's 16 tokens of f16 K and V).
DeviceMemoryInputs example() {
  DeviceMemoryInputs in;
  in.total_bytes = 80 * kGiB;
  in.free_bytes = 78 * kGiB;
  in.utilization = 0.9;
  in.weight_bytes = 13 * kGiB + 512 * kMiB;
  in.activation_bytes = 1 * kGiB;
  in.kv_bytes_per_block = 2 * kMiB;
  return in;
}

}  // namespace

TEST_CASE("the KV pool gets what utilization leaves after others, weights and activations", "[device_memory]") {
  const DeviceMemoryPlan plan = plan_device_memory(example());
  // 0.9 x 80 GiB = 72 GiB; less 2 GiB of others = 70 GiB; less 14.5 GiB = 55.5 GiB = 28416 blocks.
  CHECK(plan.others_bytes == 2 * kGiB);
  CHECK(plan.budget_bytes == 70 * kGiB);
  CHECK(plan.kv_blocks == 28416);
  CHECK(plan.kv_bytes == uint64_t(28416) * 2 * kMiB);
}

TEST_CASE("the KV pool is whole blocks, capped at the engine's block id limit", "[device_memory]") {
  DeviceMemoryInputs in = example();
  in.kv_bytes_per_block = 3 * kMiB;   // 55.5 GiB / 3 MiB = 18944 blocks exactly
  CHECK(plan_device_memory(in).kv_blocks == 18944);
  in.kv_bytes_per_block = 3 * kMiB + 1;   // one byte more: one block fewer
  CHECK(plan_device_memory(in).kv_blocks == 18943);
  in.kv_bytes_per_block = 1;
  CHECK(plan_device_memory(in).kv_blocks == 1 << 24);
  CHECK(plan_device_memory(in).kv_bytes == uint64_t(1) << 24);
}

TEST_CASE("a device that others fill past the utilization leaves no budget", "[device_memory]") {
  DeviceMemoryInputs in = example();
  in.free_bytes = 8 * kGiB;   // 72 GiB held by others, as much as 0.9 allows
  CHECK_THROWS_WITH(plan_device_memory(in), Catch::Contains("do not fit in the 0.0 MiB of device memory") &&
                                                 Catch::Contains("73728.0 MiB already in use"));
}

TEST_CASE("weights that do not fit, or no room for one block, are errors naming the figures", "[device_memory]") {
  DeviceMemoryInputs in = example();
  in.weight_bytes = 70 * kGiB;
  CHECK_THROWS_WITH(plan_device_memory(in), Catch::Contains("the weights (71680.0 MiB) and activations (1024.0 MiB)") &&
                                                 Catch::Contains("utilization 0.9 of 81920.0 MiB") &&
                                                 Catch::Contains("raise the GPU memory utilization"));
  in.weight_bytes = 69 * kGiB - 1 * kMiB;   // 1 MiB left: less than a 2 MiB block
  CHECK_THROWS_WITH(plan_device_memory(in), Catch::Contains("no KV block of 2097152 bytes fits"));
  in.weight_bytes = 69 * kGiB - 2 * kMiB;   // exactly one block
  CHECK(plan_device_memory(in).kv_blocks == 1);
}

TEST_CASE("utilization outside (0, 1] and free above total are refused", "[device_memory]") {
  for (double u : {0.0, -0.5, 1.01}) {
    DeviceMemoryInputs in = example();
    in.utilization = u;
    CHECK_THROWS_AS(plan_device_memory(in), Error);
  }
  DeviceMemoryInputs full = example();
  full.utilization = 1.0;
  CHECK(plan_device_memory(full).budget_bytes == 78 * kGiB);
  DeviceMemoryInputs odd = example();
  odd.free_bytes = odd.total_bytes + 1;
  CHECK_THROWS_WITH(plan_device_memory(odd), Catch::Contains("free of"));
}
