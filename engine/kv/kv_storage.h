// KvStorage: the bytes behind the paged KV cache. A block holds K and V of layers_per_block
// layers (engine/kv/kv_layer_groups.h: every layer, or one group's share of them): one K and
// one V buffer of num_blocks physical blocks per layer slot, in the storage type chosen when
// the pool is created. Layer l reads and writes slot slot_of_layer[l] of the blocks its
// group's table names. It knows nothing of sequences: KvCache decides which block holds what;
// KvStorage lays blocks out, hands the kernels a PagedKvLayer view, and copies whole blocks
// (copy-on-write).
//
// The bytes live in host memory, or, for the CUDA backend, in a KvDevicePool: the same layout
// and block ids in device memory. KvCache keeps every decision (allocation, sharing, prefix
// cache, copy-on-write, swapping) on the host either way; each byte operation it asks of
// KvStorage (copy_block, save_block, load_block) goes to wherever the bytes are, and layer()
// views point there, so the kernels of the backend that owns the pool read and write it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/kv_snapshot.h"
#include "engine/system/huge_page_buffer.h"
#include "engine/model/model_config.h"
#include "kernels/attention.h"
#include "kernels/paged_kv.h"

namespace kvdesk {

// The KV arithmetic: layers x kv_heads x (K row + V row), each row head_dim values in its
// type plus that type's scales (kv_row_bytes).
size_t kv_bytes_per_token(const ModelConfig& config, KvType k_type, KvType v_type);

// Shape of one pool, as a device pool must lay it out: per layer slot a K and a V buffer of
// num_blocks blocks of k_block_bytes (v_block_bytes), in PagedKvTensor's layout.
struct KvPoolShape {
  int32_t num_layers = 0;   // layer slots of a block
  int32_t num_blocks = 0;
  size_t k_block_bytes = 0;
  size_t v_block_bytes = 0;
};

// KV bytes in device memory (engine/backend/cuda_kv_pool.h). Same operations as the host pool; the
// bytes a save_block hands out and load_block takes are in KvStorage's order (per layer K
// then V), so a block swapped out by one pool reads back the same.
class KvDevicePool {
 public:
  virtual ~KvDevicePool() = default;
  virtual uint8_t* k_data(int32_t layer) const = 0;   // device [num_blocks][k_block_bytes]
  virtual uint8_t* v_data(int32_t layer) const = 0;   // device [num_blocks][v_block_bytes]
  virtual void copy_block(int32_t src, int32_t dst) = 0;
  virtual void save_block(int32_t block, uint8_t* dst) const = 0;
  virtual void load_block(int32_t block, const uint8_t* src) = 0;
};

// Makes the device pool of a KvStorage; empty: host memory.
using KvDevicePoolFactory = std::function<std::unique_ptr<KvDevicePool>(const KvPoolShape&)>;

class KvStorage {
 public:
  KvStorage(const ModelConfig& config, const KvLayout& layout, const KvDevicePoolFactory& device_pool = {});

  const KvLayout& layout() const { return layout_; }
  // Whether the bytes are in a device pool: layer() views then hold device pointers.
  bool on_device() const { return device_ != nullptr; }
  // The view of model layer `index`: its slot of every block.
  PagedKvLayer layer(int32_t index) const;
  // Bytes of K and V of one block across its layer slots.
  size_t bytes_per_block() const;
  size_t total_bytes() const { return bytes_per_block() * size_t(layout_.num_blocks); }
  // Copies every layer's K and V of block src into block dst.
  void copy_block(int32_t src, int32_t dst);
  // A block's bytes (all layers, K then V, in the stored form) to and from host memory of
  // bytes_per_block() bytes: the host tier of preemption keeps KV exactly as stored.
  void save_block(int32_t block, uint8_t* dst) const;
  void load_block(int32_t block, const uint8_t* src);

 private:
  KvLayout layout_;
  std::vector<int32_t> slot_of_layer_;   // [model layers]
  int32_t num_layers_;                   // layer slots of a block
  int32_t num_kv_heads_;
  int32_t head_dim_;
  size_t k_block_bytes_;
  size_t v_block_bytes_;
  // Layer slot l's K, then its V, each [num_blocks][num_kv_heads][block_size][kv_row_bytes(type,
  // head_dim)] from a cache line boundary, slot after slot in one buffer: one mapping in huge
  // pages however small each slot's share, for a sequence's blocks lie anywhere in the pool
  // (engine/system/huge_page_buffer.h). Empty when device_ holds the bytes.
  uint8_t* k_data(int32_t slot) const { return host_.get() + size_t(slot) * slot_bytes_; }
  uint8_t* v_data(int32_t slot) const { return k_data(slot) + k_slot_bytes_; }
  size_t k_slot_bytes_ = 0;   // K bytes of a slot, rounded up to a cache line
  size_t slot_bytes_ = 0;     // K and V bytes of a slot, each rounded up to a cache line
  HugePageBuffer host_;
  std::unique_ptr<KvDevicePool> device_;
};

}  // namespace kvdesk
