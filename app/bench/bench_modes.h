// The kvdesk-bench modes. Each run_* measures (progress on stderr), and returns a Report that
// is partial when Ctrl-C stopped it. The *_measure functions give the A/B harness one arm's
// headline figures for a set of knobs, on the same inputs every call.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "app/bench/bench_common.h"
#include "app/bench/bench_options.h"
#include "app/bench/bench_report.h"

namespace kvdesk {
class Model;
}

namespace kvdesk::bench {

Report run_speed(const BenchOptions& options);
Report run_kv(const BenchOptions& options);
Report run_capacity(const BenchOptions& options);
Report run_prefix(const BenchOptions& options);
Report run_quality(const BenchOptions& options);
// quality with --retention: each policy at each --kv-keep budget vs the full cache, on the
// model and text run_quality loaded (mode_retention.cpp).
Report run_retention_quality(const BenchOptions& options, Model& model, const std::vector<int32_t>& tokens,
                             const std::string& text_source);
Report run_trace(const BenchOptions& options);
// TTFT of a conversation's next turn with its history cold, parked or restored from the database,
// and the bytes a saved conversation takes per KV type (mode_resume.cpp).
Report run_resume(const BenchOptions& options);
Report run_ab(const BenchOptions& options);
// Render time of the model's chat template, the built-in families and --templates DIR's files
// for a typical conversation (mode_templates.cpp).
Report run_templates(const BenchOptions& options);
// Decode tok/s free and held to a JSON schema, alternating, and what the grammar's mask costs
// per token (mode_grammar.cpp).
Report run_grammar(const BenchOptions& options);

using Measure = std::function<Metrics(const Knobs& knobs)>;
Measure speed_measure(const BenchOptions& options);  // loads the model once
Measure kv_measure(const BenchOptions& options);
Measure prefix_measure(const BenchOptions& options);
Measure trace_measure(const BenchOptions& options);
// The knobs that change what a mode measures ("speed", "kv", "prefix", "trace"); empty for a
// mode the A/B harness does not run.
std::vector<Knob> knobs_of_mode(const std::string& mode);

// Capacity of a KV budget for sequences of the given final lengths, admitted in order until
// the first that does not fit (or the lengths run out).
struct CapacityFigures {
  int32_t sequences = 0;        // admitted
  int64_t used_tokens = 0;      // their tokens
  int64_t reserved_tokens = 0;  // slots set aside for them
  int64_t waste_tokens = 0;     // reserved - used
  double waste_pct = 0;         // of reserved
  double used_pct = 0;          // used / reserved: the paper's "KV memory holding real tokens"
  double pool_used_pct = 0;     // used / every slot the budget holds
  bool exhausted = false;       // the lengths ran out before the budget
};
// Paged: a real KvCache of budget_bytes / bytes_per_block blocks; figures from its snapshot.
CapacityFigures paged_capacity(const ModelConfig& config, KvType type, int32_t block_size, size_t budget_bytes,
                               std::span<const int32_t> lengths);
// Contiguous: every sequence preallocates the model's whole context.
CapacityFigures contiguous_capacity(const ModelConfig& config, KvType type, size_t budget_bytes,
                                    std::span<const int32_t> lengths);

}  // namespace kvdesk::bench
