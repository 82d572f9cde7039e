// CudaKvPool: the KV pool's bytes in device memory for the CUDA backend. Per layer one K and
// one V allocation of num_blocks blocks, laid out exactly as KvStorage's host buffers, so the
// block ids KvCache hands out and the PagedKvLayer views it builds hold unchanged. It makes no
// decisions: KvCache (host) decides which block holds what, and asks for whole-block copies
// (copy-on-write) and host transfers (swapping), which run here as synchronous cudaMemcpy on
// the default stream, so they are ordered after every forward kernel queued before them.
// CUDA builds only.
#pragma once
#include <vector>

#include "engine/kv/kv_storage.h"
#include "kernels/cuda/device_allocation.h"

namespace kvdesk {

class CudaKvPool final : public KvDevicePool {
 public:
  // Throws when the device cannot hold the pool.
  explicit CudaKvPool(const KvPoolShape& shape);

  uint8_t* k_data(int32_t layer) const override { return k_[size_t(layer)].get(); }
  uint8_t* v_data(int32_t layer) const override { return v_[size_t(layer)].get(); }
  void copy_block(int32_t src, int32_t dst) override;
  void save_block(int32_t block, uint8_t* dst) const override;
  void load_block(int32_t block, const uint8_t* src) override;

 private:
  KvPoolShape shape_;
  std::vector<cuda::DeviceAllocation> k_;   // [num_layers] each [num_blocks][k_block_bytes]
  std::vector<cuda::DeviceAllocation> v_;   // [num_layers] each [num_blocks][v_block_bytes]
};

}  // namespace kvdesk
