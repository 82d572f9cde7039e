// Device memory for the engine's CUDA path: an owned allocation on device 0 (freed on
// destruction, movable), whole-range copies to and from host memory and within the device, and
// the device's free/total memory. Plain C++: includes no CUDA header. Every call checks the
// runtime's status and throws std::runtime_error("<what>: <cudaGetErrorString>") on failure.
// Copies are synchronous (cudaMemcpy): they wait for the kernels queued before them on the
// default stream, so a host read after a copy sees every earlier launch's result.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>

namespace kvdesk::cuda {

struct MemoryInfo {
  uint64_t free_bytes = 0;    // cudaMemGetInfo's free memory of device 0
  uint64_t total_bytes = 0;
};

MemoryInfo memory_info();

class DeviceAllocation {
 public:
  DeviceAllocation() = default;
  // bytes > 0; `what` names the allocation in the error when the device has no room.
  DeviceAllocation(size_t bytes, const char* what);
  ~DeviceAllocation();
  DeviceAllocation(DeviceAllocation&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  DeviceAllocation& operator=(DeviceAllocation&& other) noexcept;
  DeviceAllocation(const DeviceAllocation&) = delete;
  DeviceAllocation& operator=(const DeviceAllocation&) = delete;

  uint8_t* get() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// cudaMemcpy of bytes (0 is a no-op), host -> device, device -> host, device -> device.
void copy_to_device(void* device_dst, const void* host_src, size_t bytes);
void copy_to_host(void* host_dst, const void* device_src, size_t bytes);
void copy_on_device(void* device_dst, const void* device_src, size_t bytes);

// Waits for all work queued on the device; throws "<what>: <error>" when any of it failed.
void synchronize(const char* what);

}  // namespace kvdesk::cuda
