// KvCache: block tables (one per layer group) over a BlockPool, the prefix cache (chained
// hashes, token compare, publication serials), copy-on-write, sliding windows letting go of
// blocks, swapping out and in, and the statistics snapshot.
#include "engine/kv/kv_cache.h"

#include <algorithm>

#include "engine/error.h"
#include "kernels/check.h"

namespace kvdesk {
namespace {

double percent(int64_t part, int64_t whole) { return whole > 0 ? 100.0 * double(part) / double(whole) : 0.0; }

// The layout as this cache keeps it: newest rows in f32 only for low-bit KV in host memory
// (the CUDA forward reads every row as stored).
KvCacheConfig with_recent_rows_kept(KvCacheConfig config) {
  config.layout.recent_rows = config.device_pool ? 0 : kv_recent_rows(config.layout);
  return config;
}

}  // namespace

KvCache::KvCache(const ModelConfig& model, const KvCacheConfig& config)
    : config_(with_recent_rows_kept(config)),
      groups_(kv_layer_groups(model)),
      max_context_(model.context_length),
      num_layers_(model.block_count),
      num_kv_heads_(model.head_count_kv),
      kv_dim_(int32_t(model.kv_dim())),
      storage_(model, config_.layout, config.device_pool),
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
size_t KvCache::bytes_per_token() const {
  return bytes_per_block() * size_t(groups_.num_groups) / size_t(block_size());
}
int32_t KvCache::blocks_for_sequence(int64_t tokens, int32_t chunk_tokens) const {
  return groups_.blocks_for_sequence(tokens, block_size(), chunk_tokens);
}
int32_t KvCache::num_blocks() const { return pool_.num_blocks(); }
int32_t KvCache::num_available_blocks() const { return pool_.num_available(); }
const RecentRows& KvCache::recent_rows(SeqId seq) const { return sequence(seq).recent; }
RecentRows& KvCache::recent_rows(SeqId seq) { return sequence(seq).recent; }
PagedKvLayer KvCache::layer(int32_t index) const { return storage_.layer(index); }

// --- sequences -------------------------------------------------------------------------

SeqId KvCache::create_sequence() {
  const SeqId id = next_seq_id_++;
  sequences_.emplace(id, new_sequence());
  return id;
}

KvCache::Sequence KvCache::new_sequence() const {
  Sequence s;
  s.tables.resize(size_t(groups_.num_groups));
  s.recent = RecentRows(layout().recent_rows, num_layers_, kv_dim_);
  return s;
}

bool KvCache::holds(const Sequence& s, int32_t group, int32_t index) const {
  return !groups_.is_local(group) || index >= s.window_first;
}

int32_t KvCache::count_held(const Sequence& s, int32_t num_blocks) const {
  int32_t n = 0;
  for (int32_t g = 0; g < groups_.num_groups; ++g) n += num_blocks - (holds(s, g, 0) ? 0 : std::min(num_blocks, s.window_first));
  return n;
}

uint64_t KvCache::group_hash(uint64_t hash, int32_t group) const {
  return group == 0 ? hash : (hash ^ (0x9E3779B97F4A7C15ull * uint64_t(group))) * 0xBF58476D1CE4E5B9ull;
}

int32_t KvCache::attach_cached_prefix(SeqId seq, std::span<const int32_t> prompt) {
  Sequence& s = sequence(seq);
  KVDESK_ASSERT(!s.swapped && s.tokens.empty());
  if (!config_.prefix_caching || prompt.empty()) return 0;
  const int32_t B = block_size();
  const int32_t lookups = int32_t(prompt.size() - 1) / B;   // the last token is always computed
  const int32_t G = groups_.num_groups;
  std::vector<std::vector<int32_t>> found(static_cast<size_t>(G));   // [groups][hits] cached blocks, -1: a local one missing
  std::vector<ChainLink> links;
  ChainLink parent{root_hash_, 0};
  for (int32_t i = 0; i < lookups; ++i) {
    const std::span<const int32_t> tokens = prompt.subspan(size_t(i) * size_t(B), size_t(B));
    const uint64_t hash = block_hash_(parent.hash, tokens);
    std::vector<int32_t> blocks(size_t(G), -1);
    for (int32_t g = 0; g < G; ++g) blocks[size_t(g)] = find_cached(group_hash(hash, g), parent.publication, tokens).value_or(-1);
    if (std::any_of(blocks.begin(), blocks.begin() + groups_.num_global_groups, [](int32_t b) { return b < 0; })) break;
    for (int32_t g = 0; g < G; ++g) found[size_t(g)].push_back(blocks[size_t(g)]);
    parent = ChainLink{hash, publication_[blocks[0]]};
    links.push_back(parent);
  }
  int32_t hits = int32_t(links.size());
  while (hits > 0 && !window_cached(found, hits)) --hits;
  const int32_t attached = hits * B;
  s.window_first = groups_.windowed() ? groups_.first_needed_block(attached, B) : 0;
  for (int32_t g = 0; g < G; ++g) {
    for (int32_t i = 0; i < hits; ++i) {
      const int32_t block = holds(s, g, i) ? found[size_t(g)][size_t(i)] : -1;
      if (block >= 0) pool_.retain(block);
      s.tables[size_t(g)].push_back(block);
    }
  }
  s.chain.assign(links.begin(), links.begin() + hits);
  s.tokens.assign(prompt.begin(), prompt.begin() + attached);
  s.num_computed = attached;
  prefix_hits_ += uint64_t(hits);
  prefix_misses_ += uint64_t(lookups - hits);
  prefix_hit_tokens_ += uint64_t(attached);
  return attached;
}

bool KvCache::window_cached(const std::vector<std::vector<int32_t>>& found, int32_t blocks) const {
  const int32_t first = groups_.first_needed_block(blocks * block_size(), block_size());
  for (int32_t g = groups_.num_global_groups; g < groups_.num_groups; ++g) {
    for (int32_t i = first; i < blocks; ++i) {
      if (found[size_t(g)][size_t(i)] < 0) return false;
    }
  }
  return true;
}

int32_t KvCache::blocks_needed(SeqId seq, int32_t num_new_tokens) const {
  const Sequence& s = sequence(seq);
  KVDESK_ASSERT(!s.swapped && num_new_tokens >= 0);
  const int32_t total = s.num_slots() + num_new_tokens;
  const int32_t growth = kv_blocks_for(total, block_size()) - int32_t(s.tables[0].size());
  return growth * groups_.num_groups + copies_on_write(s, num_new_tokens);
}

bool KvCache::append(SeqId seq, std::span<const int32_t> tokens) {
  const int32_t n = int32_t(tokens.size());
  if (blocks_needed(seq, n) > pool_.num_available()) return false;
  Sequence& s = sequence(seq);
  for (int32_t g = 0; g < groups_.num_groups; ++g) {
    if (needs_copy_on_write(s, g, n)) copy_on_write_last_block(s, g);
  }
  s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
  const int32_t blocks = kv_blocks_for(s.num_slots(), block_size());
  for (std::vector<int32_t>& table : s.tables) {
    while (int32_t(table.size()) < blocks) table.push_back(take_block());
  }
  return true;
}

int32_t KvCache::copies_on_write(const Sequence& s, int32_t num_new_tokens) const {
  int32_t copies = 0;
  for (int32_t g = 0; g < groups_.num_groups; ++g) copies += needs_copy_on_write(s, g, num_new_tokens) ? 1 : 0;
  return copies;
}

// Only a partly filled last block is ever written into: full blocks are never appended to,
// so a full shared block (a cached prefix) is read-only for every holder. A published block
// is partly filled only in a truncated fork, which must not overwrite the cached rows. A
// local group always holds the last block: the next query's window reaches into it.
bool KvCache::needs_copy_on_write(const Sequence& s, int32_t group, int32_t num_new_tokens) const {
  if (num_new_tokens == 0 || s.num_slots() % block_size() == 0) return false;
  const int32_t last = s.tables[size_t(group)].back();
  return pool_.ref_count(last) > 1 || pool_.is_published(last);
}

void KvCache::copy_on_write_last_block(Sequence& s, int32_t group) {
  int32_t& last = s.tables[size_t(group)].back();
  const int32_t copy = take_block();
  storage_.copy_block(last, copy);
  pool_.release(last);
  last = copy;
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
  release_window(s);
  if (s.retention && num_computed == int32_t(s.tokens.size())) apply_retention(seq);
}

// Released in logical order, so the LRU list evicts a window's oldest blocks first.
void KvCache::release_window(Sequence& s) {
  if (!groups_.windowed()) return;
  const int32_t first = groups_.first_needed_block(s.num_computed, block_size());
  for (; s.window_first < first; ++s.window_first) {
    for (int32_t g = groups_.num_global_groups; g < groups_.num_groups; ++g) {
      int32_t& block = s.tables[size_t(g)][size_t(s.window_first)];
      pool_.release(block);
      block = -1;
    }
  }
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
  for (int32_t g = 0; g < groups_.num_groups; ++g) {
    const int32_t block = s.tables[size_t(g)][size_t(index)];
    if (block < 0) continue;
    const uint64_t hash = group_hash(link.hash, g);
    uint64_t publication = 0;
    if (pool_.is_published(block)) {   // a fork sharing this block computed it first
      publication = publication_[block];
    } else if (const std::optional<int32_t> same = find_cached(hash, parent.publication, tokens)) {
      publication = publication_[*same];
    } else {
      publication = publish(block, hash, parent.publication, tokens);
    }
    if (g == 0) link.publication = publication;
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
  for (const std::vector<int32_t>& table : s.tables) {
    for (int32_t block : table) {
      if (block >= 0) pool_.retain(block);
    }
  }
  const SeqId id = next_seq_id_++;
  sequences_.emplace(id, s);
  ++forks_;
  return id;
}

SeqId KvCache::fork_prefix(SeqId seq, int32_t num_tokens) {
  KVDESK_ASSERT(can_fork_prefix(seq, num_tokens));
  const Sequence& s = sequence(seq);
  KVDESK_ASSERT(num_tokens > 0 && num_tokens <= s.num_computed);
  const int32_t B = block_size();
  const int32_t blocks = kv_blocks_for(num_tokens, B);
  Sequence branch = new_sequence();
  branch.tokens.assign(s.tokens.begin(), s.tokens.begin() + num_tokens);
  branch.chain.assign(s.chain.begin(), s.chain.begin() + num_tokens / B);
  branch.num_computed = num_tokens;
  branch.recent = s.recent;
  branch.recent.truncate(num_tokens);
  branch.window_first = groups_.windowed() ? groups_.first_needed_block(num_tokens, B) : 0;
  for (int32_t g = 0; g < groups_.num_groups; ++g) {
    for (int32_t i = 0; i < blocks; ++i) {
      const int32_t block = holds(branch, g, i) ? s.tables[size_t(g)][size_t(i)] : -1;
      if (block >= 0) pool_.retain(block);
      branch.tables[size_t(g)].push_back(block);
    }
  }
  const SeqId id = next_seq_id_++;
  sequences_.emplace(id, std::move(branch));
  ++forks_;
  return id;
}

bool KvCache::can_fork_prefix(SeqId seq, int32_t num_tokens) const {
  return !sequence(seq).swapped && keeps_prefix(seq, num_tokens);
}

bool KvCache::keeps_prefix(SeqId seq, int32_t num_tokens) const {
  const Sequence& s = sequence(seq);
  return !s.compacted && (!groups_.windowed() || s.window_first <= groups_.first_needed_block(num_tokens, block_size()));
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
  for (int32_t i = int32_t(s.tables[0].size()) - 1; i >= 0; --i) {
    for (const std::vector<int32_t>& table : s.tables) {
      if (table[size_t(i)] >= 0) pool_.release(table[size_t(i)]);
    }
  }
  for (std::vector<int32_t>& table : s.tables) table.clear();
}

int32_t KvCache::num_tokens(SeqId seq) const { return int32_t(sequence(seq).tokens.size()); }
int32_t KvCache::num_computed(SeqId seq) const { return sequence(seq).num_computed; }
int32_t KvCache::num_evicted(SeqId seq) const { return sequence(seq).num_evicted; }
int32_t KvCache::num_slots(SeqId seq) const { return sequence(seq).num_slots(); }
const std::vector<int32_t>& KvCache::tokens(SeqId seq) const { return sequence(seq).tokens; }
const std::vector<int32_t>& KvCache::block_table(SeqId seq) const { return sequence(seq).tables[0]; }
int32_t KvCache::held_blocks(SeqId seq) const {
  const Sequence& s = sequence(seq);
  return s.swapped ? 0 : count_held(s, int32_t(s.tables[0].size()));
}

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

// The held blocks of s's first num_blocks logical blocks, each logical block's groups in
// order: the order of swapped and exported bytes.
template <class Fn>
void KvCache::for_each_held(const Sequence& s, int32_t num_blocks, Fn&& fn) const {
  for (int32_t i = 0; i < num_blocks; ++i) {
    for (int32_t g = 0; g < groups_.num_groups; ++g) {
      if (holds(s, g, i)) fn(g, i);
    }
  }
}

// Takes the blocks s holds for num_blocks logical blocks and loads them from bytes (in
// for_each_held's order); the caller checked capacity.
void KvCache::fill_tables_from(Sequence& s, int32_t num_blocks, const uint8_t* bytes) {
  for (std::vector<int32_t>& table : s.tables) table.assign(size_t(num_blocks), -1);
  size_t offset = 0;
  for_each_held(s, num_blocks, [&](int32_t g, int32_t i) {
    const int32_t block = take_block();
    storage_.load_block(block, bytes + offset);
    offset += bytes_per_block();
    s.tables[size_t(g)][size_t(i)] = block;
  });
}

// note: swap_in takes fresh blocks and loads every byte back, so a swapped sequence no longer
// shares its prefix blocks with others (they stay cached for new sequences). Its chain links
// are kept: blocks it computes later are still published under the right parents.
std::vector<uint8_t> KvCache::swap_out(SeqId seq) {
  Sequence& s = sequence(seq);
  KVDESK_ASSERT(!s.swapped);
  std::vector<uint8_t> blocks = export_held(s);
  s.swapped_blocks = int32_t(blocks.size() / bytes_per_block());
  release_table(s);
  s.swapped = true;
  return blocks;
}

bool KvCache::swap_in(SeqId seq, std::span<const uint8_t> blocks) {
  Sequence& s = sequence(seq);
  KVDESK_ASSERT(s.swapped && blocks.size() == size_t(s.swapped_blocks) * bytes_per_block());
  if (s.swapped_blocks > pool_.num_available()) return false;
  fill_tables_from(s, kv_blocks_for(s.num_slots(), block_size()), blocks.data());
  s.swapped_blocks = 0;
  s.swapped = false;
  return true;
}

bool KvCache::is_swapped(SeqId seq) const { return sequence(seq).swapped; }

int32_t KvCache::blocks_to_swap_in(SeqId seq) const { return sequence(seq).swapped_blocks; }


// --- a sequence's KV as bytes ------------------------------------------------------------

std::vector<uint8_t> KvCache::export_held(const Sequence& s) const {
  const int32_t num_blocks = int32_t(s.tables[0].size());
  std::vector<uint8_t> bytes(size_t(count_held(s, num_blocks)) * bytes_per_block());
  size_t offset = 0;
  for_each_held(s, num_blocks, [&](int32_t g, int32_t i) {
    storage_.save_block(s.tables[size_t(g)][size_t(i)], bytes.data() + offset);
    offset += bytes_per_block();
  });
  return bytes;
}

std::vector<uint8_t> KvCache::export_blocks(SeqId seq) const {
  const Sequence& s = sequence(seq);
  KVDESK_ASSERT(can_fork_prefix(seq, s.num_computed) && s.num_computed == int32_t(s.tokens.size()));
  return export_held(s);
}

std::optional<SeqId> KvCache::import_sequence(std::span<const int32_t> tokens, std::span<const uint8_t> blocks) {
  if (tokens.empty()) return std::nullopt;
  const int32_t num_blocks = kv_blocks_for(int64_t(tokens.size()), block_size());
  Sequence s = new_sequence();
  s.window_first = groups_.windowed() ? groups_.first_needed_block(int32_t(tokens.size()), block_size()) : 0;
  const int32_t held = count_held(s, num_blocks);
  if (blocks.size() != size_t(held) * bytes_per_block() || held > pool_.num_available()) return std::nullopt;
  fill_tables_from(s, num_blocks, blocks.data());
  s.tokens.assign(tokens.begin(), tokens.end());
  const SeqId id = next_seq_id_++;
  sequences_.emplace(id, std::move(s));
  mark_computed(id, int32_t(tokens.size()));
  ++imports_;
  return id;
}

PagedSeq KvCache::view(SeqId seq, int32_t num_positions, int32_t layer) const {
  const Sequence& s = sequence(seq);
  const int32_t slots = num_positions - s.num_evicted;
  KVDESK_ASSERT(!s.swapped && slots >= 0 && slots <= s.num_slots());
  return PagedSeq{s.tables[size_t(groups_.group_of_layer[size_t(layer)])].data(), slots};
}

PagedSeq KvCache::view(SeqId seq, int32_t num_positions) const {
  const Sequence& s = sequence(seq);
  const int32_t slots = num_positions - s.num_evicted;
  KVDESK_ASSERT(!s.swapped && slots >= 0 && slots <= s.num_slots());
  return PagedSeq{s.tables[0].data(), slots};
}

// --- statistics --------------------------------------------------------------------------

KvSnapshot KvCache::snapshot() const {
  KvSnapshot snap;
  snap.layout = layout();
  snap.bytes_per_token = bytes_per_token();
  snap.bytes_per_block = bytes_per_block();
  for (const auto& [id, s] : sequences_) snap.recent_row_bytes += s.recent.bytes();
  snap.pool_bytes = storage_.total_bytes();
  snap.max_context = max_context_;
  snap.layer_groups = groups_.num_groups;
  snap.local_layer_groups = groups_.num_groups - groups_.num_global_groups;
  snap.layers_per_block = groups_.layers_per_block;
  snap.sliding_window = groups_.window;
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
    KvSequenceInfo info;
    info.seq_id = id;
    info.num_tokens = s.num_slots();
    info.block_table = s.tables[0];
    info.tokens_seen = int32_t(s.tokens.size());
    info.retained = s.retention.has_value();
    if (info.retained) {
      snap.retention_tokens_seen += info.tokens_seen;
      snap.retention_tokens_kept += info.num_tokens;
    }
    for (int32_t g = 0; g < groups_.num_groups; ++g) {
      const std::vector<int32_t>& table = s.tables[size_t(g)];
      for (size_t i = 0; i < table.size(); ++i) {
        if (table[i] < 0) continue;
        KvBlockInfo& block = snap.blocks[size_t(table[i])];
        block.filled_tokens = std::max(block.filled_tokens, std::min(B, info.num_tokens - int32_t(i) * B));
        if (g > 0) info.group_blocks.push_back(table[i]);
      }
    }
    for (int32_t block : info.block_table) info.shared_blocks += pool_.ref_count(block) > 1 ? 1 : 0;
    info.held_blocks = s.swapped ? 0 : count_held(s, int32_t(s.tables[0].size()));
    info.full_attention_blocks = s.swapped ? 0 : int32_t(s.tables[0].size()) * groups_.num_groups;
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
  snap.internal_waste_bytes = size_t(snap.internal_waste_tokens) * snap.bytes_per_block / size_t(B);
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
  KVDESK_ASSERT(int32_t(s.tables.size()) == groups_.num_groups);
  KVDESK_ASSERT(groups_.windowed() ? s.window_first <= groups_.first_needed_block(s.num_computed, B) : s.window_first == 0);
  if (s.swapped) {
    KVDESK_ASSERT(s.swapped_blocks == count_held(s, kv_blocks_for(n, B)));
    for (const std::vector<int32_t>& table : s.tables) KVDESK_ASSERT(table.empty());
    return;
  }
  KVDESK_ASSERT(s.swapped_blocks == 0);
  for (int32_t g = 0; g < groups_.num_groups; ++g) {
    const std::vector<int32_t>& table = s.tables[size_t(g)];
    KVDESK_ASSERT(int32_t(table.size()) == kv_blocks_for(n, B));
    for (size_t i = 0; i < table.size(); ++i) {
      const int32_t b = table[i];
      KVDESK_ASSERT((b >= 0) == holds(s, g, int32_t(i)));
      if (b < 0) continue;
      KVDESK_ASSERT(b < pool_.num_blocks() && pool_.ref_count(b) >= 1);
      ++holders[size_t(b)];
      if (!pool_.is_published(b)) continue;
      const int32_t filled = std::min(B, n - int32_t(i) * B);
      const std::span<const int32_t> stored = published_tokens(b).first(size_t(filled));
      KVDESK_ASSERT(std::equal(stored.begin(), stored.end(), s.tokens.begin() + ptrdiff_t(i) * B));
      if (i < s.chain.size()) KVDESK_ASSERT(group_hash(s.chain[i].hash, g) == pool_.block_hash(b));
    }
  }
}

}  // namespace kvdesk
