#include "engine/system/huge_page_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <string>
#include <system_error>
#include <utility>

#include "engine/error.h"

namespace kvdesk {

HugePageBuffer::HugePageBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    const int err = errno;
    throw Error("cannot allocate " + std::to_string(bytes >> 20) + " MiB: " + std::system_category().message(err));
  }
  ::madvise(mem, bytes, MADV_HUGEPAGE);
  data_ = static_cast<uint8_t*>(mem);
}

HugePageBuffer::~HugePageBuffer() { release(); }

HugePageBuffer::HugePageBuffer(HugePageBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

HugePageBuffer& HugePageBuffer::operator=(HugePageBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void HugePageBuffer::release() {
  if (data_) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace kvdesk
