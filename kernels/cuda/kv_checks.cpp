// Launch-time checks of the CUDA KV kernels (see kv_checks.h).
#include "kernels/cuda/kv_checks.h"

#include <cstdint>
#include <stdexcept>
#include <string>

namespace kvdesk::cuda {
namespace {

// Bytes the pointer and strides must be a multiple of for fetch8's loads.
size_t load_alignment(KvType type) {
  switch (type) {
    case KvType::F32:
    case KvType::F16:
    case KvType::BF16: return 16;
    case KvType::INT4: return 2;
    default: return 4;
  }
}

}  // namespace

void require_fetch_alignment(const PagedKvTensor& t, const char* kernel, const char* name) {
  const size_t align = load_alignment(t.type);
  if ((reinterpret_cast<uintptr_t>(t.data) | t.block_stride | t.head_stride | t.row_stride) % align != 0) {
    throw std::invalid_argument(std::string(kernel) + ": " + name + " storage (" + kv_type_name(t.type) + ") must be " +
                                std::to_string(align) + "-byte aligned in pointer and strides");
  }
}

}  // namespace kvdesk::cuda
