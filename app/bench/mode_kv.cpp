// kvdesk-bench kv: what each KV storage type costs. Bytes per token and per block measured
// from a real pool (KvStorage::bytes_per_block, scales included) against the formula
// layers x 2 x kv_heads x head_dim x bytes per value; and the attention time of one decode
// token (cpu::paged_attention over every layer of a filled pool) at several context depths,
// with the sequence's blocks in pool order (physically contiguous rows, what a contiguous
// cache would read) and scattered in random order (what a pool looks like after churn): their
// ratio is the cost of the block indirection. The attention runs on one thread and is timed in
// that thread's CPU time, so time spent waiting for a core on a shared machine does not count.
#include <time.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "app/bench/bench_modes.h"
#include "app/bench/bench_stats.h"
#include "engine/kv/kv_storage.h"
#include "kernels/attention.h"

namespace kvdesk::bench {
namespace {

constexpr double kMinTimedMs = 50;  // one timed repeat lasts at least this long (CPU time)

// CPU time of the calling thread, milliseconds.
double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e3 + double(t.tv_nsec) * 1e-6;
}

double bits_per_value(KvType type) {
  switch (type) {
    case KvType::F32: return 32;
    case KvType::F16:
    case KvType::BF16: return 16;
    case KvType::FP8_E4M3:
    case KvType::FP8_E5M2:
    case KvType::INT8: return 8;
    case KvType::INT4: return 4;
  }
  return 0;
}

struct Sizes {
  double formula = 0;   // bytes per token without scales
  size_t measured = 0;  // bytes per token from the pool
  size_t per_block = 0;
};

Sizes sizes_of(const ModelConfig& config, KvType type, int32_t block_size) {
  KvLayout layout;
  layout.k_type = type;
  layout.v_type = type;
  layout.block_size = block_size;
  layout.num_blocks = 1;
  const KvStorage storage(config, layout);
  Sizes s;
  s.formula = double(config.kv_values_per_token()) * bits_per_value(type) / 8;
  s.per_block = storage.bytes_per_block();
  s.measured = s.per_block / size_t(block_size);
  return s;
}

// Sequential: block table [0, 1, 2, ...], so a kv head's rows follow each other in memory as
// in a contiguous cache. Scattered: the same blocks in a random order.
enum class BlockOrder { Sequential, Scattered };

// Attention of one decode token over depth cached tokens, all layers: microseconds.
class AttentionTimer {
 public:
  AttentionTimer(const ModelConfig& config, KvType type, int32_t block_size, int32_t depth, uint64_t seed,
                 BlockOrder order = BlockOrder::Sequential)
      : config_(config), kv_(config, bench_cache_config(type, block_size, kv_blocks_for(depth, block_size))) {
    Rng rng(seed);
    seq_ = fill_context(kv_, config, depth, rng);
    view_ = kv_.view(seq_, depth);
    table_.assign(view_.block_table, view_.block_table + kv_blocks_for(depth, block_size));
    std::sort(table_.begin(), table_.end());
    if (order == BlockOrder::Scattered) {
      for (size_t i = table_.size(); i > 1; --i) std::swap(table_[i - 1], table_[size_t(rng.below(int32_t(i)))]);
    }
    view_.block_table = table_.data();
    q_.resize(size_t(config.q_dim()));
    for (float& v : q_) v = float(rng.normal());
    out_.resize(q_.size());
    scratch_.resize(size_t(attention_scratch_floats(config.head_count, config.head_dim)));
  }

  // As the forward pass calls it (engine/model/model.cpp): once per layer and kv head, with that
  // head's group of query heads.
  void one_token() {
    const int32_t group = config_.head_count / config_.head_count_kv;
    const int64_t group_floats = int64_t(group) * config_.head_dim;
    for (int32_t l = 0; l < config_.block_count; ++l) {
      const PagedKvLayer layer = kv_.layer(l);
      for (int32_t g = 0; g < config_.head_count_kv; ++g) {
        PagedKvLayer one_head = layer;
        one_head.k.data += size_t(g) * layer.k.head_stride;
        one_head.v.data += size_t(g) * layer.v.head_stride;
        one_head.num_kv_heads = 1;
        AttentionArgs args;
        args.q = q_.data() + g * group_floats;
        args.num_heads = group;
        args.scale = 1.0f / std::sqrt(float(config_.head_dim));
        args.out = out_.data() + g * group_floats;
        args.scratch = scratch_.data();
        cpu::paged_attention(one_head, view_, args);
      }
    }
  }

  // Calibrates the iteration count to kMinTimedMs of CPU time, then times that many tokens.
  double us_per_token() {
    const double probe = thread_cpu_ms();
    one_token();
    const double once = std::max(thread_cpu_ms() - probe, 1e-3);
    const int32_t iters = int32_t(std::clamp(std::ceil(kMinTimedMs / once), 1.0, 100000.0));
    const double start = thread_cpu_ms();
    for (int32_t i = 0; i < iters; ++i) one_token();
    return (thread_cpu_ms() - start) * 1000.0 / iters;
  }

