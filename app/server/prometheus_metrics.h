// ServingMetrics: the server's counters and latency histograms, and GET /metrics in
// Prometheus' text format (version 0.0.4) with vLLM's metric names under a kvdesk: prefix.
// Gauges (running, waiting, KV blocks) are read from the engine's stats at scrape time;
// counters and histograms are fed by the request router as events arrive.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine_types.h"

namespace kvdesk::server {

// A Prometheus histogram: counts per upper bound (le), cumulative when rendered.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  void render(std::string& out, const std::string& name, const std::string& help, const std::string& labels) const;

 private:
  std::vector<double> upper_bounds_;   // ascending; +Inf is implied
  std::vector<uint64_t> counts_;       // [upper_bounds_ + 1]: observations in each bucket alone
  double sum_ = 0;
  uint64_t count_ = 0;
};

class ServingMetrics {
 public:
  ServingMetrics();

  // A request ended: its prompt and generated tokens, and its time to first token if it had one.
  void on_finished(const RequestMetrics& metrics);
  void on_inter_token(double seconds);
  // A client went away before its answer ended; its request was cancelled.
  void on_aborted();

  std::string render(const EngineStats& stats, const std::string& model_id) const;

 private:
  mutable std::mutex mutex_;   // guards everything below: the router writes, scrapes read
  Histogram time_to_first_token_;
  Histogram inter_token_latency_;
  uint64_t prompt_tokens_ = 0;
  uint64_t generation_tokens_ = 0;
  uint64_t aborted_requests_ = 0;
};

}  // namespace kvdesk::server
