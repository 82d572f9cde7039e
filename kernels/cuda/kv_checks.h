// Launch-time checks the CUDA KV kernels share. Plain C++: includes no CUDA header.
#pragma once
#include "kernels/paged_kv.h"

namespace kvdesk::cuda {

// fetch8 (kv_codec.cuh) loads 16 bytes at a time from f32/f16/bf16 rows, 4 from fp8/int8
// rows and 2 from int4 rows: throws std::invalid_argument("<kernel>: <name> storage (<type>)
// must be N-byte aligned ...") unless the tensor's pointer and strides are multiples of that.
void require_fetch_alignment(const PagedKvTensor& t, const char* kernel, const char* name);

}  // namespace kvdesk::cuda
