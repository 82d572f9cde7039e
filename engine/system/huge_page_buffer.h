// HugePageBuffer: a zero-filled block of anonymous memory that asks for transparent huge pages
// (madvise), for the big arrays read at scattered places: the KV pool. A sequence's blocks lie
// anywhere in the pool, and with 4 KiB pages nearly every block a decode step reads costs a
// TLB miss; one 2 MiB page covers hundreds of blocks. The mapping starts on a 2 MiB boundary,
// as transparent huge pages back only whole aligned 2 MiB ranges. Where the kernel offers no
// huge pages the advice is ignored and the buffer works the same.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kvdesk {

class HugePageBuffer {
 public:
  HugePageBuffer() = default;
  // Throws kvdesk::Error when the memory cannot be had.
  explicit HugePageBuffer(size_t bytes);
  ~HugePageBuffer();
  HugePageBuffer(HugePageBuffer&& other) noexcept;
  HugePageBuffer& operator=(HugePageBuffer&& other) noexcept;
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;

  uint8_t* get() const { return data_; }
  size_t size() const { return size_; }

 private:
  void release();

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kvdesk
