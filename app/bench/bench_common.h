// Shared pieces of the kvdesk-bench modes: the Ctrl-C stop flag (set by the handler, checked
// between runs, so a stopped run still writes what it measured), progress lines on stderr,
// the model's summary, and a KV context filled with real bytes without running the model.
#pragma once
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "app/bench/bench_options.h"
#include "app/bench/workload.h"
#include "engine/kv/kv_cache.h"
#include "engine/model/model_config.h"

namespace kvdesk::bench {

// A mode's headline figures by name, in a fixed order (what an A/B arm returns).
using Metrics = std::vector<std::pair<std::string, double>>;

// SIGINT sets the stop flag; a second Ctrl-C ends the process at once.
void install_stop_handler();
const std::atomic<bool>& stop_flag();
bool stop_requested();

// "kvdesk-bench: <line>" on stderr.
void progress(const std::string& line);

double ms_since(std::chrono::steady_clock::time_point start);

// Reads only the GGUF header's hyperparameters (weights stay unmapped by the caller).
ModelConfig read_config(const std::string& model_path);
// The vocabulary's BOS id from the same header (1, SentencePiece's, when it names none).
int32_t read_bos_id(const std::string& model_path);
nlohmann::json model_json(const std::string& model_path, const ModelConfig& config);

// The engine run by the prefix and trace modes: knobs, --kv-budget-mib (0: the engine's
// default), --max-running.
EngineSettings engine_settings(const BenchOptions& options, const Knobs& knobs);

// A cache for one benchmark: no prefix caching (every run computes what it measures).
KvCacheConfig bench_cache_config(KvType type, int32_t block_size, int32_t num_blocks);

// A new sequence holding depth computed tokens whose K and V rows, in every layer, are
// pseudo-random values written through the append kernel: the bytes a real context would
// leave, so attention reads real memory (decode cost does not depend on the values).
SeqId fill_context(KvCache& kv, const ModelConfig& config, int32_t depth, Rng& rng);

// The distinct values of `values` capped at cap, in order.
std::vector<int32_t> capped(const std::vector<int32_t>& values, int32_t cap);

}  // namespace kvdesk::bench
