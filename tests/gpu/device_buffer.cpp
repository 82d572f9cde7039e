// Device memory for the GPU tests (see device_buffer.h).
#include "tests/gpu/device_buffer.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace kvdesk::gpu_test {
namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

}  // namespace

DeviceBytes::DeviceBytes(size_t bytes) { check(cudaMalloc(&ptr_, bytes == 0 ? 1 : bytes), "cudaMalloc"); }

DeviceBytes::~DeviceBytes() { cudaFree(ptr_); }

void DeviceBytes::upload(const void* host, size_t bytes) {
  check(cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
}

void DeviceBytes::download(void* host, size_t bytes) const {
  check(cudaMemcpy(host, ptr_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
}

void synchronize() { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

}  // namespace kvdesk::gpu_test
