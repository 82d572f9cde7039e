// KvCache: the paged KV cache of one loaded model (the PagedAttention idea). Keys and values
// live in one pool of fixed-size blocks (KvStorage). Layers are grouped (kv_layer_groups.h):
// usually one group of every layer, so a block id names the same slot range in every layer
// and a sequence has one block table (vLLM's layout: per-layer tensors, shared ids); a model
// with sliding-window layers has several groups of equal blocks, and a sequence one table per
// group, each taking blocks from the same pool. A block is taken only when a token needs it.
//
// Sharing: blocks are reference counted. A full block whose KV has been computed is published
// in the prefix cache under a hash chained over (parent block's hash, its token ids, the
// cache identity: model, KV types, RoPE settings), each group's block under that hash mixed
// with its group. A new sequence attaches the longest cached prefix of its prompt (tokens
// compared too: a hash collision never serves wrong KV) whose blocks every group still has
// (a local group: those of the last window) and skips its prefill. fork() shares every
// block; the first write into a shared, partly filled block copies it first (copy-on-write),
// so no sequence ever reads another's tokens. fork_prefix() forks only a sequence's first
// tokens (a branch: a regenerated answer, an edited message): its full blocks are shared, and
// its partly filled last block, shared or a published full block it reads only the start of,
// is copied once, at the first write into it. Blocks whose sequences ended stay cached
// (ref_count 0, findable) until space is needed; then the least recently used unreferenced
// block is evicted first, never a referenced one.
//
// Sliding windows: once positions [0, num_computed) have KV, a local group lets go of the
// logical blocks before window_first = first_needed_block(num_computed) (they stay cached,
// findable, while the pool has room): no query still to come reads them. A branch at an
// earlier point needs the local blocks of its own window, so fork_prefix is possible only
// where they are still held (can_fork_prefix).
//
// Retention (engine/kv/kv_retention.h): a sequence may drop tokens. It then holds num_slots =
// num_tokens - num_evicted rows; position p (tokens seen count positions) is written at slot
// p - num_evicted, and keys keep the RoPE of their original position. Compaction copies shared
// blocks before writing, unpublishes the published ones it writes into, and a compacted
// sequence publishes no more blocks (kv_cache_retention.cpp). Models with sliding-window
// groups refuse retention: their local layers already keep only a window.
//
// Invariants (check_invariants()):
// - every group's table of a live sequence has ceil(num_slots / block_size) entries; a global
//   group's are all blocks with ref_count >= 1, a local group's are -1 before window_first and
//   blocks from it on; every block's ref_count equals the number of table entries holding it;
// - a block in the prefix-cache index has a full, computed block of tokens behind it; blocks
//   with ref_count 0 are either free or cached (evictable), never both; a sequence holding a
//   published block fills it, or reads only its start (a truncated fork's last block, whose
//   tokens begin the published ones) and copies it before writing;
// - num_computed <= num_tokens for every sequence; a sequence never compacted has
//   num_evicted 0, a compacted one links no chain block past the first one it rewrote.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "engine/kv/block_pool.h"
#include "engine/kv/kv_layer_groups.h"
#include "engine/kv/kv_retention.h"
#include "engine/kv_snapshot.h"
#include "engine/kv/kv_storage.h"
#include "engine/model/model_config.h"
#include "engine/kv/prefix_hash.h"
#include "engine/kv/recent_rows.h"

namespace kvdesk {

using SeqId = int32_t;

struct KvCacheConfig {
  KvLayout layout;
  bool prefix_caching = true;
  uint64_t identity = 0;   // hash of what else changes the KV: model file, RoPE settings
  // Where the pool's bytes live: empty for host memory; the CUDA backend's device pool
  // otherwise (kv_storage.h says how the two stay consistent). Retention, which moves rows
  // on the host, is refused for a device pool.
  KvDevicePoolFactory device_pool;
};

class KvCache {
 public:
  KvCache(const ModelConfig& model, const KvCacheConfig& config);

