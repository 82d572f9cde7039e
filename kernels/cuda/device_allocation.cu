// Device allocations and synchronous copies (see device_allocation.h).
#include "kernels/cuda/device_allocation.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace kvdesk::cuda {
namespace {

void check(cudaError_t err, const std::string& what) {
  if (err != cudaSuccess) throw std::runtime_error(what + ": " + cudaGetErrorString(err));
}

void copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, const char* what) {
  if (bytes == 0) return;
  check(cudaMemcpy(dst, src, bytes, kind), what);
}

}  // namespace

MemoryInfo memory_info() {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  return MemoryInfo{free_bytes, total_bytes};
}

DeviceAllocation::DeviceAllocation(size_t bytes, const char* what) : size_(bytes) {
  if (bytes == 0) throw std::invalid_argument(std::string("DeviceAllocation of 0 bytes for ") + what);
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), std::string("cudaMalloc of ") + std::to_string(bytes) + " bytes for " + what);
  data_ = static_cast<uint8_t*>(p);
}

DeviceAllocation::~DeviceAllocation() {
  if (data_) cudaFree(data_);   // a failure here has no one to report to; the context is going away
}

DeviceAllocation& DeviceAllocation::operator=(DeviceAllocation&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void copy_to_device(void* device_dst, const void* host_src, size_t bytes) {
  copy(device_dst, host_src, bytes, cudaMemcpyHostToDevice, "cudaMemcpy host to device");
}

void copy_to_host(void* host_dst, const void* device_src, size_t bytes) {
  copy(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, "cudaMemcpy device to host");
}

void copy_on_device(void* device_dst, const void* device_src, size_t bytes) {
  copy(device_dst, device_src, bytes, cudaMemcpyDeviceToDevice, "cudaMemcpy device to device");
}

void synchronize(const char* what) { check(cudaDeviceSynchronize(), what); }

}  // namespace kvdesk::cuda
