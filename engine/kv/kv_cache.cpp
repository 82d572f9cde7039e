// KvCache: block tables over a BlockPool, the prefix cache (chained hashes, token compare,
// publication serials), copy-on-write, swapping out and in, and the statistics snapshot.
#include "engine/kv/kv_cache.h"

#include <algorithm>

#include "engine/error.h"
#include "kernels/check.h"

namespace kvdesk {
namespace {


double percent(int64_t part, int64_t whole) { return whole > 0 ? 100.0 * double(part) / double(whole) : 0.0; }

}  // namespace

KvCache::KvCache(const ModelConfig& model, const KvCacheConfig& config)
    : config_(config),
      max_context_(model.context_length),
      num_layers_(model.block_count),
      num_kv_heads_(model.head_count_kv),
      storage_(model, config.layout, config.device_pool),
      pool_(config.layout.num_blocks),
      root_hash_(prefix_root_hash(config.identity, config.layout.k_type, config.layout.v_type,
                                  config.layout.block_size)),
      block_tokens_(size_t(config.layout.num_blocks) * size_t(config.layout.block_size), 0),
      publication_(size_t(config.layout.num_blocks), 0),
      parent_publication_(size_t(config.layout.num_blocks), 0) {}

const KvLayout& KvCache::layout() const { return storage_.layout(); }
bool KvCache::on_device() const { return storage_.on_device(); }
int32_t KvCache::block_size() const { return storage_.layout().block_size; }
size_t KvCache::bytes_per_block() const { return storage_.bytes_per_block(); }
size_t KvCache::bytes_per_token() const { return bytes_per_block() / size_t(block_size()); }
int32_t KvCache::num_blocks() const { return pool_.num_blocks(); }
int32_t KvCache::num_available_blocks() const { return pool_.num_available(); }
PagedKvLayer KvCache::layer(int32_t index) const { return storage_.layer(index); }

// --- sequences -------------------------------------------------------------------------

SeqId KvCache::create_sequence() {
  const SeqId id = next_seq_id_++;
  sequences_.emplace(id, Sequence{});
  return id;
}

int32_t KvCache::attach_cached_prefix(SeqId seq, std::span<const int32_t> prompt) {
  Sequence& s = sequence(seq);
  KVDESK_ASSERT(!s.swapped && s.tokens.empty());
  if (!config_.prefix_caching || prompt.empty()) return 0;
  const int32_t B = block_size();
  const int32_t lookups = int32_t(prompt.size() - 1) / B;   // the last token is always computed
  ChainLink parent{root_hash_, 0};
  int32_t hits = 0;
  for (; hits < lookups; ++hits) {
    const std::span<const int32_t> tokens = prompt.subspan(size_t(hits) * size_t(B), size_t(B));
    const uint64_t hash = block_hash_(parent.hash, tokens);
    const std::optional<int32_t> block = find_cached(hash, parent.publication, tokens);
    if (!block) break;
    pool_.retain(*block);
    s.block_table.push_back(*block);
    parent = ChainLink{hash, publication_[*block]};
    s.chain.push_back(parent);
  }
  const int32_t attached = hits * B;
  s.tokens.assign(prompt.begin(), prompt.begin() + attached);
  s.num_computed = attached;
  prefix_hits_ += uint64_t(hits);
  prefix_misses_ += uint64_t(lookups - hits);
  prefix_hit_tokens_ += uint64_t(attached);
  return attached;
}

int32_t KvCache::blocks_needed(SeqId seq, int32_t num_new_tokens) const {
  const Sequence& s = sequence(seq);
  KVDESK_ASSERT(!s.swapped && num_new_tokens >= 0);
  const int32_t total = s.num_slots() + num_new_tokens;
  const int32_t growth = kv_blocks_for(total, block_size()) - int32_t(s.block_table.size());
  return growth + (needs_copy_on_write(s, num_new_tokens) ? 1 : 0);
}

bool KvCache::append(SeqId seq, std::span<const int32_t> tokens) {
  const int32_t n = int32_t(tokens.size());
  if (blocks_needed(seq, n) > pool_.num_available()) return false;
  Sequence& s = sequence(seq);
  if (needs_copy_on_write(s, n)) copy_on_write_last_block(s);
  s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
  const int32_t blocks = kv_blocks_for(s.num_slots(), block_size());
  while (int32_t(s.block_table.size()) < blocks) s.block_table.push_back(take_block());
  return true;
}

// Only a partly filled last block is ever written into: full blocks are never appended to,
// so a full shared block (a cached prefix) is read-only for every holder. A published block
// is partly filled only in a truncated fork, which must not overwrite the cached rows.
bool KvCache::needs_copy_on_write(const Sequence& s, int32_t num_new_tokens) const {
  if (num_new_tokens == 0 || s.num_slots() % block_size() == 0) return false;
  const int32_t last = s.block_table.back();
  return pool_.ref_count(last) > 1 || pool_.is_published(last);
}

void KvCache::copy_on_write_last_block(Sequence& s) {
  const int32_t shared = s.block_table.back();
  const int32_t copy = take_block();
  storage_.copy_block(shared, copy);
  pool_.release(shared);
  s.block_table.back() = copy;
  ++cow_copies_;
}

int32_t KvCache::take_block() {
  const std::optional<int32_t> block = pool_.allocate();
  KVDESK_ASSERT(block.has_value());
  return *block;
}

void KvCache::mark_computed(SeqId seq, int32_t num_computed) {
  Sequence& s = sequence(seq);
  KVDESK_ASSERT(!s.swapped && num_computed >= s.num_computed && num_computed <= int32_t(s.tokens.size()));
  s.num_computed = num_computed;
  const int32_t full_blocks = num_computed / block_size();
  while (!s.compacted && int32_t(s.chain.size()) < full_blocks) s.chain.push_back(link_block(s, int32_t(s.chain.size())));
  if (s.retention && num_computed == int32_t(s.tokens.size())) apply_retention(seq);
}

// Hashes logical block `index` of s (full and computed) and publishes its physical block,
// unless the prefix cache is off or the parent has no publication. When the hash is taken by
// an identical block (same tokens after the same prefix, e.g. two sequences prefilled the same
// prompt at once), the link names that block and this one stays private: the index keeps the
// first, no block is swapped under a running sequence. A collision leaves the block private.
KvCache::ChainLink KvCache::link_block(const Sequence& s, int32_t index) {
  const int32_t B = block_size();
  const ChainLink parent = index == 0 ? ChainLink{root_hash_, 0} : s.chain[size_t(index) - 1];
  const std::span<const int32_t> tokens(s.tokens.data() + size_t(index) * size_t(B), size_t(B));
  ChainLink link{block_hash_(parent.hash, tokens), 0};
  if (!config_.prefix_caching || (index > 0 && parent.publication == 0)) return link;
  const int32_t block = s.block_table[size_t(index)];
  if (pool_.is_published(block)) {   // a fork sharing this block computed it first
    link.publication = publication_[block];
  } else if (const std::optional<int32_t> same = find_cached(link.hash, parent.publication, tokens)) {
    link.publication = publication_[*same];
  } else {
    link.publication = publish(block, link.hash, parent.publication, tokens);
  }
  return link;
}

uint64_t KvCache::publish(int32_t block, uint64_t hash, uint64_t parent_publication,
                          std::span<const int32_t> tokens) {
  if (!pool_.publish(block, hash)) return 0;
  std::copy(tokens.begin(), tokens.end(), block_tokens_.begin() + ptrdiff_t(block) * block_size());
  parent_publication_[block] = parent_publication;
  publication_[block] = next_publication_++;
  return publication_[block];
}

std::optional<int32_t> KvCache::find_cached(uint64_t hash, uint64_t parent_publication,
                                            std::span<const int32_t> tokens) const {
  const std::optional<int32_t> block = pool_.find(hash);
  if (!block || parent_publication_[*block] != parent_publication) return std::nullopt;
  const std::span<const int32_t> stored = published_tokens(*block);
  if (!std::equal(tokens.begin(), tokens.end(), stored.begin(), stored.end())) return std::nullopt;
  return block;
}

std::span<const int32_t> KvCache::published_tokens(int32_t block) const {
  return {block_tokens_.data() + size_t(block) * size_t(block_size()), size_t(block_size())};
}

// note: a fork made while seq has uncomputed tokens shares their blocks; whichever sequence
// computes them first writes the same tokens' KV there, so the other reads equal values.
SeqId KvCache::fork(SeqId seq) {
  const Sequence& s = sequence(seq);
  KVDESK_ASSERT(!s.swapped);
  for (int32_t block : s.block_table) pool_.retain(block);
  const SeqId id = next_seq_id_++;
  sequences_.emplace(id, s);
  ++forks_;
  return id;
}

SeqId KvCache::fork_prefix(SeqId seq, int32_t num_tokens) {
  KVDESK_ASSERT(can_fork_prefix(seq));
  const Sequence& s = sequence(seq);
  KVDESK_ASSERT(num_tokens > 0 && num_tokens <= s.num_computed);
  const int32_t B = block_size();
  Sequence branch;
  branch.tokens.assign(s.tokens.begin(), s.tokens.begin() + num_tokens);
  branch.block_table.assign(s.block_table.begin(), s.block_table.begin() + kv_blocks_for(num_tokens, B));
  branch.chain.assign(s.chain.begin(), s.chain.begin() + num_tokens / B);
  branch.num_computed = num_tokens;
  for (int32_t block : branch.block_table) pool_.retain(block);
  const SeqId id = next_seq_id_++;
  sequences_.emplace(id, std::move(branch));
  ++forks_;
  return id;
}

bool KvCache::can_fork_prefix(SeqId seq) const {
  const Sequence& s = sequence(seq);
  return !s.swapped && !s.compacted;
}

void KvCache::free_sequence(SeqId seq) {
  auto it = sequences_.find(seq);
  KVDESK_ASSERT(it != sequences_.end());
  release_table(it->second);
  sequences_.erase(it);
}

// Tail blocks first: they reach the LRU list before the head, so a cached chain loses its
// children before its parents and the longest shared prefixes are evicted last (as vLLM).
void KvCache::release_table(Sequence& s) {
  for (auto it = s.block_table.rbegin(); it != s.block_table.rend(); ++it) pool_.release(*it);
  s.block_table.clear();
}

int32_t KvCache::num_tokens(SeqId seq) const { return int32_t(sequence(seq).tokens.size()); }
int32_t KvCache::num_computed(SeqId seq) const { return sequence(seq).num_computed; }
int32_t KvCache::num_evicted(SeqId seq) const { return sequence(seq).num_evicted; }
int32_t KvCache::num_slots(SeqId seq) const { return sequence(seq).num_slots(); }
const std::vector<int32_t>& KvCache::tokens(SeqId seq) const { return sequence(seq).tokens; }
const std::vector<int32_t>& KvCache::block_table(SeqId seq) const { return sequence(seq).block_table; }

KvCache::Sequence& KvCache::sequence(SeqId seq) {
  auto it = sequences_.find(seq);
  KVDESK_ASSERT(it != sequences_.end());
  return it->second;
}

const KvCache::Sequence& KvCache::sequence(SeqId seq) const {
  auto it = sequences_.find(seq);
  KVDESK_ASSERT(it != sequences_.end());
  return it->second;
}

// --- swapping ------------------------------------------------------------------------

// note: swap_in takes fresh blocks and loads every byte back, so a swapped sequence no longer
// shares its prefix blocks with others (they stay cached for new sequences). Its chain links
// are kept: blocks it computes later are still published under the right parents.
std::vector<uint8_t> KvCache::swap_out(SeqId seq) {
  Sequence& s = sequence(seq);
  KVDESK_ASSERT(!s.swapped);
  const size_t block_bytes = bytes_per_block();
  std::vector<uint8_t> blocks(s.block_table.size() * block_bytes);
  for (size_t i = 0; i < s.block_table.size(); ++i) {
    storage_.save_block(s.block_table[i], blocks.data() + i * block_bytes);
  }
  s.swapped_blocks = int32_t(s.block_table.size());
  release_table(s);
  s.swapped = true;
  return blocks;
}

bool KvCache::swap_in(SeqId seq, std::span<const uint8_t> blocks) {
  Sequence& s = sequence(seq);
  KVDESK_ASSERT(s.swapped && blocks.size() == size_t(s.swapped_blocks) * bytes_per_block());
  if (s.swapped_blocks > pool_.num_available()) return false;
  for (int32_t i = 0; i < s.swapped_blocks; ++i) {
    const int32_t block = take_block();
    storage_.load_block(block, blocks.data() + size_t(i) * bytes_per_block());
    s.block_table.push_back(block);
  }
  s.swapped_blocks = 0;
  s.swapped = false;
  return true;
}

bool KvCache::is_swapped(SeqId seq) const { return sequence(seq).swapped; }

int32_t KvCache::blocks_to_swap_in(SeqId seq) const { return sequence(seq).swapped_blocks; }

bool KvCache::is_compacted(SeqId seq) const { return sequence(seq).compacted; }

// --- a sequence's KV as bytes ------------------------------------------------------------

std::vector<uint8_t> KvCache::export_blocks(SeqId seq) const {
  KVDESK_ASSERT(can_fork_prefix(seq));
  const Sequence& s = sequence(seq);
  KVDESK_ASSERT(s.num_computed == int32_t(s.tokens.size()));
  const size_t block_bytes = bytes_per_block();
  std::vector<uint8_t> bytes(s.block_table.size() * block_bytes);
  for (size_t i = 0; i < s.block_table.size(); ++i) storage_.save_block(s.block_table[i], bytes.data() + i * block_bytes);
  return bytes;
}

std::optional<SeqId> KvCache::import_sequence(std::span<const int32_t> tokens, std::span<const uint8_t> blocks) {
  const int32_t num_blocks = kv_blocks_for(int64_t(tokens.size()), block_size());
  if (tokens.empty() || blocks.size() != size_t(num_blocks) * bytes_per_block()) return std::nullopt;
  if (num_blocks > pool_.num_available()) return std::nullopt;
  const SeqId id = create_sequence();
  Sequence& s = sequence(id);
  for (int32_t i = 0; i < num_blocks; ++i) {
    const int32_t block = take_block();
    storage_.load_block(block, blocks.data() + size_t(i) * bytes_per_block());
    s.block_table.push_back(block);
  }
  s.tokens.assign(tokens.begin(), tokens.end());
  mark_computed(id, int32_t(tokens.size()));
  ++imports_;
  return id;
}

PagedSeq KvCache::view(SeqId seq, int32_t num_positions) const {
  const Sequence& s = sequence(seq);
  const int32_t slots = num_positions - s.num_evicted;
  KVDESK_ASSERT(!s.swapped && slots >= 0 && slots <= s.num_slots());
  return PagedSeq{s.block_table.data(), slots};
}

// --- statistics --------------------------------------------------------------------------

KvSnapshot KvCache::snapshot() const {
  KvSnapshot snap;
  snap.layout = layout();
  snap.bytes_per_token = bytes_per_token();
  snap.bytes_per_block = bytes_per_block();
  snap.pool_bytes = storage_.total_bytes();
  snap.max_context = max_context_;
  fill_block_stats(snap);
  fill_waste_stats(snap);
  snap.prefix_hits = prefix_hits_;
  snap.prefix_misses = prefix_misses_;
  snap.prefix_hit_tokens = prefix_hit_tokens_;
  snap.prefix_hit_rate = prefix_hits_ + prefix_misses_ > 0
                             ? double(prefix_hits_) / double(prefix_hits_ + prefix_misses_) : 0.0;
  snap.evictions = pool_.num_evictions();
  snap.cow_copies = cow_copies_;
  snap.forks = forks_;
  snap.imports = imports_;
  snap.retention_compactions = retention_compactions_;
  snap.retention_blocks_freed = retention_blocks_freed_;
  return snap;
}

// Block states, sequences, and the filled slots of held blocks: a block shared by several
// tables is counted once, filled as far as its fullest holder wrote.
void KvCache::fill_block_stats(KvSnapshot& snap) const {
  const int32_t B = block_size();
  snap.blocks_total = pool_.num_blocks();
  snap.blocks.assign(size_t(snap.blocks_total), KvBlockInfo{});
  for (const auto& [id, s] : sequences_) {
    KvSequenceInfo info{id, s.num_slots(), s.block_table, 0, int32_t(s.tokens.size()), s.retention.has_value()};
    if (info.retained) {
      snap.retention_tokens_seen += info.tokens_seen;
      snap.retention_tokens_kept += info.num_tokens;
    }
    for (size_t i = 0; i < s.block_table.size(); ++i) {
      KvBlockInfo& block = snap.blocks[size_t(s.block_table[i])];
      block.filled_tokens = std::max(block.filled_tokens, std::min(B, info.num_tokens - int32_t(i) * B));
      info.shared_blocks += pool_.ref_count(s.block_table[i]) > 1 ? 1 : 0;
    }
    snap.sequences.push_back(std::move(info));
  }
  for (int32_t b = 0; b < snap.blocks_total; ++b) {
    KvBlockInfo& block = snap.blocks[size_t(b)];
    block.ref_count = pool_.ref_count(b);
    if (block.ref_count > 0) {
      block.state = block.ref_count > 1 ? BlockState::Shared : BlockState::Used;
      snap.tokens_stored += block.filled_tokens;
      ++snap.blocks_used;
      snap.blocks_shared += block.ref_count > 1 ? 1 : 0;
    } else if (pool_.is_cached(b)) {
      block.state = BlockState::Cached;
      block.filled_tokens = B;
      ++snap.blocks_cached;
    } else {
      ++snap.blocks_free;
    }
  }
}

// Waste of the paged layout against the alternatives. Both alternatives count each live (not
// swapped) sequence on its own, as those layouts cannot share: the contiguous one reserves
// max_context slots per sequence, a what-if block size rounds each sequence up to its blocks.
void KvCache::fill_waste_stats(KvSnapshot& snap) const {
  const int32_t B = block_size();
  const size_t per_token = snap.bytes_per_token;
  snap.slots_reserved = int64_t(snap.blocks_used) * B;
  snap.internal_waste_tokens = snap.slots_reserved - snap.tokens_stored;
  snap.internal_waste_bytes = size_t(snap.internal_waste_tokens) * per_token;
  snap.internal_waste_pct = percent(snap.internal_waste_tokens, snap.slots_reserved);
  std::vector<int64_t> live_lengths;
  for (const auto& [id, s] : sequences_) {
    if (!s.swapped) live_lengths.push_back(int64_t(s.num_slots()));
  }
  int64_t live_tokens = 0;
  for (int64_t n : live_lengths) live_tokens += n;
  snap.contiguous_reserved_tokens = int64_t(live_lengths.size()) * max_context_;
  snap.contiguous_waste_tokens = std::max<int64_t>(0, snap.contiguous_reserved_tokens - live_tokens);
  snap.contiguous_waste_bytes = size_t(snap.contiguous_waste_tokens) * per_token;
  snap.contiguous_waste_pct = percent(snap.contiguous_waste_tokens, snap.contiguous_reserved_tokens);
  for (int32_t size : kKvBlockSizes) {
    BlockSizeWhatIf what_if{size, 0, 0};
    for (int64_t n : live_lengths) what_if.waste_tokens += (n + size - 1) / size * size - n;
    what_if.waste_bytes = size_t(what_if.waste_tokens) * per_token;
    snap.what_if.push_back(what_if);
  }
}

// --- invariants ----------------------------------------------------------------------------

void KvCache::check_invariants() const {
  pool_.check_invariants();
  std::vector<int32_t> holders(size_t(pool_.num_blocks()), 0);
  for (const auto& [id, s] : sequences_) check_sequence(s, holders);
  for (int32_t b = 0; b < pool_.num_blocks(); ++b) {
    KVDESK_ASSERT(holders[size_t(b)] == pool_.ref_count(b));
    if (!pool_.is_published(b)) continue;
    KVDESK_ASSERT(publication_[b] > 0 && publication_[b] < next_publication_);
    KVDESK_ASSERT(parent_publication_[b] < publication_[b]);
  }
}

// Table length, the hash chain, and for every published block it holds: full, with its tokens.
void KvCache::check_sequence(const Sequence& s, std::vector<int32_t>& holders) const {
  const int32_t B = block_size();
  const int32_t n = s.num_slots();
  KVDESK_ASSERT(s.num_computed >= 0 && s.num_computed <= int32_t(s.tokens.size()));
  KVDESK_ASSERT(s.num_evicted >= 0 && (s.compacted || s.num_evicted == 0));
  KVDESK_ASSERT(s.compacted ? int32_t(s.chain.size()) <= s.num_computed / B : int32_t(s.chain.size()) == s.num_computed / B);
  uint64_t parent = root_hash_;
  for (size_t i = 0; i < s.chain.size(); ++i) {
    parent = block_hash_(parent, std::span<const int32_t>(s.tokens).subspan(i * size_t(B), size_t(B)));
    KVDESK_ASSERT(s.chain[i].hash == parent);
  }
  if (s.swapped) {
    KVDESK_ASSERT(s.block_table.empty() && s.swapped_blocks == kv_blocks_for(n, B));
    return;
  }
  KVDESK_ASSERT(s.swapped_blocks == 0 && int32_t(s.block_table.size()) == kv_blocks_for(n, B));
  for (size_t i = 0; i < s.block_table.size(); ++i) {
    const int32_t b = s.block_table[i];
    KVDESK_ASSERT(b >= 0 && b < pool_.num_blocks() && pool_.ref_count(b) >= 1);
    ++holders[size_t(b)];
    if (!pool_.is_published(b)) continue;
    const int32_t filled = std::min(B, n - int32_t(i) * B);
    const std::span<const int32_t> stored = published_tokens(b).first(size_t(filled));
    KVDESK_ASSERT(std::equal(stored.begin(), stored.end(), s.tokens.begin() + ptrdiff_t(i) * B));
    if (i < s.chain.size()) KVDESK_ASSERT(s.chain[i].hash == pool_.block_hash(b));
  }
}

}  // namespace kvdesk
