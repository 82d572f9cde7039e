// CudaKvPool (see cuda_kv_pool.h).
#include "engine/backend/cuda_kv_pool.h"

#include <stdexcept>

#include "engine/error.h"

namespace kvdesk {

CudaKvPool::CudaKvPool(const KvPoolShape& shape) : shape_(shape) {
  const size_t blocks = size_t(shape.num_blocks);
  try {
    for (int32_t l = 0; l < shape.num_layers; ++l) {
      k_.emplace_back(shape.k_block_bytes * blocks, "the KV pool (K)");
      v_.emplace_back(shape.v_block_bytes * blocks, "the KV pool (V)");
    }
  } catch (const std::runtime_error& e) {
    throw Error(std::string("the device cannot hold the KV pool of ") + std::to_string(shape.num_blocks) +
                " blocks: " + e.what());
  }
}

void CudaKvPool::copy_block(int32_t src, int32_t dst) {
  for (int32_t l = 0; l < shape_.num_layers; ++l) {
    const size_t kb = shape_.k_block_bytes;
    const size_t vb = shape_.v_block_bytes;
    cuda::copy_on_device(k_data(l) + size_t(dst) * kb, k_data(l) + size_t(src) * kb, kb);
    cuda::copy_on_device(v_data(l) + size_t(dst) * vb, v_data(l) + size_t(src) * vb, vb);
  }
}

// Per layer K then V, as KvStorage::save_block lays out host bytes.
void CudaKvPool::save_block(int32_t block, uint8_t* dst) const {
  for (int32_t l = 0; l < shape_.num_layers; ++l) {
    cuda::copy_to_host(dst, k_data(l) + size_t(block) * shape_.k_block_bytes, shape_.k_block_bytes);
    dst += shape_.k_block_bytes;
    cuda::copy_to_host(dst, v_data(l) + size_t(block) * shape_.v_block_bytes, shape_.v_block_bytes);
    dst += shape_.v_block_bytes;
  }
}

void CudaKvPool::load_block(int32_t block, const uint8_t* src) {
  for (int32_t l = 0; l < shape_.num_layers; ++l) {
    cuda::copy_to_device(k_data(l) + size_t(block) * shape_.k_block_bytes, src, shape_.k_block_bytes);
    src += shape_.k_block_bytes;
    cuda::copy_to_device(v_data(l) + size_t(block) * shape_.v_block_bytes, src, shape_.v_block_bytes);
    src += shape_.v_block_bytes;
  }
}

}  // namespace kvdesk
