// Chained block hashes for the prefix cache: block i of a sequence is named by
// hash(hash of block i-1, token ids of block i), and block 0's parent is a root hash over what
// else changes the KV (model identity, K/V storage types, block size). Equal hashes then mean
// "probably the same prefix"; KvCache still compares tokens before serving a hit.
#pragma once
#include <cstdint>
#include <span>

#include "kernels/paged_kv.h"

namespace kvdesk {

// The signature KvCache hashes blocks with (tests inject a colliding one).
using BlockHashFn = uint64_t (*)(uint64_t parent, std::span<const int32_t> tokens);

// XXH3-64 of the block's token ids, seeded with the parent's hash.
uint64_t chain_block_hash(uint64_t parent, std::span<const int32_t> tokens);

// The parent hash of every sequence's first block.
uint64_t prefix_root_hash(uint64_t identity, KvType k_type, KvType v_type, int32_t block_size);

}  // namespace kvdesk
