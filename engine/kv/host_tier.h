// HostTier: the KV blocks of sequences that left the pool, kept in host memory in their stored
// form (optionally zstd-compressed) within one byte budget. Two kinds of entries share it:
// conversations' parked turns moved out of a full pool (droppable: when the budget is short,
// the least recently used go first) and running sequences preempted by swapping (kept until
// they swap back in; never dropped). The tier only keeps bytes; the scheduler decides what
// goes in and comes out (engine/sched/scheduler.h) and frees the sequences of dropped entries.
// Entries are keyed by the KV cache's sequence id.
//
// Invariants (check_invariants()):
// - held_bytes() is the sum of the entries' held bytes and never exceeds the budget;
// - an entry's held bytes are its stored bytes, or fewer when compressed;
// - use stamps are unique and below the next stamp.
// Runs on the engine thread only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "engine/kv_snapshot.h"

namespace kvdesk {

using SeqId = int32_t;

class HostTier {
 public:
  // budget_bytes 0: the tier is off and stores nothing. compression_level 0: blocks are kept
  // as stored; 1..19: zstd at that level (a block that does not shrink is kept as stored).
  HostTier(size_t budget_bytes, int32_t compression_level);

  bool enabled() const { return budget_ > 0; }
  bool contains(SeqId seq) const { return entries_.count(seq) != 0; }

  struct StoreResult {
    bool stored = false;
    std::vector<SeqId> dropped;   // droppable entries removed to make room, least recently used first
  };
  // Keeps seq's blocks ([num_blocks][bytes per block], as KvCache::swap_out returns them) as the
  // most recently used entry. When the budget is short it drops the least recently used
  // droppable entries first; when even dropping all of them cannot make room it keeps nothing,
  // drops nothing and returns stored = false.
  StoreResult store(SeqId seq, std::vector<uint8_t> blocks, int32_t num_blocks, bool droppable);
  // The exact bytes store() was given; the entry leaves the tier.
  std::vector<uint8_t> take(SeqId seq);
  // The exact bytes, the entry staying.
  std::vector<uint8_t> peek(SeqId seq) const;
  // Forgets the entry (its sequence was released).
  void erase(SeqId seq);
  // Marks the entry most recently used.
  void touch(SeqId seq);
  // A conversation turn continued from the tier.
  void count_hit() { ++hits_; }

  size_t held_bytes() const { return held_bytes_; }
  HostTierStats stats() const;
  void check_invariants() const;

 private:
  struct Entry {
    std::vector<uint8_t> data;     // [held bytes] compressed, or the blocks as stored
    size_t stored_bytes = 0;
    int32_t num_blocks = 0;
    bool compressed = false;
    bool droppable = false;
    uint64_t last_used = 0;
  };

  Entry pack(std::vector<uint8_t> blocks, int32_t num_blocks, bool droppable) const;
  static std::vector<uint8_t> unpack(const Entry& e);
  size_t droppable_bytes() const;
  SeqId least_recently_used_droppable() const;
  void remove(std::map<SeqId, Entry>::iterator it);

  size_t budget_;
  int32_t level_;
  std::map<SeqId, Entry> entries_;
  size_t held_bytes_ = 0;
  uint64_t next_use_ = 1;

  uint64_t swap_outs_ = 0;
  uint64_t swap_ins_ = 0;
  uint64_t hits_ = 0;
  uint64_t drops_ = 0;
  uint64_t refusals_ = 0;
};

}  // namespace kvdesk
