// Prometheus text format: "# HELP", "# TYPE", then "name{labels} value" lines; every series
// carries model_name as vLLM's do. The prefix-cache counters are in tokens (whole blocks).
#include "app/server/prometheus_metrics.h"

#include <algorithm>
#include <cstdio>

namespace kvdesk::server {
namespace {

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// Label values escape backslash, double quote and newline.
std::string label_value(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    out += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return out;
}

void header(std::string& out, const std::string& name, const std::string& help, const char* type) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void sample(std::string& out, const std::string& name, const std::string& help, const char* type,
            const std::string& labels, double value) {
  header(out, name, help, type);
  out += name + "{" + labels + "} " + number(value) + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), counts_(upper_bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const size_t bucket = size_t(std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) - upper_bounds_.begin());
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help, const std::string& labels) const {
  header(out, name, help, "histogram");
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < upper_bounds_.size() ? number(upper_bounds_[i]) : "+Inf";
    out += name + "_bucket{" + labels + ",le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_sum{" + labels + "} " + number(sum_) + "\n";
  out += name + "_count{" + labels + "} " + std::to_string(count_) + "\n";
}

ServingMetrics::ServingMetrics()
    : time_to_first_token_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                            20.0, 40.0, 80.0}),
      inter_token_latency_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
                            2.5}) {}

void ServingMetrics::on_finished(const RequestMetrics& m) {
  std::lock_guard<std::mutex> lock(mutex_);
  prompt_tokens_ += uint64_t(std::max(m.prompt_tokens, 0));
  generation_tokens_ += uint64_t(std::max(m.generated_tokens, 0));
  if (m.generated_tokens > 0) time_to_first_token_.observe(m.ttft_ms / 1000.0);
}

void ServingMetrics::on_inter_token(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  inter_token_latency_.observe(seconds);
}

void ServingMetrics::on_aborted() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++aborted_requests_;
}

std::string ServingMetrics::render(const EngineStats& stats, const std::string& model_id) const {
  const std::string labels = "model_name=\"" + label_value(model_id) + "\"";
  const KvSnapshot& kv = stats.kv;
  const double block = double(kv.layout.block_size);
  std::string out;
  sample(out, "kvdesk:num_requests_running", "Requests in the running batch.", "gauge", labels, stats.running);
  sample(out, "kvdesk:num_requests_waiting", "Requests waiting to be scheduled.", "gauge", labels, stats.waiting);
  sample(out, "kvdesk:kv_cache_usage_perc", "KV cache usage: held blocks over all blocks (1 = full).", "gauge", labels,
         kv.blocks_total > 0 ? double(kv.blocks_used) / kv.blocks_total : 0.0);
  sample(out, "kvdesk:kv_blocks_used", "KV blocks held by sequences.", "gauge", labels, kv.blocks_used);
  sample(out, "kvdesk:kv_blocks_cached", "KV blocks held by no sequence but reusable by the prefix cache.", "gauge",
         labels, kv.blocks_cached);
  sample(out, "kvdesk:kv_blocks_free", "KV blocks free.", "gauge", labels, kv.blocks_free);
  sample(out, "kvdesk:kv_blocks_shared", "KV blocks held by more than one sequence (shared prefixes, parallel samples).",
         "gauge", labels, kv.blocks_shared);
  sample(out, "kvdesk:kv_forks_total", "Sequences forked from another: parallel samples (n), branches.", "counter",
         labels, double(kv.forks));
  sample(out, "kvdesk:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache (whole blocks).",
         "counter", labels, double(kv.prefix_hits + kv.prefix_misses) * block);
  sample(out, "kvdesk:prefix_cache_hits_total", "Prompt tokens found in the prefix cache (whole blocks).", "counter",
         labels, double(kv.prefix_hits) * block);
  sample(out, "kvdesk:num_preemptions_total", "Preemptions of running requests.", "counter", labels,
         double(stats.preemptions));
  const HostTierStats& tier = kv.host_tier;
  sample(out, "kvdesk:host_tier_blocks", "KV blocks held in the host tier (idle conversations, swapped requests).",
         "gauge", labels, double(tier.blocks));
  sample(out, "kvdesk:host_tier_bytes", "Host memory the host tier holds (compressed when zstd is on).", "gauge",
         labels, double(tier.held_bytes));
  sample(out, "kvdesk:host_tier_hits_total", "Conversation turns that continued from the host tier.", "counter",
         labels, double(tier.hits));
  sample(out, "kvdesk:host_tier_swap_ins_total", "Sequences loaded back from the host tier into the pool.", "counter",
         labels, double(tier.swap_ins));
  sample(out, "kvdesk:host_tier_drops_total", "Host tier entries dropped for its budget.", "counter", labels,
         double(tier.drops));
  std::lock_guard<std::mutex> lock(mutex_);
  sample(out, "kvdesk:prompt_tokens_total", "Prompt tokens of finished requests.", "counter", labels,
         double(prompt_tokens_));
  sample(out, "kvdesk:generation_tokens_total", "Generated tokens of finished requests.", "counter", labels,
         double(generation_tokens_));
  sample(out, "kvdesk:num_requests_aborted_total", "Requests cancelled because their client went away mid-answer.",
         "counter", labels, double(aborted_requests_));
  time_to_first_token_.render(out, "kvdesk:time_to_first_token_seconds", "Time to first token in seconds.", labels);
  inter_token_latency_.render(out, "kvdesk:inter_token_latency_seconds", "Time between streamed tokens in seconds.",
                              labels);
  return out;
}

}  // namespace kvdesk::server
