// The settings of a kvdesk-bench run: the knobs an A/B comparison may vary (one at a time) and
// every mode's options in one plain struct; each subcommand registers the part it reads.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "app/bench/workload.h"
#include "engine/engine_types.h"
#include "kernels/paged_kv.h"

namespace kvdesk::bench {

// What one run holds fixed: "change one thing at a time" applies to these.
struct Knobs {
  KvType kv_type = KvType::F16;
  int32_t block_size = 16;
  int32_t kv_recent = kKvRecentRows;   // newest rows per sequence kept in f32 for low-bit KV
  bool prefix_cache = true;
  int32_t chunk_size = 256;  // prefill tokens per forward call (engine: step token budget)
  PreemptMode preempt_mode = PreemptMode::Recompute;
  int32_t threads = 0;  // 0: all cores
  // Weights in the active ISA's GEMM layouts (repacked at load) or as the file stores them;
  // speed mode loads one model per layout.
  bool cpu_layouts = true;
};

enum class Knob : uint8_t { KvType, BlockSize, KvRecent, PrefixCache, ChunkSize, PreemptMode, Threads, WeightLayout };

std::span<const Knob> all_knobs();
const char* knob_name(Knob knob);  // "kv-type", "block-size", ...
std::optional<Knob> knob_from_name(std::string_view name);
// Throws kvdesk::Error naming the knob and the values it takes.
void set_knob(Knobs& knobs, Knob knob, const std::string& value);
std::string knob_value(const Knobs& knobs, Knob knob);
nlohmann::json knobs_json(const Knobs& knobs);
// Threads to use: requested, or all cores for 0.
int32_t resolve_threads(int32_t requested);
// Throws kvdesk::Error listing the known names.
KvType parse_kv_type(const std::string& name);
// Every KV type for an empty list or "all".
std::vector<KvType> parse_kv_types(const std::vector<std::string>& names);

struct BenchOptions {
  // Every mode.
  std::string model_path;
  std::string tokenizer_path;
  BackendRequest backend = BackendRequest::Auto;
  std::string json_path;
  std::string report_path;
  int32_t repeat = 3;
  uint64_t seed = 1;
  Knobs knobs;

  // speed: prefill at prompt lengths, decode at context depths, per thread count.
  std::vector<int32_t> prompt_lens{128, 512, 2048};
  std::vector<int32_t> depths{0, 1024, 4096};
  std::vector<int32_t> thread_counts{1, 2};
  int32_t decode_tokens = 16;
  // Size of each of the three STREAM arrays the machine's memory bandwidth is measured with,
  // per thread count and run, so decode's bytes/s can be given as a fraction of it; 0: skip.
  int32_t bandwidth_mib = 256;

  // kv (and capacity): the KV types compared; attention timed at these depths.
  std::vector<std::string> kv_types;  // empty: all
  std::vector<int32_t> attn_depths{256, 1024, 4096};

  // capacity
  double kv_budget_mib = 0;  // capacity: 0 means 256; trace/prefix: 0 means the engine's default
  std::vector<int32_t> block_sizes{kKvBlockSizes.begin(), kKvBlockSizes.end()};
  LengthDist lengths{0, 0.8, 8, 0};  // median 0: context / 4; max 0: the context
  std::string trace_path;

  // prefix: conversations sharing one long system prompt, turn after turn.
  int32_t system_tokens = 0;  // 0: a quarter of the context
  int32_t user_tokens = 24;
  int32_t answer_tokens = 8;
  int32_t conversations = 0;  // 0: the mode's default (prefix 3, trace 6)
  int32_t turns = 0;          // 0: the mode's default (prefix 3, trace 2)

  // resume: history lengths, and the new turn's length.
  std::vector<int32_t> histories{256, 1024, 4096};
  // templates: a folder of *.jinja chat templates timed beside the model's and the families.
  std::string templates_dir;
  int32_t turn_tokens = 32;
  // grammar: the schema answers are held to (a JSON schema file; empty: any JSON object).
  std::string json_schema_path;

  // quality
  std::string text_path;  // empty: assets/quality/tinystories_sample.txt
  int32_t ctx = 0;
  int32_t max_text_tokens = 0;  // 0: the whole text
  std::vector<std::string> retention_policies;  // non-empty: compare KV retention instead of KV types
  std::vector<std::string> kv_keep{"0.75", "0.5", "0.25"};
  int32_t retention_prompt = 0;  // prefilled tokens per window; 0: a quarter of it

  // trace
  ChatWorkload workload;
  double cost_per_hour = 0;
  int32_t max_running = 32;
  std::string save_trace;
  std::string url;            // trace: an OpenAI-compatible server to drive instead of the model
  std::string api_key;        // its Bearer token

  // ab
  std::string ab_mode = "speed";
  std::string knob;
  std::string a;
  std::string b;
};

}  // namespace kvdesk::bench
