// KvLayerGroups: grouping layers into equal pool blocks, and the window arithmetic.
#include "engine/kv/kv_layer_groups.h"

#include <algorithm>
#include <numeric>

#include "engine/kv/kv_storage.h"
#include "engine/kv_snapshot.h"

namespace kvdesk {
namespace {

// Layers in chunks of s, each chunk a group, numbered from first_group.
void assign_groups(const std::vector<int32_t>& layers, int32_t s, int32_t first_group, KvLayerGroups& g) {
  for (size_t i = 0; i < layers.size(); ++i) {
    g.group_of_layer[size_t(layers[i])] = first_group + int32_t(i) / s;
    g.slot_of_layer[size_t(layers[i])] = int32_t(i) % s;
  }
}

}  // namespace

int32_t KvLayerGroups::first_needed_block(int32_t computed, int32_t block_size) const {
  return std::max(0, computed + 1 - window) / block_size;
}

KvLayerGroups kv_layer_groups(const ModelConfig& c) {
  KvLayerGroups g;
  g.group_of_layer.assign(size_t(c.block_count), 0);
  g.slot_of_layer.resize(size_t(c.block_count));
  std::vector<int32_t> global, local;
  for (int32_t l = 0; l < c.block_count; ++l) (c.is_local_layer(l) ? local : global).push_back(l);
  if (local.empty() || global.empty() || c.sliding_window >= c.context_length) {
    g.layers_per_block = c.block_count;
    std::iota(g.slot_of_layer.begin(), g.slot_of_layer.end(), 0);
    return g;
  }
  const int32_t s = std::gcd(int32_t(global.size()), int32_t(local.size()));
  g.layers_per_block = s;
  g.num_global_groups = int32_t(global.size()) / s;
  g.num_groups = g.num_global_groups + int32_t(local.size()) / s;
  g.window = c.sliding_window;
  assign_groups(global, s, 0, g);
  assign_groups(local, s, g.num_global_groups, g);
  return g;
}

size_t kv_bytes_per_block(const ModelConfig& c, KvType k_type, KvType v_type, int32_t block_size) {
  const size_t per_layer_token = kv_bytes_per_token(c, k_type, v_type) / size_t(c.block_count);
  return per_layer_token * size_t(kv_layer_groups(c).layers_per_block) * size_t(block_size);
}

int32_t KvLayerGroups::blocks_for_sequence(int64_t tokens, int32_t block_size, int32_t chunk_tokens) const {
  const int64_t logical = kv_blocks_for(tokens, block_size);
  const int64_t local_peak = std::min<int64_t>(logical, kv_blocks_for(int64_t(window) - 1 + chunk_tokens, block_size) + 1);
  return int32_t(logical * num_global_groups + local_peak * (num_groups - num_global_groups));
}

int32_t kv_blocks_for_sequence(const ModelConfig& c, int32_t block_size, int64_t tokens, int32_t chunk_tokens) {
  return kv_layer_groups(c).blocks_for_sequence(tokens, block_size, chunk_tokens);
}

}  // namespace kvdesk
