// KvCache: the paged KV store of one loaded model. Keys and values of every layer live in
// one pool of fixed-size blocks; a block id names the same slot range in every layer, so a
// sequence has one block table for all layers (vLLM's layout: per-layer tensors, shared ids).
// A block is taken only when a token needs it and given back when its sequence ends.
//
// Invariants: a live sequence's block table has exactly ceil(num_tokens / block_size)
// entries, each held (ref_count >= 1) by the pool; the pool's held blocks are exactly the
// entries of all live tables.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "engine/block_pool.h"
#include "engine/kv_storage.h"
#include "engine/model_config.h"

namespace kvdesk {

using SeqId = int32_t;

class KvCache {
 public:
  KvCache(const ModelConfig& config, const KvLayout& options);

  const KvLayout& layout() const { return storage_.layout(); }
  int32_t block_size() const { return storage_.layout().block_size; }
  // Bytes of K and V for one block / one token across all layers.
  size_t bytes_per_block() const { return storage_.bytes_per_block(); }
  size_t bytes_per_token() const { return bytes_per_block() / size_t(block_size()); }

  SeqId create_sequence();
  void free_sequence(SeqId seq);
  // Makes positions [0, num_tokens) writable, taking blocks as needed. false (and no change)
  // when the pool has too few free blocks.
  bool reserve(SeqId seq, int32_t num_tokens);
  int32_t num_tokens(SeqId seq) const;
  const std::vector<int32_t>& block_table(SeqId seq) const;

  PagedKvLayer layer(int32_t index) const { return storage_.layer(index); }
  // What attention over positions [0, num_tokens) of seq reads.
  PagedSeq view(SeqId seq, int32_t num_tokens) const;

  const BlockPool& pool() const { return pool_; }
  void check_invariants() const;

 private:
  struct Sequence {
    std::vector<int32_t> block_table;  // [ceil(num_tokens / block_size)] physical block ids
    int32_t num_tokens = 0;
  };
  const Sequence& sequence(SeqId seq) const;

  KvStorage storage_;
  BlockPool pool_;
  std::unordered_map<SeqId, Sequence> sequences_;
  SeqId next_seq_id_ = 0;
};

}  // namespace kvdesk
