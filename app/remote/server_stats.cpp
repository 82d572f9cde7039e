// Server statistics: recognize the family by metric prefix, then read its table. Gauges of
// several series (one per model or rank) take the largest; counters add up.
#include "app/remote/server_stats.h"

#include <algorithm>
#include <optional>

namespace kvdesk::remote {
namespace {

enum class Combine : uint8_t { Max, Sum };

// One figure of ServerStats and the metric names (first found wins) that hold it.
struct Source {
  std::optional<double> ServerStats::*field;
  std::vector<const char*> names;
  Combine combine;
};

struct Family {
  const char* kind;
  const char* prefix;
  std::vector<Source> sources;
};

const std::vector<Family>& families() {
  static const std::vector<Family> table = {
      {"vllm", "vllm:",
       {{&ServerStats::kv_usage, {"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"}, Combine::Max},
        {&ServerStats::running, {"vllm:num_requests_running"}, Combine::Sum},
        {&ServerStats::waiting, {"vllm:num_requests_waiting"}, Combine::Sum},
        {&ServerStats::prefix_queries, {"vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries"}, Combine::Sum},
        {&ServerStats::prefix_hits, {"vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits"}, Combine::Sum},
        {&ServerStats::prefix_hit_rate, {"vllm:gpu_prefix_cache_hit_rate"}, Combine::Max},
        {&ServerStats::preemptions, {"vllm:num_preemptions_total", "vllm:num_preemptions"}, Combine::Sum},
        {&ServerStats::prompt_tokens, {"vllm:prompt_tokens_total"}, Combine::Sum},
        {&ServerStats::generation_tokens, {"vllm:generation_tokens_total"}, Combine::Sum}}},
      {"sglang", "sglang:",
       {{&ServerStats::kv_usage, {"sglang:token_usage"}, Combine::Max},
        {&ServerStats::kv_tokens, {"sglang:num_used_tokens"}, Combine::Sum},
        {&ServerStats::running, {"sglang:num_running_reqs"}, Combine::Sum},
        {&ServerStats::waiting, {"sglang:num_queue_reqs"}, Combine::Sum},
        {&ServerStats::prefix_hit_rate, {"sglang:cache_hit_rate"}, Combine::Max},
        {&ServerStats::prompt_tokens, {"sglang:prompt_tokens_total"}, Combine::Sum},
        {&ServerStats::generation_tokens, {"sglang:generation_tokens_total"}, Combine::Sum}}},
      {"llama-server", "llamacpp:",
       {{&ServerStats::kv_usage, {"llamacpp:kv_cache_usage_ratio"}, Combine::Max},
        {&ServerStats::kv_tokens, {"llamacpp:kv_cache_tokens"}, Combine::Sum},
        {&ServerStats::running, {"llamacpp:requests_processing"}, Combine::Sum},
        {&ServerStats::waiting, {"llamacpp:requests_deferred"}, Combine::Sum},
        {&ServerStats::prompt_tokens, {"llamacpp:prompt_tokens_total"}, Combine::Sum},
        {&ServerStats::generation_tokens, {"llamacpp:tokens_predicted_total"}, Combine::Sum}}},
      {"kvdesk", "kvdesk:",
       {{&ServerStats::kv_usage, {"kvdesk:kv_cache_usage_perc"}, Combine::Max},
        {&ServerStats::running, {"kvdesk:num_requests_running"}, Combine::Sum},
        {&ServerStats::waiting, {"kvdesk:num_requests_waiting"}, Combine::Sum},
        {&ServerStats::prefix_queries, {"kvdesk:prefix_cache_queries_total"}, Combine::Sum},
        {&ServerStats::prefix_hits, {"kvdesk:prefix_cache_hits_total"}, Combine::Sum},
        {&ServerStats::preemptions, {"kvdesk:num_preemptions_total"}, Combine::Sum},
        {&ServerStats::prompt_tokens, {"kvdesk:prompt_tokens_total"}, Combine::Sum},
        {&ServerStats::generation_tokens, {"kvdesk:generation_tokens_total"}, Combine::Sum}}},
  };
  return table;
}

std::optional<double> combined(const std::vector<MetricSample>& samples, const char* name, Combine combine) {
  std::optional<double> out;
  for (const MetricSample& s : samples) {
    if (s.name != name) continue;
    out = !out ? s.value : combine == Combine::Max ? std::max(*out, s.value) : *out + s.value;
  }
  return out;
}

const Family* family_of(const std::vector<MetricSample>& samples) {
  for (const Family& f : families()) {
    const std::string prefix = f.prefix;
    const bool found = std::any_of(samples.begin(), samples.end(),
                                   [&](const MetricSample& s) { return s.name.rfind(prefix, 0) == 0; });
    if (found) return &f;
  }
  return nullptr;
}

std::optional<double> label_number(const MetricSample& s, const char* label) {
  const auto it = s.labels.find(label);
  if (it == s.labels.end()) return std::nullopt;
  try {
    return std::stod(it->second);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// vLLM publishes its cache configuration as the labels of vllm:cache_config_info; kvdesk its
// block counts as gauges.
void read_pool_shape(const std::vector<MetricSample>& samples, ServerStats& stats) {
  for (const MetricSample& s : samples) {
    if (s.name != "vllm:cache_config_info") continue;
    stats.block_size = label_number(s, "block_size");
    stats.num_blocks = label_number(s, "num_gpu_blocks");
  }
  const auto used = combined(samples, "kvdesk:kv_blocks_used", Combine::Sum);
  const auto cached = combined(samples, "kvdesk:kv_blocks_cached", Combine::Sum);
  const auto free = combined(samples, "kvdesk:kv_blocks_free", Combine::Sum);
  if (used && cached && free) stats.num_blocks = *used + *cached + *free;
}

}  // namespace

ServerStats read_server_stats(const std::vector<MetricSample>& samples, const std::string& url) {
  ServerStats stats;
  stats.url = url;
  const Family* family = family_of(samples);
  stats.kind = family ? family->kind : "unknown";
  if (!family) return stats;
  for (const Source& source : family->sources) {
    for (const char* name : source.names) {
      if ((stats.*source.field = combined(samples, name, source.combine))) break;
    }
  }
  read_pool_shape(samples, stats);
  if (!stats.prefix_hit_rate && stats.prefix_queries && stats.prefix_hits && *stats.prefix_queries > 0) {
    stats.prefix_hit_rate = *stats.prefix_hits / *stats.prefix_queries;
  }
  return stats;
}

}  // namespace kvdesk::remote
