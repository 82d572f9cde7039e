// Internal, included only by the ISA translation units: a per-thread home for repacked
// activation panels, 64-byte aligned for zmm loads, grown to the largest panel and freed at
// thread exit.
#pragma once
#include <cstddef>
#include <cstdlib>

#include "kernels/check.h"

namespace kvdesk {
namespace {

// T's size must be a multiple of 64 (aligned_alloc wants whole alignment units).
template <class T>
class PackScratch {
 public:
  PackScratch() = default;
  PackScratch(const PackScratch&) = delete;
  PackScratch& operator=(const PackScratch&) = delete;
  ~PackScratch() { std::free(data_); }

  T* get(size_t count) {
    static_assert(sizeof(T) % 64 == 0);
    if (count > capacity_) {
      std::free(data_);
      data_ = static_cast<T*>(std::aligned_alloc(64, count * sizeof(T)));
      KVDESK_ASSERT(data_ != nullptr);
      capacity_ = count;
    }
    return data_;
  }

 private:
  T* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace
}  // namespace kvdesk
