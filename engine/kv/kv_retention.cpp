// KV retention policies: budgets, the three selection rules, and the per-sequence attention
// accumulator that decides when and what to compact (the compaction itself is KvCache's).
#include "engine/kv/kv_retention.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/error.h"
#include "kernels/check.h"

namespace kvdesk {
namespace {

// Indices of the `count` largest values among candidates (ties: lower index), ascending.
std::vector<int32_t> top_slots(std::span<const float> values, std::vector<int32_t> candidates, int32_t count) {
  count = std::clamp<int32_t>(count, 0, int32_t(candidates.size()));
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](int32_t a, int32_t b) { return values[size_t(a)] > values[size_t(b)]; });
  candidates.resize(size_t(count));
  return candidates;
}

std::vector<int32_t> range(int32_t begin, int32_t end) {
  std::vector<int32_t> r(static_cast<size_t>(std::max(0, end - begin)));
  std::iota(r.begin(), r.end(), begin);
  return r;
}

std::vector<int32_t> sorted_union(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end());
  return a;
}

}  // namespace

const char* retention_policy_name(RetentionPolicy policy) {
  switch (policy) {
    case RetentionPolicy::None: return "none";
    case RetentionPolicy::Sinks: return "sinks";
    case RetentionPolicy::H2O: return "h2o";
    case RetentionPolicy::SnapKV: return "snapkv";
  }
  return "?";
}

RetentionPolicy parse_retention_policy(std::string_view name) {
  for (RetentionPolicy p : {RetentionPolicy::None, RetentionPolicy::Sinks, RetentionPolicy::H2O, RetentionPolicy::SnapKV}) {
    if (name == retention_policy_name(p)) return p;
  }
  throw Error("unknown retention policy '" + std::string(name) + "': use none, sinks, h2o or snapkv");
}

int32_t RetentionBudget::resolve(int32_t seen) const {
  if (seen <= 0) return 0;
  const int32_t keep = tokens > 0 ? tokens : int32_t(std::ceil(fraction * double(seen) - 1e-9));
  return std::clamp(keep, 1, seen);
}

std::string RetentionBudget::describe() const {
  if (tokens > 0) return std::to_string(tokens) + " tokens";
  return std::to_string(int(std::lround(fraction * 100.0))) + "%";
}

RetentionBudget parse_retention_budget(std::string_view text) {
  const std::string s(text);
  const std::string hint = "--kv-keep takes a fraction in (0, 1] (0.5 or 50%) or a token count (128), not '" + s + "'";
  const bool percent = !s.empty() && s.back() == '%';
  const std::string number = percent ? s.substr(0, s.size() - 1) : s;
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(number, &used);
  } catch (const std::exception&) {
    throw Error(hint);
  }
  if (used != number.size() || !std::isfinite(value)) throw Error(hint);
  RetentionBudget budget;
  const bool integral = !percent && number.find_first_of(".eE") == std::string::npos;
  if (integral && value >= 1) {
    if (value > 1e9) throw Error(hint);
    budget.tokens = int32_t(value);
    return budget;
  }
  budget.fraction = percent ? value / 100.0 : value;
  if (!(budget.fraction > 0 && budget.fraction <= 1)) throw Error(hint);
  return budget;
}

std::vector<int32_t> select_sinks(int32_t num_tokens, int32_t keep, int32_t sink_tokens) {
  keep = std::clamp(keep, 0, num_tokens);
  const int32_t sinks = std::clamp(sink_tokens, 0, keep);
  return sorted_union(range(0, sinks), range(num_tokens - (keep - sinks), num_tokens));
}

std::vector<int32_t> select_heavy_hitters(std::span<const float> scores, int32_t keep, int32_t recent) {
  const int32_t n = int32_t(scores.size());
  keep = std::clamp(keep, 0, n);
  recent = std::clamp(recent, 0, keep);
  return sorted_union(top_slots(scores, range(0, n - recent), keep - recent), range(n - recent, n));
}

