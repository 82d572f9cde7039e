// BlockPool: reference counts for the fixed-size physical KV blocks of one model. It knows
// nothing of tokens or bytes; the KV cache asks it for block ids and gives them back.
//
// Invariants (check_invariants() verifies them):
// - every block id in [0, num_blocks) is either on the free list (ref_count 0) or held
//   (ref_count >= 1), never both;
// - the free list holds no duplicates; num_free() == its length.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

namespace kvdesk {

class BlockPool {
 public:
  explicit BlockPool(int32_t num_blocks);

  int32_t num_blocks() const { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_list_.size()); }
  int32_t ref_count(int32_t block) const { return ref_counts_[block]; }

  // A free block with ref_count 1, or nullopt when none is left.
  std::optional<int32_t> allocate();
  void retain(int32_t block);
  // Drops one reference; the block returns to the free list at zero.
  void release(int32_t block);

  void check_invariants() const;

 private:
  std::vector<int32_t> ref_counts_;  // [num_blocks]
  std::vector<int32_t> free_list_;   // block ids, allocated from the back
};

}  // namespace kvdesk
