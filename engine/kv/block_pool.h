// BlockPool: the physical KV blocks of one model as ids: reference counts, the free list, and
// the prefix cache's bookkeeping (each block's published hash, the hash -> block index, and an
// LRU list of unreferenced cached blocks to evict from). It knows nothing of tokens or bytes.
//
// Every block is in exactly one state:
//   Free    ref_count 0, unpublished; on the free list;
//   Cached  ref_count 0, published; on the LRU list: findable by hash, evictable;
//   Held    ref_count >= 1, published or not; on neither list, never evicted.
// Invariants (check_invariants()):
// - each Free block is on the free list once, each Cached block on the LRU list once, and no
//   other block is on either; num_free() and num_cached() are their lengths;
// - the index maps a hash to exactly the published block that carries it: one block per hash,
//   and every published block is in the index.
#pragma once
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

namespace kvdesk {

class BlockPool {
 public:
  explicit BlockPool(int32_t num_blocks);

  int32_t num_blocks() const { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_list_.size()); }
  int32_t num_cached() const { return num_cached_; }
  int32_t num_available() const { return num_free() + num_cached(); }
  int32_t ref_count(int32_t block) const { return ref_counts_[block]; }
  bool is_published(int32_t block) const { return published_[block] != 0; }
  bool is_cached(int32_t block) const { return ref_counts_[block] == 0 && is_published(block); }
  uint64_t block_hash(int32_t block) const;   // published blocks only
  uint64_t num_evictions() const { return evictions_; }

  // A block with ref_count 1: a free one if any, else the least recently used cached block,
  // evicted (its hash leaves the index). nullopt when every block is held.
  std::optional<int32_t> allocate();
  // One more reference; a cached block leaves the LRU list and is held again.
  void retain(int32_t block);
  // One reference less. At zero a published block becomes cached at the most recently used
  // end of the LRU list; an unpublished one becomes free.
  void release(int32_t block);

  // Makes a held block findable under hash. false, and no change, when another block already
  // carries that hash (the index keeps one block per hash).
  bool publish(int32_t block, uint64_t hash);
  // Takes a held, published block out of the index: its contents are about to change (KV
  // retention compacts rows into it), so its hash no longer names them.
  void unpublish(int32_t block);
  // The published block (held or cached) carrying this hash.
  std::optional<int32_t> find(uint64_t hash) const;
  // Cached blocks from least to most recently used: the order allocate() evicts them in.
  std::vector<int32_t> lru_order() const;

  void check_invariants() const;

 private:
  // The LRU list is intrusive (vLLM v1's free block queue): prev/next links live in arrays
  // indexed by block id, so removing a cache hit from the middle is O(1) with no allocation.
  // Index num_blocks() is the sentinel of the circular list: its next is the least recently
  // used block, its prev the most recently used.
  void lru_push_back(int32_t block);
  void lru_remove(int32_t block);
  int32_t sentinel() const { return num_blocks(); }

  std::vector<int32_t> ref_counts_;   // [num_blocks]
  std::vector<uint8_t> published_;    // [num_blocks] 1: in the index under hashes_[block]
  std::vector<uint64_t> hashes_;      // [num_blocks] valid where published_
  std::vector<int32_t> free_list_;    // Free block ids, allocated from the back
  std::vector<int32_t> lru_prev_;     // [num_blocks + 1] links of Cached blocks; last: sentinel
  std::vector<int32_t> lru_next_;     // [num_blocks + 1]
  int32_t num_cached_ = 0;
  std::unordered_map<uint64_t, int32_t> index_;   // hash -> published block
  uint64_t evictions_ = 0;
};

}  // namespace kvdesk