std::vector<int32_t> select_snapkv(std::span<const float> votes, int32_t keep, int32_t window, int32_t pool_kernel) {
  const int32_t n = int32_t(votes.size());
  keep = std::clamp(keep, 0, n);
  window = std::clamp(window, 0, keep);
  const int32_t prefix = n - window;
  const int32_t half = std::max(pool_kernel, 1) / 2;
  std::vector<float> pooled(static_cast<size_t>(prefix));
  for (int32_t j = 0; j < prefix; ++j) {
    const auto first = votes.begin() + std::max(0, j - half);
    const auto last = votes.begin() + std::min(prefix, j + half + 1);
    pooled[size_t(j)] = *std::max_element(first, last);
  }
  return sorted_union(top_slots(pooled, range(0, prefix), keep - window), range(prefix, n));
}

RetentionState::RetentionState(const RetentionOptions& options, int32_t num_layers, int32_t num_kv_heads)
    : options_(options),
      num_kv_heads_(num_kv_heads),
      scores_(size_t(num_layers) * size_t(num_kv_heads)) {}

void RetentionState::start_turn(int32_t prompt_end) {
  prompt_end_ = prompt_end;
  snapped_ = false;
  if (options_.policy == RetentionPolicy::SnapKV) {
    for (std::vector<float>& r : scores_) std::fill(r.begin(), r.end(), 0.0f);
  }
}

bool RetentionState::observes(int32_t position) const {
  switch (options_.policy) {
    case RetentionPolicy::H2O: return true;
    case RetentionPolicy::SnapKV:
      return !snapped_ && position < prompt_end_ && position >= prompt_end_ - options_.observation_window;
    default: return false;
  }
}

void RetentionState::add_attention(int32_t layer, int32_t kv_head, const float* weights, int32_t group, int32_t num_slots) {
  std::vector<float>& r = row(layer, kv_head);
  if (int32_t(r.size()) < num_slots) r.resize(size_t(num_slots), 0.0f);
  for (int32_t h = 0; h < group; ++h) {
    const float* w = weights + int64_t(h) * num_slots;
    for (int32_t j = 0; j < num_slots; ++j) r[size_t(j)] += w[j];
  }
}

std::vector<std::vector<int32_t>> RetentionState::plan(int32_t num_slots, int32_t num_seen) {
  const RetentionPolicy policy = options_.policy;
  if (policy == RetentionPolicy::SnapKV) {
    if (snapped_ || num_seen < prompt_end_) return {};
    snapped_ = true;
  }
  const int32_t keep = options_.budget.resolve(num_seen);
  if (policy == RetentionPolicy::None || num_slots <= keep) return {};
  std::vector<std::vector<int32_t>> kept(scores_.size());
  for (size_t i = 0; i < kept.size(); ++i) {
    scores_[i].resize(size_t(num_slots), 0.0f);
    if (policy == RetentionPolicy::Sinks) {
      kept[i] = select_sinks(num_slots, keep, options_.sink_tokens);
    } else if (policy == RetentionPolicy::H2O) {
      const int32_t recent = std::max(1, int32_t(std::lround(options_.recent_fraction * keep)));
      kept[i] = select_heavy_hitters(scores_[i], keep, recent);
    } else {
      kept[i] = select_snapkv(scores_[i], keep, options_.observation_window, options_.pool_kernel);
    }
  }
  return kept;
}

void RetentionState::compact(const std::vector<std::vector<int32_t>>& kept) {
  KVDESK_ASSERT(kept.size() == scores_.size());
  for (size_t i = 0; i < kept.size(); ++i) {
    std::vector<float>& r = scores_[i];
    for (size_t j = 0; j < kept[i].size(); ++j) r[j] = r[size_t(kept[i][j])];
    r.resize(kept[i].size());
  }
}

std::span<const float> RetentionState::scores(int32_t layer, int32_t kv_head) const {
  return scores_[size_t(layer * num_kv_heads_ + kv_head)];
}

}  // namespace kvdesk
