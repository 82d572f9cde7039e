// BlockPool: reference counts, the free list, the hash index and the intrusive LRU list of
// cached blocks.
#include "engine/kv/block_pool.h"

#include "kernels/check.h"

namespace kvdesk {

BlockPool::BlockPool(int32_t num_blocks)
    : ref_counts_(num_blocks, 0),
      published_(num_blocks, 0),
      hashes_(num_blocks, 0),
      lru_prev_(num_blocks + 1, num_blocks),
      lru_next_(num_blocks + 1, num_blocks) {
  KVDESK_ASSERT(num_blocks > 0);
  free_list_.reserve(num_blocks);
  // Reverse order so allocation hands out 0, 1, 2, ...: block maps read naturally.
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_list_.push_back(b);
}

uint64_t BlockPool::block_hash(int32_t block) const {
  KVDESK_ASSERT(is_published(block));
  return hashes_[block];
}

std::optional<int32_t> BlockPool::allocate() {
  int32_t block = -1;
  if (!free_list_.empty()) {
    block = free_list_.back();
    free_list_.pop_back();
  } else if (num_cached_ > 0) {
    block = lru_next_[sentinel()];
    lru_remove(block);
    index_.erase(hashes_[block]);
    published_[block] = 0;
    ++evictions_;
  } else {
    return std::nullopt;
  }
  ref_counts_[block] = 1;
  return block;
}

void BlockPool::retain(int32_t block) {
  if (is_cached(block)) lru_remove(block);
  KVDESK_ASSERT(ref_counts_[block] >= 1 || is_published(block));
  ++ref_counts_[block];
}

void BlockPool::release(int32_t block) {
  KVDESK_ASSERT(ref_counts_[block] >= 1);
  if (--ref_counts_[block] > 0) return;
  if (is_published(block)) {
    lru_push_back(block);
  } else {
    free_list_.push_back(block);
  }
}

void BlockPool::unpublish(int32_t block) {
  KVDESK_ASSERT(ref_counts_[block] >= 1 && is_published(block));
  index_.erase(hashes_[block]);
  published_[block] = 0;
}

bool BlockPool::publish(int32_t block, uint64_t hash) {
  KVDESK_ASSERT(ref_counts_[block] >= 1 && !is_published(block));
  if (!index_.emplace(hash, block).second) return false;
  published_[block] = 1;
  hashes_[block] = hash;
  return true;
}

std::optional<int32_t> BlockPool::find(uint64_t hash) const {
  auto it = index_.find(hash);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

std::vector<int32_t> BlockPool::lru_order() const {
  std::vector<int32_t> order;
  for (int32_t b = lru_next_[sentinel()]; b != sentinel(); b = lru_next_[b]) order.push_back(b);
  return order;
}

void BlockPool::lru_push_back(int32_t block) {
  const int32_t last = lru_prev_[sentinel()];
  lru_prev_[block] = last;
  lru_next_[block] = sentinel();
  lru_next_[last] = block;
  lru_prev_[sentinel()] = block;
  ++num_cached_;
}

void BlockPool::lru_remove(int32_t block) {
  lru_next_[lru_prev_[block]] = lru_next_[block];
  lru_prev_[lru_next_[block]] = lru_prev_[block];
  lru_prev_[block] = lru_next_[block] = sentinel();
  --num_cached_;
}

void BlockPool::check_invariants() const {
  enum : uint8_t { kNowhere, kOnFreeList, kOnLru };
  std::vector<uint8_t> where(ref_counts_.size(), kNowhere);
  for (int32_t block : free_list_) {
    KVDESK_ASSERT(block >= 0 && block < num_blocks() && where[block] == kNowhere);
    where[block] = kOnFreeList;
  }
  int32_t lru_length = 0;
  for (int32_t b = lru_next_[sentinel()]; b != sentinel(); b = lru_next_[b]) {
    KVDESK_ASSERT(b >= 0 && b < num_blocks() && where[b] == kNowhere);
    KVDESK_ASSERT(lru_prev_[lru_next_[b]] == b);
    where[b] = kOnLru;
    ++lru_length;
  }
  KVDESK_ASSERT(lru_length == num_cached_);
  int32_t num_published = 0;
  for (int32_t b = 0; b < num_blocks(); ++b) {
    KVDESK_ASSERT(ref_counts_[b] >= 0);
    const uint8_t expected = ref_counts_[b] > 0 ? kNowhere : is_published(b) ? kOnLru : kOnFreeList;
    KVDESK_ASSERT(where[b] == expected);
    if (!is_published(b)) continue;
    ++num_published;
    auto it = index_.find(hashes_[b]);
    KVDESK_ASSERT(it != index_.end() && it->second == b);
  }
  KVDESK_ASSERT(num_published == int32_t(index_.size()));
}

}  // namespace kvdesk