 private:
  const ModelConfig& config_;
  KvCache kv_;
  SeqId seq_ = 0;
  std::vector<int32_t> table_;  // [blocks] the view's block table, in the chosen order
  PagedSeq view_;
  std::vector<float> q_, out_, scratch_;
};

void add_size_table(Report& r, const ModelConfig& config, const std::vector<KvType>& types, int32_t block_size) {
  Table t{
      "Bytes per token (all layers, K + V)", {"KV type", "formula", "measured", "scales", "per block", "vs f16"}, {}};
  Plot p{"bytes", "KV bytes per token", "KV type", "bytes per token", {}, {{"formula", {}, {}}, {"measured", {}, {}}}};
  const double f16 = double(sizes_of(config, KvType::F16, block_size).measured);
  nlohmann::json rows = nlohmann::json::array();
  for (KvType type : types) {
    const Sizes s = sizes_of(config, type, block_size);
    const double overhead = s.formula > 0 ? (double(s.measured) / s.formula - 1) * 100 : 0;
    t.rows.push_back({kv_type_name(type), format_number(s.formula, 1), std::to_string(s.measured),
                      "+" + format_number(overhead, 1) + "%", std::to_string(s.per_block),
                      format_number(double(s.measured) / f16, 3) + "x"});
    p.categories.push_back(kv_type_name(type));
    p.series[0].y.push_back(s.formula);
    p.series[1].y.push_back(double(s.measured));
    rows.push_back({{"kv_type", kv_type_name(type)},
                    {"bytes_per_token_formula", s.formula},
                    {"bytes_per_token", s.measured},
                    {"bytes_per_block", s.per_block},
                    {"block_size", block_size},
                    {"scale_overhead_pct", overhead}});
  }
  r.results["sizes"] = rows;
  r.tables.push_back(t);
  r.plots.push_back(p);
}

using Samples = std::map<std::pair<KvType, int32_t>, std::vector<double>>;  // (type, depth) -> us

void add_attention_table(Report& r, const ModelConfig& config, const std::vector<KvType>& types,
                         const std::vector<int32_t>& depths, const Samples& samples, int32_t block_size) {
  Table t{"Attention per decode token, all layers, blocks scattered (us of CPU time; single thread)", {"KV type"}, {}};
  Plot p{"attention", "Attention time per decode token", "context depth (tokens)", "microseconds", {}, {}};
  for (int32_t d : depths) t.header.push_back("depth " + std::to_string(d));
  t.header.push_back("GB/s at " + std::to_string(depths.back()));
  nlohmann::json rows = nlohmann::json::array();
  for (KvType type : types) {
    std::vector<std::string> row{kv_type_name(type)};
    Series series{kv_type_name(type), {}, {}};
    const double bytes_per_token = double(sizes_of(config, type, block_size).measured);
    double gbs = 0;
    for (int32_t d : depths) {
      const auto it = samples.find({type, d});
      if (it == samples.end()) {
        row.push_back("-");
        continue;
      }
      const Stats s = summarize(it->second);
      gbs = s.median > 0 ? bytes_per_token * d / (s.median * 1e3) : 0;
      row.push_back(format_stats(s, 1));
      series.x.push_back(d);
      series.y.push_back(s.median);
      rows.push_back(
          {{"kv_type", kv_type_name(type)}, {"depth", d}, {"us_per_token", stats_json(s)}, {"gb_per_s", gbs}});
    }
    row.push_back(format_number(gbs, 2));
    t.rows.push_back(row);
    p.series.push_back(series);
  }
  r.results["attention"] = rows;
  r.tables.push_back(t);
  r.plots.push_back(p);
}

// f16's time over each type's, run by run (the types alternate within a run, so a busy host
// slows both sides of a ratio alike), median over the runs: how much faster than f16 KV each
// type attends. Only when f16 was measured.
void add_speedup_table(Report& r, const std::vector<KvType>& types, const std::vector<int32_t>& depths,
                       const Samples& samples) {
  if (std::find(types.begin(), types.end(), KvType::F16) == types.end()) return;
  Table t{"Attention speed-up over f16 KV (f16 time / type's time, median of the runs' ratios)", {"KV type"}, {}};
  for (int32_t d : depths) t.header.push_back("depth " + std::to_string(d));
  nlohmann::json rows = nlohmann::json::array();
  for (KvType type : types) {
    std::vector<std::string> row{kv_type_name(type)};
    for (int32_t d : depths) {
      const auto f16 = samples.find({KvType::F16, d});
      const auto it = samples.find({type, d});
      if (f16 == samples.end() || it == samples.end()) {
        row.push_back("-");
        continue;
      }
      std::vector<double> ratios;
      for (size_t run = 0; run < it->second.size() && run < f16->second.size(); ++run) {
        ratios.push_back(f16->second[run] / it->second[run]);
      }
      const Stats s = summarize(ratios);
      row.push_back(format_number(s.median, 2) + "x");
      rows.push_back({{"kv_type", kv_type_name(type)}, {"depth", d}, {"speedup_over_f16", stats_json(s)}});
    }
    t.rows.push_back(row);
  }
  r.results["speedup_over_f16"] = rows;
  r.tables.push_back(t);
}

// Scattered over sequential time per (type, depth): the price of reading through a block table.
void add_indirection_table(Report& r, const std::vector<KvType>& types, const std::vector<int32_t>& depths,
                           const Samples& sequential, const Samples& scattered) {
  Table t{"Block indirection: attention with scattered blocks / with blocks in pool order (median ratio)",
          {"KV type"},
          {}};
  for (int32_t d : depths) t.header.push_back("depth " + std::to_string(d));
  nlohmann::json rows = nlohmann::json::array();
  for (KvType type : types) {
    std::vector<std::string> row{kv_type_name(type)};
    for (int32_t d : depths) {
      const auto seq = sequential.find({type, d});
      const auto sca = scattered.find({type, d});
      if (seq == sequential.end() || sca == scattered.end()) {
        row.push_back("-");
        continue;
      }
      const double ratio = summarize(sca->second).median / summarize(seq->second).median;
      row.push_back(format_number(ratio, 3) + "x");
      rows.push_back({{"kv_type", kv_type_name(type)},
                      {"depth", d},
                      {"sequential_us", stats_json(summarize(seq->second))},
                      {"scattered_us", stats_json(summarize(sca->second))},
                      {"ratio", ratio}});
    }
    t.rows.push_back(row);
  }
  r.results["indirection"] = rows;
  r.tables.push_back(t);
}

// The requested depths capped at the context; at least one cached token each.
std::vector<int32_t> attention_depths(const BenchOptions& o, const ModelConfig& config) {
  std::vector<int32_t> depths = o.attn_depths;
  for (int32_t& d : depths) d = std::max(d, 1);
  return capped(depths, config.context_length);
}

}  // namespace

