// KvCache: block tables over a BlockPool, and the storage the tables point into.
#include "engine/kv_cache.h"

#include "engine/error.h"

namespace kvdesk {
namespace {

int32_t blocks_for(int32_t num_tokens, int32_t block_size) {
  return (num_tokens + block_size - 1) / block_size;
}

}  // namespace

KvCache::KvCache(const ModelConfig& config, const KvLayout& options)
    : storage_(config, options), pool_(options.num_blocks) {}

SeqId KvCache::create_sequence() {
  const SeqId id = next_seq_id_++;
  sequences_.emplace(id, Sequence{});
  return id;
}

void KvCache::free_sequence(SeqId seq) {
  auto it = sequences_.find(seq);
  KVDESK_ASSERT(it != sequences_.end());
  for (int32_t block : it->second.block_table) pool_.release(block);
  sequences_.erase(it);
}

bool KvCache::reserve(SeqId seq, int32_t num_tokens) {
  auto it = sequences_.find(seq);
  KVDESK_ASSERT(it != sequences_.end());
  Sequence& s = it->second;
  const int32_t needed = blocks_for(num_tokens, block_size()) - int32_t(s.block_table.size());
  if (needed > pool_.num_free()) return false;
  for (int32_t i = 0; i < needed; ++i) s.block_table.push_back(*pool_.allocate());
  if (num_tokens > s.num_tokens) s.num_tokens = num_tokens;
  return true;
}

int32_t KvCache::num_tokens(SeqId seq) const { return sequence(seq).num_tokens; }

const std::vector<int32_t>& KvCache::block_table(SeqId seq) const { return sequence(seq).block_table; }

const KvCache::Sequence& KvCache::sequence(SeqId seq) const {
  auto it = sequences_.find(seq);
  KVDESK_ASSERT(it != sequences_.end());
  return it->second;
}

PagedSeq KvCache::view(SeqId seq, int32_t num_tokens) const {
  const Sequence& s = sequence(seq);
  KVDESK_ASSERT(num_tokens <= s.num_tokens);
  return PagedSeq{s.block_table.data(), num_tokens};
}

void KvCache::check_invariants() const {
  pool_.check_invariants();
  std::vector<int32_t> holders(pool_.num_blocks(), 0);
  for (const auto& [id, s] : sequences_) {
    KVDESK_ASSERT(int32_t(s.block_table.size()) == blocks_for(s.num_tokens, block_size()));
    for (int32_t block : s.block_table) ++holders[block];
  }
  for (int32_t b = 0; b < pool_.num_blocks(); ++b) KVDESK_ASSERT(holders[b] == pool_.ref_count(b));
}

}  // namespace kvdesk
