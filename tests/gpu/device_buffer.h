// DeviceBuffer<T>: n values in device memory, freed on destruction (movable, not copyable), with whole-buffer uploads
// and downloads. Test support: the kernels themselves take plain device pointers.
#pragma once
#include <cstddef>
#include <utility>
#include <vector>

namespace kvdesk::gpu_test {

class DeviceBytes {
 public:
  explicit DeviceBytes(size_t bytes);
  ~DeviceBytes();
  DeviceBytes(DeviceBytes&& other) noexcept : ptr_(std::exchange(other.ptr_, nullptr)) {}
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  void* get() const { return ptr_; }
  void upload(const void* host, size_t bytes);
  void download(void* host, size_t bytes) const;

 private:
  void* ptr_ = nullptr;
};

template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n), bytes_(n * sizeof(T)) {}
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  T* get() const { return static_cast<T*>(bytes_.get()); }
  size_t size() const { return n_; }
  void upload(const std::vector<T>& host) { bytes_.upload(host.data(), host.size() * sizeof(T)); }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    bytes_.download(host.data(), n_ * sizeof(T));
    return host;
  }

 private:
  size_t n_;
  DeviceBytes bytes_;
};

// Waits for the device; throws std::runtime_error with the CUDA message if anything failed.
void synchronize();

}  // namespace kvdesk::gpu_test
