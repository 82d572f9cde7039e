// One CTA copies one run of bytes: 16 bytes per thread and step when both ends and the length
// are 16-byte aligned, else byte by byte. Shared by the copy-on-write block copy and the host
// offload gather/scatter.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace kvdesk::cuda {

__device__ inline void cta_copy_bytes(uint8_t* to, const uint8_t* from, size_t bytes) {
  if ((reinterpret_cast<uintptr_t>(to) | reinterpret_cast<uintptr_t>(from) | bytes) % sizeof(uint4) == 0) {
    for (size_t i = threadIdx.x; i < bytes / sizeof(uint4); i += blockDim.x) {
      reinterpret_cast<uint4*>(to)[i] = reinterpret_cast<const uint4*>(from)[i];
    }
  } else {
    for (size_t i = threadIdx.x; i < bytes; i += blockDim.x) to[i] = from[i];
  }
}

}  // namespace kvdesk::cuda