  const KvLayout& layout() const;
  bool on_device() const;   // the pool's bytes are in device memory (layer() views point there)
  int32_t block_size() const;
  const KvLayerGroups& layer_groups() const { return groups_; }
  size_t bytes_per_block() const;
  // K and V of one token in every layer (the KV arithmetic, as if no layer had a window).
  size_t bytes_per_token() const;
  // Pool blocks a sequence of `tokens` positions holds at its peak (kv_blocks_for_sequence).
  int32_t blocks_for_sequence(int64_t tokens, int32_t chunk_tokens) const;

  // --- sequences -----------------------------------------------------------------------
  SeqId create_sequence();
  // For an empty sequence: attaches the longest run of cached full blocks that hold exactly
  // the first tokens of prompt, always leaving at least one prompt token to compute (its
  // logits are needed). Returns the tokens attached (a multiple of block_size); they count as
  // appended and computed. Counts prefix hits, misses and saved tokens.
  int32_t attach_cached_prefix(SeqId seq, std::span<const int32_t> prompt);
  // Blocks append(seq, n) would take from the pool (new blocks in every group + copy-on-write
  // copies).
  int32_t blocks_needed(SeqId seq, int32_t num_new_tokens) const;
  // Appends tokens: positions [num_tokens, num_tokens + n) become writable. Takes free
  // blocks, evicting least recently used cached ones when no free block is left; copies a
  // shared, partly filled last block first. false, and no change, when the pool cannot.
  bool append(SeqId seq, std::span<const int32_t> tokens);
  // The forward pass has written KV for positions [0, num_computed): blocks that became
  // full are published in the prefix cache. With retention set and every token computed,
  // the sequence is then compacted to its budget when its policy says so.
  void mark_computed(SeqId seq, int32_t num_computed);
  // A new sequence sharing every block of seq (regenerate, branches, n > 1 samples).
  SeqId fork(SeqId seq);
  // A new sequence holding the first num_tokens tokens of seq, all computed (0 < num_tokens
  // <= num_computed(seq), can_fork_prefix). Full blocks are shared, the partly filled last
  // block is copied at the first append.
  SeqId fork_prefix(SeqId seq, int32_t num_tokens);
  // seq is not swapped and keeps_prefix(seq, num_tokens).
  bool can_fork_prefix(SeqId seq, int32_t num_tokens) const;
  // seq's rows still match its token prefix (no retention compaction) and its local groups
  // still hold the window that a branch after num_tokens tokens reads; in the pool or swapped.
  bool keeps_prefix(SeqId seq, int32_t num_tokens) const;
  // Drops the sequence's references; its computed full blocks stay cached.
  void free_sequence(SeqId seq);

  int32_t num_tokens(SeqId seq) const;     // positions seen
  int32_t num_computed(SeqId seq) const;
  int32_t num_evicted(SeqId seq) const;    // positions dropped by retention
  int32_t num_slots(SeqId seq) const;      // rows held: num_tokens - num_evicted
  const std::vector<int32_t>& tokens(SeqId seq) const;
  // The table of group 0 (every layer's, without sliding windows): one block per logical block.
  const std::vector<int32_t>& block_table(SeqId seq) const;
  // Blocks seq holds in every group (its share of the pool).
  int32_t held_blocks(SeqId seq) const;

  // --- retention (engine/kv/kv_retention.h) ----------------------------------------------
  // Starts retention for seq, or a new turn of it (snapkv compresses again after prompt_end).
  // Throws kvdesk::Error for a pool in device memory (compaction moves rows on the host) and
  // for a model with sliding-window groups.
  void set_retention(SeqId seq, const RetentionOptions& options, int32_t prompt_end);
  // The sequence's retention state (the model adds attention to it); nullptr without.
  RetentionState* retention(SeqId seq);
  // Moves each (layer, kv head)'s kept slots, kept[layer * kv_heads + head] ascending and all
  // of one count, down to slots [0, count) and frees the trailing blocks. false, and no
  // change, when the pool cannot provide copies of the shared blocks it must write.
  bool compact(SeqId seq, const std::vector<std::vector<int32_t>>& kept);

