// BlockPool: a free list and reference counts over block ids.
#include "engine/block_pool.h"

#include "kernels/check.h"

namespace kvdesk {

BlockPool::BlockPool(int32_t num_blocks) : ref_counts_(num_blocks, 0) {
  KVDESK_ASSERT(num_blocks > 0);
  free_list_.reserve(num_blocks);
  // Reverse order so allocation hands out 0, 1, 2, ...: block maps read naturally.
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_list_.push_back(b);
}

std::optional<int32_t> BlockPool::allocate() {
  if (free_list_.empty()) return std::nullopt;
  const int32_t block = free_list_.back();
  free_list_.pop_back();
  ref_counts_[block] = 1;
  return block;
}

void BlockPool::retain(int32_t block) {
  KVDESK_ASSERT(ref_counts_[block] >= 1);
  ++ref_counts_[block];
}

void BlockPool::release(int32_t block) {
  KVDESK_ASSERT(ref_counts_[block] >= 1);
  if (--ref_counts_[block] == 0) free_list_.push_back(block);
}

void BlockPool::check_invariants() const {
  std::vector<uint8_t> on_free_list(ref_counts_.size(), 0);
  for (int32_t block : free_list_) {
    KVDESK_ASSERT(block >= 0 && block < num_blocks());
    KVDESK_ASSERT(on_free_list[block] == 0);
    KVDESK_ASSERT(ref_counts_[block] == 0);
    on_free_list[block] = 1;
  }
  for (int32_t b = 0; b < num_blocks(); ++b) {
    KVDESK_ASSERT(ref_counts_[b] >= 0);
    KVDESK_ASSERT((ref_counts_[b] == 0) == (on_free_list[b] == 1));
  }
}

}  // namespace kvdesk
