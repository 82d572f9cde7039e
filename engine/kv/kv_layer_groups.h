// KvLayerGroups: which layers share a pool block. A model whose layers all attend to the
// whole context has one group holding every layer: a block is K and V of every layer for
// block_size tokens (vLLM's plain paged layout). A model with sliding-window layers (Gemma 2:
// every other layer; Gemma 3: five local to one global) splits its layers into groups of one
// size s = gcd(global layers, local layers), global groups first: each group has a block table
// of its own per sequence, and a block of any group is s layers' K and V for block_size
// tokens, so all groups draw from one pool of equal blocks and the memory goes to whichever
// needs it (vLLM v1's hybrid allocator). A local group's table lets go of the blocks that lie
// wholly before the window of every query still to come, so at 8K context Gemma 3's local
// layers hold about one window of tokens, not 8K.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/model/model_config.h"
#include "kernels/kv_type.h"

namespace kvdesk {

struct KvLayerGroups {
  int32_t layers_per_block = 0;   // s: layers whose K and V one block holds
  int32_t num_groups = 1;
  int32_t num_global_groups = 1;  // groups [0, num_global_groups) attend to every position
  int32_t window = 0;             // tokens a local layer attends to, itself included; 0: none
  std::vector<int32_t> group_of_layer;   // [layers]
  std::vector<int32_t> slot_of_layer;    // [layers] which of its group's s layers it is

  bool windowed() const { return num_groups > num_global_groups; }
  bool is_local(int32_t group) const { return group >= num_global_groups; }
  // The first logical block a local group still needs once positions [0, computed) have
  // their KV: the next query, at position `computed`, reads keys from computed + 1 - window.
  int32_t first_needed_block(int32_t computed, int32_t block_size) const;
  // Pool blocks one sequence of `tokens` positions holds at its peak, its prefill computed in
  // chunks of at most chunk_tokens: every global group one per logical block, every local
  // group at most the blocks one window and one chunk span.
  int32_t blocks_for_sequence(int64_t tokens, int32_t block_size, int32_t chunk_tokens) const;
};

// The grouping of c's layers. One group unless c has both global and sliding-window layers
// and its window is shorter than its context.
KvLayerGroups kv_layer_groups(const ModelConfig& c);

// Bytes of one pool block: layers_per_block layers' K and V rows for block_size tokens.
size_t kv_bytes_per_block(const ModelConfig& c, KvType k_type, KvType v_type, int32_t block_size);

// The same for c's grouping (KvLayerGroups::blocks_for_sequence).
int32_t kv_blocks_for_sequence(const ModelConfig& c, int32_t block_size, int64_t tokens, int32_t chunk_tokens);

}  // namespace kvdesk