  // --- swapping (the host tier, engine/kv/host_tier.h, keeps the bytes) -----------------
  // Releases the sequence's blocks and returns their bytes in stored form,
  // [blocks][bytes_per_block()]. A swapped sequence keeps its tokens but cannot be appended
  // to or read until swap_in.
  std::vector<uint8_t> swap_out(SeqId seq);
  // Takes blocks back and loads blocks (swap_out's bytes for seq) into them; false (still
  // swapped) when the pool cannot provide them yet.
  bool swap_in(SeqId seq, std::span<const uint8_t> blocks);
  bool is_swapped(SeqId seq) const;
  int32_t blocks_to_swap_in(SeqId seq) const;


  // --- a sequence's KV as bytes (a conversation saved with it) ---------------------------
  // The bytes of seq's blocks in their stored form, [blocks][bytes_per_block()] in logical
  // order, each logical block's groups in order, the blocks a local group let go left out
  // (all tokens computed; can_fork_prefix).
  std::vector<uint8_t> export_blocks(SeqId seq) const;
  // A new sequence holding tokens with the KV in blocks (export_blocks' form, from a pool of
  // the same layout and model), all computed; its full blocks are published. nullopt, and no
  // change, when the bytes do not fit tokens or the pool cannot provide the blocks.
  std::optional<SeqId> import_sequence(std::span<const int32_t> tokens, std::span<const uint8_t> blocks);

  // --- for the kernels -----------------------------------------------------------------
  PagedKvLayer layer(int32_t index) const;
  // What attention over positions [0, num_positions) of seq reads: its first
  // num_positions - num_evicted slots, through the table of layer's group.
  PagedSeq view(SeqId seq, int32_t num_positions, int32_t layer) const;
  // The same through group 0's table (every block present): for callers that count slots.
  PagedSeq view(SeqId seq, int32_t num_positions) const;
  // The sequence's newest rows in f32 (layout().recent_rows of them per layer; none for a pool
  // without them): the forward stores the rows it writes and reads them back for attention.
  const RecentRows& recent_rows(SeqId seq) const;
  RecentRows& recent_rows(SeqId seq);

  // --- capacity and statistics ---------------------------------------------------------
  int32_t num_blocks() const;
  int32_t num_available_blocks() const;   // free + cached (evictable)
  KvSnapshot snapshot() const;
  void check_invariants() const;

 private:
  friend struct KvCacheTestAccess;   // tests inject a colliding block hash

  // One full, computed logical block of a sequence in the hash chain. publication names the
  // published block holding exactly this prefix (this sequence's own block, or an identical
  // one published first), 0 when there is none; a child is published only under a parent
  // that has one.
  struct ChainLink {
    uint64_t hash = 0;
    uint64_t publication = 0;
  };
  struct Sequence {
    std::vector<int32_t> tokens;        // [num_tokens] every position seen
    // [groups][ceil(num_slots / block_size)] blocks per layer group; a local group's entries
    // before window_first are -1. Every table empty while swapped.
    std::vector<std::vector<int32_t>> tables;
    std::vector<ChainLink> chain;       // [num_computed / block_size]
    int32_t num_computed = 0;
    int32_t window_first = 0;           // local groups hold logical blocks from here on
    bool swapped = false;
    int32_t swapped_blocks = 0;         // blocks whose bytes swap_out handed out, while swapped
    int32_t num_evicted = 0;            // positions dropped by retention
    bool compacted = false;             // rows moved: blocks no longer match token prefixes
    RecentRows recent;                  // newest rows in f32; copied by fork, cut by fork_prefix
    std::optional<RetentionState> retention;

    int32_t num_slots() const { return int32_t(tokens.size()) - num_evicted; }
  };

