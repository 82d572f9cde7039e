// KvStorage: per-layer block buffers and their kernel views.
#include "engine/kv/kv_storage.h"

#include <cstring>

#include "engine/kv/kv_layer_groups.h"
#include "kernels/check.h"

namespace kvdesk {
namespace {

PagedKvTensor tensor_view(KvType type, uint8_t* data, int32_t block_size, int32_t kv_heads,
                          int32_t head_dim) {
  PagedKvTensor t;
  t.type = type;
  t.data = data;
  t.row_stride = kv_row_bytes(type, head_dim);
  t.head_stride = t.row_stride * size_t(block_size);
  t.block_stride = t.head_stride * size_t(kv_heads);
  return t;
}

}  // namespace

size_t kv_bytes_per_token(const ModelConfig& config, KvType k_type, KvType v_type) {
  return size_t(config.block_count) * size_t(config.head_count_kv) *
         (kv_row_bytes(k_type, config.head_dim) + kv_row_bytes(v_type, config.head_dim));
}

KvStorage::KvStorage(const ModelConfig& config, const KvLayout& layout, const KvDevicePoolFactory& device_pool)
    : layout_(layout),
      slot_of_layer_(kv_layer_groups(config).slot_of_layer),
      num_layers_(kv_layer_groups(config).layers_per_block),
      num_kv_heads_(config.head_count_kv),
      head_dim_(config.head_dim) {
  KVDESK_ASSERT(layout.block_size > 0 && layout.num_blocks > 0);
  const size_t rows = size_t(layout.block_size) * size_t(num_kv_heads_);
  k_block_bytes_ = kv_row_bytes(layout.k_type, head_dim_) * rows;
  v_block_bytes_ = kv_row_bytes(layout.v_type, head_dim_) * rows;
  if (device_pool) {
    device_ = device_pool(KvPoolShape{num_layers_, layout.num_blocks, k_block_bytes_, v_block_bytes_});
    return;
  }
  constexpr size_t kLine = 64;
  const auto whole_lines = [](size_t bytes) { return (bytes + kLine - 1) / kLine * kLine; };
  k_slot_bytes_ = whole_lines(k_block_bytes_ * size_t(layout.num_blocks));
  slot_bytes_ = k_slot_bytes_ + whole_lines(v_block_bytes_ * size_t(layout.num_blocks));
  host_ = HugePageBuffer(slot_bytes_ * size_t(num_layers_));
}

PagedKvLayer KvStorage::layer(int32_t index) const {
  const int32_t slot = slot_of_layer_[size_t(index)];
  PagedKvLayer l;
  uint8_t* k = device_ ? device_->k_data(slot) : k_data(slot);
  uint8_t* v = device_ ? device_->v_data(slot) : v_data(slot);
  l.k = tensor_view(layout_.k_type, k, layout_.block_size, num_kv_heads_, head_dim_);
  l.v = tensor_view(layout_.v_type, v, layout_.block_size, num_kv_heads_, head_dim_);
  l.block_size = layout_.block_size;
  l.num_kv_heads = num_kv_heads_;
  l.head_dim = head_dim_;
  return l;
}

size_t KvStorage::bytes_per_block() const {
  return size_t(num_layers_) * (k_block_bytes_ + v_block_bytes_);
}

void KvStorage::copy_block(int32_t src, int32_t dst) {
  KVDESK_ASSERT(src >= 0 && src < layout_.num_blocks && dst >= 0 && dst < layout_.num_blocks);
  if (device_) return device_->copy_block(src, dst);
  for (int32_t l = 0; l < num_layers_; ++l) {
    std::memcpy(k_data(l) + size_t(dst) * k_block_bytes_, k_data(l) + size_t(src) * k_block_bytes_, k_block_bytes_);
    std::memcpy(v_data(l) + size_t(dst) * v_block_bytes_, v_data(l) + size_t(src) * v_block_bytes_, v_block_bytes_);
  }
}

void KvStorage::save_block(int32_t block, uint8_t* dst) const {
  KVDESK_ASSERT(block >= 0 && block < layout_.num_blocks);
  if (device_) return device_->save_block(block, dst);
  for (int32_t l = 0; l < num_layers_; ++l) {
    std::memcpy(dst, k_data(l) + size_t(block) * k_block_bytes_, k_block_bytes_);
    dst += k_block_bytes_;
    std::memcpy(dst, v_data(l) + size_t(block) * v_block_bytes_, v_block_bytes_);
    dst += v_block_bytes_;
  }
}

void KvStorage::load_block(int32_t block, const uint8_t* src) {
  KVDESK_ASSERT(block >= 0 && block < layout_.num_blocks);
  if (device_) return device_->load_block(block, src);
  for (int32_t l = 0; l < num_layers_; ++l) {
    std::memcpy(k_data(l) + size_t(block) * k_block_bytes_, src, k_block_bytes_);
    src += k_block_bytes_;
    std::memcpy(v_data(l) + size_t(block) * v_block_bytes_, src, v_block_bytes_);
    src += v_block_bytes_;
  }
}

}  // namespace kvdesk