Report run_kv(const BenchOptions& o) {
  const ModelConfig config = read_config(o.model_path);
  const std::vector<KvType> types = parse_kv_types(o.kv_types);
  const std::vector<int32_t> depths = attention_depths(o, config);
  const int32_t block_size = o.knobs.block_size;
  Report r;
  r.mode = "kv";
  r.settings = {{"block_size", block_size}, {"depths", depths}, {"repeat", o.repeat}, {"seed", o.seed}};
  for (KvType t : types) r.settings["kv_types"].push_back(kv_type_name(t));
  Samples sequential, scattered;
  for (int32_t run = 0; run < o.repeat && !stop_requested(); ++run) {
    for (KvType type : types) {
      for (int32_t d : depths) {
        if (stop_requested()) break;
        const uint64_t seed = o.seed + uint64_t(d);
        const double seq_us = AttentionTimer(config, type, block_size, d, seed, BlockOrder::Sequential).us_per_token();
        const double sca_us = AttentionTimer(config, type, block_size, d, seed, BlockOrder::Scattered).us_per_token();
        sequential[{type, d}].push_back(seq_us);
        scattered[{type, d}].push_back(sca_us);
        progress("kv run " + std::to_string(run + 1) + "/" + std::to_string(o.repeat) + " " + kv_type_name(type) +
                 " depth " + std::to_string(d) + ": " + format_number(sca_us, 1) + " us/token scattered, " +
                 format_number(seq_us, 1) + " in pool order");
      }
    }
  }
  r.partial = stop_requested();
  add_size_table(r, config, types, block_size);
  add_attention_table(r, config, types, depths, scattered, block_size);
  add_speedup_table(r, types, depths, scattered);
  add_indirection_table(r, types, depths, sequential, scattered);
  r.notes.push_back(
      "Formula: layers x 2 x kv_heads x head_dim x bytes per value (the KV arithmetic). Measured: "
      "the pool's bytes per block / block size, which adds each type's scales (fp8: one f32 per "
      "row; int8: an f16 scale and min per 32 values; int4: the same per 64 values). Attention: cpu::paged_attention of one token, every query head, "
      "every layer, one call per kv head as the forward pass makes them, over a pool filled with random "
      "K/V, the sequence's blocks scattered in random order, timed in the thread's CPU time; GB/s = KV bytes read / time. Indirection: "
      "the same blocks in pool order (block after block, as a contiguous cache would lay them out) "
      "against scattered; 1.00x means the block table costs nothing.");
  return r;
}

Measure kv_measure(const BenchOptions& o) {
  const ModelConfig config = read_config(o.model_path);
  const std::vector<int32_t> depths = attention_depths(o, config);
  return [config, depths, o](const Knobs& k) {
    Metrics m;
    for (int32_t d : depths) {
      AttentionTimer timer(config, k.kv_type, k.block_size, d, o.seed + uint64_t(d));
      m.emplace_back("attention_us@" + std::to_string(d), timer.us_per_token());
    }
    return m;
  };
}

}  // namespace kvdesk::bench