  Sequence& sequence(SeqId seq);
  const Sequence& sequence(SeqId seq) const;
  Sequence new_sequence() const;
  // Whether group g of s holds logical block `index` (not let go by a sliding window).
  bool holds(const Sequence& s, int32_t group, int32_t index) const;
  int32_t count_held(const Sequence& s, int32_t num_blocks) const;
  // Blocks of s's groups at logical index, in export order, that it holds.
  template <class Fn> void for_each_held(const Sequence& s, int32_t num_blocks, Fn&& fn) const;
  void fill_tables_from(Sequence& s, int32_t num_blocks, const uint8_t* bytes);
  std::vector<uint8_t> export_held(const Sequence& s) const;
  // Local groups let go of the blocks no query still to come reads.
  void release_window(Sequence& s);
  uint64_t group_hash(uint64_t hash, int32_t group) const;
  // For attach_cached_prefix: whether every local group has the cached blocks a sequence
  // attached at `blocks` logical blocks reads.
  bool window_cached(const std::vector<std::vector<int32_t>>& found, int32_t blocks) const;
  // A block with ref_count 1 (free, or an evicted cached one); the caller checked capacity.
  int32_t take_block();
  // Groups whose partly filled last block append(num_new_tokens) must copy first.
  int32_t copies_on_write(const Sequence& s, int32_t num_new_tokens) const;
  bool needs_copy_on_write(const Sequence& s, int32_t group, int32_t num_new_tokens) const;
  void copy_on_write_last_block(Sequence& s, int32_t group);
  // The published block under hash that holds exactly tokens after parent_publication.
  std::optional<int32_t> find_cached(uint64_t hash, uint64_t parent_publication,
                                     std::span<const int32_t> tokens) const;
  ChainLink link_block(const Sequence& s, int32_t index);
  // The new publication's serial; 0 when the hash is taken.
  uint64_t publish(int32_t block, uint64_t hash, uint64_t parent_publication,
                   std::span<const int32_t> tokens);
  std::span<const int32_t> published_tokens(int32_t block) const;
  void release_table(Sequence& s);
  void fill_block_stats(KvSnapshot& snap) const;
  void fill_waste_stats(KvSnapshot& snap) const;
  void check_sequence(const Sequence& s, std::vector<int32_t>& holders) const;
  void apply_retention(SeqId seq);
  // For compact(): the table rows are written through, shared blocks replaced by fresh ones.
  std::optional<std::vector<int32_t>> writable_table(const Sequence& s, int32_t first_block, int32_t num_blocks);
  void move_rows(const std::vector<int32_t>& from_table, const std::vector<int32_t>& to_table,
                 const std::vector<std::vector<int32_t>>& kept, int32_t first_slot);

  KvCacheConfig config_;
  KvLayerGroups groups_;
  int32_t max_context_;
  int32_t num_layers_;
  int32_t num_kv_heads_;
  int32_t kv_dim_;
  KvStorage storage_;
  BlockPool pool_;
  std::map<SeqId, Sequence> sequences_;   // ordered: snapshots and tests iterate by id
  SeqId next_seq_id_ = 0;
  BlockHashFn block_hash_ = chain_block_hash;
  uint64_t root_hash_;

  // What each published block holds, for the token compare on a hash hit. A publication is a
  // serial number never reused: a hit must also name the parent publication matched one step
  // before, so even a hash collision on a block with equal tokens but another prefix misses.
  // Every group's block of one logical block is published with the publication of group 0's
  // parent: a chain link names group 0's publication.
  std::vector<int32_t> block_tokens_;         // [num_blocks][block_size], valid while published
  std::vector<uint64_t> publication_;         // [num_blocks] valid while published
  std::vector<uint64_t> parent_publication_;  // [num_blocks] 0 for a sequence's first block
  uint64_t next_publication_ = 1;

  uint64_t prefix_hits_ = 0;
  uint64_t prefix_misses_ = 0;
  uint64_t prefix_hit_tokens_ = 0;
  uint64_t cow_copies_ = 0;
  uint64_t forks_ = 0;
  uint64_t imports_ = 0;
  uint64_t retention_compactions_ = 0;
  uint64_t retention_blocks_freed_ = 0;
};

}  // namespace kvdesk
