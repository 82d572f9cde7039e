// CUDA device discovery and error reporting (see device.h).
#include "kernels/cuda/device.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>
#include <stdexcept>

namespace kvdesk::cuda {
namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

// The runtime says "driver version is insufficient" both when NVIDIA's driver library is missing
// (most machines without an NVIDIA GPU) and when it is older than the runtime: which one it is
// decides what the user can do.
std::string insufficient_driver_reason() {
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!driver) return "no NVIDIA driver is installed (libcuda.so.1 not found)";
  dlclose(driver);
  return "NVIDIA's driver is older than this build's CUDA runtime " + std::to_string(CUDART_VERSION / 1000) + "." +
         std::to_string(CUDART_VERSION % 1000 / 10) + ": update the driver";
}

}  // namespace

DeviceCount device_count() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();   // clear the sticky error of a failed runtime init
    return DeviceCount{0, err == cudaErrorInsufficientDriver ? insufficient_driver_reason() : cudaGetErrorString(err)};
  }
  if (count == 0) return DeviceCount{0, "the CUDA runtime reports no device"};
  return DeviceCount{count, {}};
}

int multiprocessor_count() {
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "cudaDeviceGetAttribute");
  return sms;
}

std::string device_description() {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  char text[320];
  std::snprintf(text, sizeof(text), "%s, sm_%d%d, %.1f GiB", prop.name, prop.major, prop.minor,
                double(prop.totalGlobalMem) / double(1ull << 30));
  return text;
}

void check_last_error(const char* what) { check(cudaGetLastError(), what); }

}  // namespace kvdesk::cuda
