// HostTier: a byte budget over host copies of KV blocks, LRU drops of droppable entries, and
// optional zstd. See host_tier.h.
#include "engine/kv/host_tier.h"

#include <zstd.h>

#include <algorithm>

#include "kernels/check.h"

namespace kvdesk {

HostTier::HostTier(size_t budget_bytes, int32_t compression_level)
    : budget_(budget_bytes), level_(compression_level) {
  KVDESK_ASSERT(compression_level >= 0 && compression_level <= ZSTD_maxCLevel());
}

HostTier::StoreResult HostTier::store(SeqId seq, std::vector<uint8_t> blocks, int32_t num_blocks, bool droppable) {
  KVDESK_ASSERT(!contains(seq));
  StoreResult result;
  if (!enabled()) {
    ++refusals_;
    return result;
  }
  Entry e = pack(std::move(blocks), num_blocks, droppable);
  const size_t size = e.data.size();
  if (size > budget_ || held_bytes_ - droppable_bytes() + size > budget_) {
    ++refusals_;
    return result;
  }
  while (held_bytes_ + size > budget_) {
    const SeqId victim = least_recently_used_droppable();
    remove(entries_.find(victim));
    result.dropped.push_back(victim);
    ++drops_;
  }
  e.last_used = next_use_++;
  held_bytes_ += size;
  entries_.emplace(seq, std::move(e));
  ++swap_outs_;
  result.stored = true;
  return result;
}

std::vector<uint8_t> HostTier::take(SeqId seq) {
  auto it = entries_.find(seq);
  KVDESK_ASSERT(it != entries_.end());
  Entry e = std::move(it->second);
  held_bytes_ -= e.data.size();
  entries_.erase(it);
  ++swap_ins_;
  return e.compressed ? unpack(e) : std::move(e.data);
}

std::vector<uint8_t> HostTier::peek(SeqId seq) const {
  const auto it = entries_.find(seq);
  KVDESK_ASSERT(it != entries_.end());
  return it->second.compressed ? unpack(it->second) : it->second.data;
}

void HostTier::erase(SeqId seq) {
  auto it = entries_.find(seq);
  KVDESK_ASSERT(it != entries_.end());
  remove(it);
}

void HostTier::touch(SeqId seq) { entries_.at(seq).last_used = next_use_++; }

// Compressed when a level is set and zstd shrinks the blocks; as stored otherwise.
HostTier::Entry HostTier::pack(std::vector<uint8_t> blocks, int32_t num_blocks, bool droppable) const {
  Entry e;
  e.stored_bytes = blocks.size();
  e.num_blocks = num_blocks;
  e.droppable = droppable;
  if (level_ > 0) {
    std::vector<uint8_t> packed(ZSTD_compressBound(blocks.size()));
    const size_t n = ZSTD_compress(packed.data(), packed.size(), blocks.data(), blocks.size(), level_);
    if (!ZSTD_isError(n) && n < blocks.size()) {
      packed.resize(n);
      packed.shrink_to_fit();
      e.data = std::move(packed);
      e.compressed = true;
      return e;
    }
  }
  e.data = std::move(blocks);
  return e;
}

std::vector<uint8_t> HostTier::unpack(const Entry& e) {
  std::vector<uint8_t> blocks(e.stored_bytes);
  const size_t n = ZSTD_decompress(blocks.data(), blocks.size(), e.data.data(), e.data.size());
  KVDESK_ASSERT(!ZSTD_isError(n) && n == e.stored_bytes);
  return blocks;
}

size_t HostTier::droppable_bytes() const {
  size_t bytes = 0;
  for (const auto& [seq, e] : entries_) bytes += e.droppable ? e.data.size() : 0;
  return bytes;
}

SeqId HostTier::least_recently_used_droppable() const {
  const Entry* oldest = nullptr;
  SeqId id = -1;
  for (const auto& [seq, e] : entries_) {
    if (e.droppable && (!oldest || e.last_used < oldest->last_used)) {
      oldest = &e;
      id = seq;
    }
  }
  KVDESK_ASSERT(oldest != nullptr);
  return id;
}

void HostTier::remove(std::map<SeqId, Entry>::iterator it) {
  held_bytes_ -= it->second.data.size();
  entries_.erase(it);
}

HostTierStats HostTier::stats() const {
  HostTierStats s;
  s.budget_bytes = budget_;
  s.compression_level = level_;
  s.entries = int32_t(entries_.size());
  for (const auto& [seq, e] : entries_) {
    s.blocks += e.num_blocks;
    s.stored_bytes += e.stored_bytes;
  }
  s.held_bytes = held_bytes_;
  s.swap_outs = swap_outs_;
  s.swap_ins = swap_ins_;
  s.hits = hits_;
  s.drops = drops_;
  s.refusals = refusals_;
  return s;
}

void HostTier::check_invariants() const {
  size_t held = 0;
  std::vector<uint64_t> stamps;
  for (const auto& [seq, e] : entries_) {
    held += e.data.size();
    KVDESK_ASSERT(e.compressed ? e.data.size() < e.stored_bytes : e.data.size() == e.stored_bytes);
    KVDESK_ASSERT(e.last_used > 0 && e.last_used < next_use_);
    stamps.push_back(e.last_used);
  }
  KVDESK_ASSERT(held == held_bytes_ && held_bytes_ <= budget_);
  std::sort(stamps.begin(), stamps.end());
  KVDESK_ASSERT(std::adjacent_find(stamps.begin(), stamps.end()) == stamps.end());
}

}  // namespace kvdesk
