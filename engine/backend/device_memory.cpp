// The device memory split (see device_memory.h).
#include "engine/backend/device_memory.h"

#include <cmath>
#include <string>

#include "engine/error.h"
#include "engine/system/memory_limit.h"
#include "kernels/check.h"

namespace kvdesk {
namespace {

constexpr uint64_t kMaxBlocks = uint64_t{1} << 24;

std::string utilization_text(double u) {
  std::string s = std::to_string(u);
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

DeviceMemoryPlan plan_device_memory(const DeviceMemoryInputs& in) {
  if (!(in.utilization > 0.0 && in.utilization <= 1.0)) {
    throw Error("the GPU memory utilization must be in (0, 1], not " + utilization_text(in.utilization));
  }
  if (in.free_bytes > in.total_bytes) {
    throw Error("the device reports " + mib_text(in.free_bytes) + " free of " + mib_text(in.total_bytes) + " in all");
  }
  KVDESK_ASSERT(in.kv_bytes_per_block > 0);
  DeviceMemoryPlan plan;
  plan.others_bytes = in.total_bytes - in.free_bytes;
  const uint64_t allowed = uint64_t(std::floor(double(in.total_bytes) * in.utilization));
  plan.budget_bytes = allowed > plan.others_bytes ? allowed - plan.others_bytes : 0;
  const uint64_t model_bytes = in.weight_bytes + in.activation_bytes;
  const std::string budget_text = mib_text(plan.budget_bytes) + " of device memory this process may use (utilization " +
                                  utilization_text(in.utilization) + " of " + mib_text(in.total_bytes) + ", " +
                                  mib_text(plan.others_bytes) + " already in use)";
  if (model_bytes > plan.budget_bytes) {
    throw Error("the weights (" + mib_text(in.weight_bytes) + ") and activations (" + mib_text(in.activation_bytes) +
                ") do not fit in the " + budget_text + "; raise the GPU memory utilization or use a smaller model");
  }
  const uint64_t blocks = (plan.budget_bytes - model_bytes) / in.kv_bytes_per_block;
  if (blocks < 1) {
    throw Error("no KV block of " + std::to_string(in.kv_bytes_per_block) + " bytes fits beside the weights and activations in the " +
                budget_text);
  }
  plan.kv_blocks = int32_t(blocks < kMaxBlocks ? blocks : kMaxBlocks);
  plan.kv_bytes = uint64_t(plan.kv_blocks) * in.kv_bytes_per_block;
  return plan;
}

}  // namespace kvdesk
