// How a GPU's memory is split between the model and the KV pool, as vLLM's
// gpu-memory-utilization: this process may hold utilization x total bytes of the device, less
// what others already hold (total - free before loading); of that, the weights and the
// activations come first and the rest is the KV pool, in whole blocks. Pure arithmetic, so the
// CUDA path and `info` use the same numbers and tests check them without a GPU.
#pragma once
#include <cstdint>
#include <string>

#include "engine/engine_types.h"

namespace kvdesk {

struct DeviceMemoryInputs {
  uint64_t free_bytes = 0;           // free device memory before the model loads
  uint64_t total_bytes = 0;          // the device's memory
  double utilization = 0.9;          // share of total this process may hold, in (0, 1]
  uint64_t weight_bytes = 0;
  uint64_t activation_bytes = 0;     // the forward pass's buffers at their largest
  uint64_t kv_bytes_per_block = 0;   // K and V of one block over all layers
};

struct DeviceMemoryPlan {
  uint64_t others_bytes = 0;   // total - free: held by other processes (or contexts)
  uint64_t budget_bytes = 0;   // utilization x total - others: what this process may take
  uint64_t kv_bytes = 0;       // kv_blocks x kv_bytes_per_block
  int32_t kv_blocks = 0;       // at least 1; at most 2^24 (the engine's block id limit)
};

// Throws kvdesk::Error naming the figures when the utilization is outside (0, 1], free exceeds
// total, the weights and activations do not fit the budget, or not one KV block fits after them.
DeviceMemoryPlan plan_device_memory(const DeviceMemoryInputs& in);

}  // namespace kvdesk
