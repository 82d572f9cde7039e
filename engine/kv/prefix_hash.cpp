// Chained block hashes (see prefix_hash.h), on the xxHash library's XXH3-64.
#include "engine/kv/prefix_hash.h"

#include <xxhash.h>

namespace kvdesk {

uint64_t chain_block_hash(uint64_t parent, std::span<const int32_t> tokens) {
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), parent);
}

uint64_t prefix_root_hash(uint64_t identity, KvType k_type, KvType v_type, int32_t block_size) {
  // Whole 64-bit words: no padding bytes enter the hash.
  const uint64_t words[4] = {identity, uint64_t(k_type), uint64_t(v_type), uint64_t(block_size)};
  return XXH3_64bits(words, sizeof(words));
}

}  // namespace kvdesk
