// device_ms_per_call (see device_timer.h).
#include "tests/gpu/device_timer.h"

#include <cuda_runtime.h>

#include "tests/gpu/device_buffer.h"

namespace kvdesk::gpu_test {

double device_ms_per_call(int runs, const std::function<void()>& launch) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start);
  for (int i = 0; i < runs; ++i) launch();
  cudaEventRecord(stop);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  synchronize();
  return double(ms) / runs;
}

}  // namespace kvdesk::gpu_test
