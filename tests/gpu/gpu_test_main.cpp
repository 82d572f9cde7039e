// Main of kvdesk_gpu_tests: without a usable CUDA device it says why and exits with
// kSkipReturnCode (CTest's SKIP_RETURN_CODE for this test), so machines without a GPU report
// "skipped" instead of passing or failing silently.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "kernels/cuda/device.h"

namespace {
constexpr int kSkipReturnCode = 77;   // keep equal to SKIP_RETURN_CODE in CMakeLists.txt
}

int main(int argc, char* argv[]) {
  const kvdesk::cuda::DeviceCount devices = kvdesk::cuda::device_count();
  if (devices.count == 0) {
    std::printf("no CUDA device: %s; skipping the GPU tests\n", devices.reason.c_str());
    return kSkipReturnCode;
  }
  std::printf("CUDA device: %s\n", kvdesk::cuda::device_description().c_str());
  return Catch::Session().run(argc, argv);
}
