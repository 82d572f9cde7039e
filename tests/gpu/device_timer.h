// Device time of a repeated launch, for the GPU speed runs: CUDA events around `runs` calls
// (which only enqueue work), so host overhead between launches is not counted.
#pragma once
#include <functional>

namespace kvdesk::gpu_test {

// Milliseconds of device time per call of launch, over runs calls after the caller's warm-up;
// throws std::runtime_error when the device reports an error.
double device_ms_per_call(int runs, const std::function<void()>& launch);

}  // namespace kvdesk::gpu_test
