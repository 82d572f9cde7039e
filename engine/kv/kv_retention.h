// KV retention: keep only the cached tokens that matter, within a budget, and free the rest
// (judge it by quality: kvdesk-bench quality --retention). Policies:
//   sinks   the first S tokens (attention sinks) + the most recent ones (StreamingLLM);
//   h2o     heavy hitters (largest accumulated attention) + a recent window, evicting at every
//           step the sequence outgrows its budget (H2O);
//   snapkv  once, after the prompt: the prompt's last W tokens (the observation window) vote
//           with their attention, max-pooled over neighbours, for the prompt positions to keep;
//           the window itself is kept, and decode then appends without evicting (SnapKV).
//
// Design on the paged cache: compaction per (layer, kv head).
// - Attention scores are accumulated per layer AND kv head: the weights of a group's query
//   heads are summed (with GQA the heads of a group read the same K/V rows, so they decide
//   together). Different layers and heads may keep different positions.
// - Every (layer, kv head) keeps the same COUNT of tokens: its kept rows move down to slots
//   [0, count) of the sequence's blocks, in order of original position. So one block table
//   still serves all layers and heads, attention needs no change, and the trailing blocks
//   are freed (returned to the pool).
// - Keys stay stored with RoPE applied at their ORIGINAL position; attention is a sum over
//   rows, so their order and slot do not matter and no position is re-applied. A new token gets
//   its true next position (tokens seen) and is written at slot position - evicted (KvCache).
// - Compaction never writes into a block another sequence holds (it is copied first) nor into
//   a block published in the prefix cache (unpublished first: its token hash no longer names
//   its contents); a compacted sequence publishes nothing more (kv_cache_retention.cpp).
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine_types.h"

namespace kvdesk {

// --- selection: which of num_tokens slots stay; each returns ascending slot indices -------
// Ties between equal scores go to the older (lower) slot.

// The first min(sink_tokens, keep) slots and the most recent rest.
std::vector<int32_t> select_sinks(int32_t num_tokens, int32_t keep, int32_t sink_tokens);
// The `recent` most recent slots, then the largest scores among the others up to keep.
std::vector<int32_t> select_heavy_hitters(std::span<const float> scores, int32_t keep, int32_t recent);
// The last `window` slots (the observation window), then the largest max-pooled votes among
// the others up to keep: pooled[j] = max of votes over [j - kernel/2, j + kernel/2] (prefix only).
std::vector<int32_t> select_snapkv(std::span<const float> votes, int32_t keep, int32_t window, int32_t pool_kernel);

// The retention of one sequence: its options, the accumulated attention of each
// (layer, kv head) over the sequence's current slots, and where the prompt ends.
// Invariant: every score row is as long as the longest attention added, and rows follow
// their K/V rows through every compaction.
class RetentionState {
 public:
  RetentionState(const RetentionOptions& options, int32_t num_layers, int32_t num_kv_heads);

  const RetentionOptions& options() const { return options_; }
  // A new prompt (turn) that ends at position prompt_end: snapkv compresses once it is computed.
  void start_turn(int32_t prompt_end);
  // Whether the attention of a query at this position must be added (AttentionArgs::weights).
  bool observes(int32_t position) const;
  // scores[layer][kv_head][j] += sum over the group's heads of weights[h][j], j < num_slots.
  void add_attention(int32_t layer, int32_t kv_head, const float* weights, int32_t group, int32_t num_slots);
  // The slots each (layer, kv head) keeps, [layers * kv_heads][count], when the sequence
  // (num_slots held, num_seen positions seen, all computed) must shrink now; empty otherwise.
  std::vector<std::vector<int32_t>> plan(int32_t num_slots, int32_t num_seen);
  // The rows moved as planned: scores follow.
  void compact(const std::vector<std::vector<int32_t>>& kept);

  std::span<const float> scores(int32_t layer, int32_t kv_head) const;

 private:
  std::vector<float>& row(int32_t layer, int32_t kv_head) { return scores_[size_t(layer * num_kv_heads_ + kv_head)]; }

  RetentionOptions options_;
  int32_t num_kv_heads_;
  int32_t prompt_end_ = 0;
  bool snapped_ = false;                    // snapkv: this turn's prompt was compressed
  std::vector<std::vector<float>> scores_;  // [layers * kv_heads][slots]
};

}  // namespace kvdesk
