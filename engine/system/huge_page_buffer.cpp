#include "engine/system/huge_page_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <system_error>
#include <utility>

#include "engine/error.h"

namespace kvdesk {

namespace {

constexpr size_t kHugePage = size_t(2) << 20;

// A mapping of `bytes` that starts on a huge page boundary: mapped with a huge page of slack,
// then the slack before the boundary and past the end is unmapped again. Transparent huge
// pages only back whole aligned 2 MiB ranges of a mapping, so an unaligned start would leave
// up to 2 MiB at each end in small pages.
void* map_aligned(size_t bytes) {
  if (bytes > SIZE_MAX - 2 * kHugePage) {
    errno = ENOMEM;
    return MAP_FAILED;
  }
  const size_t mapped = bytes + kHugePage;
  void* mem = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return mem;
  const uintptr_t start = reinterpret_cast<uintptr_t>(mem);
  const uintptr_t aligned = (start + kHugePage - 1) & ~uintptr_t(kHugePage - 1);
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const size_t length = (bytes + page - 1) / page * page;   // what release() unmaps
  if (aligned > start) ::munmap(mem, aligned - start);
  const size_t tail = mapped - (aligned - start) - length;
  if (tail > 0) ::munmap(reinterpret_cast<void*>(aligned + length), tail);
  return reinterpret_cast<void*>(aligned);
}

}  // namespace

HugePageBuffer::HugePageBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  void* mem = map_aligned(bytes);
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
