// Stop flag, progress, model summary and KV fill (see bench_common.h).
#include "app/bench/bench_common.h"

#include <algorithm>
#include <csignal>
#include <cstdio>

#include "engine/gguf/gguf_reader.h"
#include "kernels/attention.h"
#include "kernels/check.h"

namespace kvdesk::bench {
namespace {

std::atomic<bool> g_stop{false};

extern "C" void on_sigint(int) {
  g_stop.store(true);
  std::signal(SIGINT, SIG_DFL);
}

}  // namespace

void install_stop_handler() { std::signal(SIGINT, on_sigint); }
const std::atomic<bool>& stop_flag() { return g_stop; }
bool stop_requested() { return g_stop.load(); }

void progress(const std::string& line) {
  std::fprintf(stderr, "kvdesk-bench: %s\n", line.c_str());
  std::fflush(stderr);
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

ModelConfig read_config(const std::string& model_path) { return read_model_config(*GgufFile::open(model_path)); }

int32_t read_bos_id(const std::string& model_path) {
  return int32_t(GgufFile::open(model_path)->find_uint("tokenizer.ggml.bos_token_id").value_or(1));
}

nlohmann::json model_json(const std::string& model_path, const ModelConfig& c) {
  return {{"path", model_path},
          {"name", c.name},
          {"layers", c.block_count},
          {"heads", c.head_count},
          {"kv_heads", c.head_count_kv},
          {"head_dim", c.head_dim},
          {"embedding", c.embedding_length},
          {"context_length", c.context_length},
          {"vocab", c.vocab_size}};
}

EngineSettings engine_settings(const BenchOptions& o, const Knobs& k) {
  EngineSettings s;
  s.model_path = o.model_path;
  s.tokenizer_path = o.tokenizer_path;
  s.backend = o.backend;
  s.threads = resolve_threads(k.threads);
  s.kv.k_type = k.kv_type;
  s.kv.v_type = k.kv_type;
  s.kv.block_size = k.block_size;
  s.kv.recent_rows = k.kv_recent;
  s.kv_budget_bytes = size_t(o.kv_budget_mib * 1024 * 1024);
  s.prefix_caching = k.prefix_cache;
  s.scheduler.step_token_budget = k.chunk_size;
  s.scheduler.max_running = o.max_running;
  s.scheduler.preempt_mode = k.preempt_mode;
  return s;
}

KvCacheConfig bench_cache_config(KvType type, int32_t block_size, int32_t num_blocks) {
  KvCacheConfig config;
  config.layout.k_type = type;
  config.layout.v_type = type;
  config.layout.block_size = block_size;
  config.layout.num_blocks = std::max(num_blocks, 1);
  config.prefix_caching = false;
  return config;
}


SeqId fill_context(KvCache& kv, const ModelConfig& config, int32_t depth, Rng& rng) {
  const SeqId seq = kv.create_sequence();
  if (depth <= 0) return seq;
  std::vector<int32_t> tokens = random_tokens(depth, config.vocab_size, rng);
  const bool appended = kv.append(seq, tokens);
  KVDESK_ASSERT(appended);  // callers size the pool for depth
  // A pool of values read at shifting offsets: cheap to make, different row to row.
  const size_t row = size_t(config.kv_dim());
  std::vector<float> values(row * 4 + 1021);
  for (float& v : values) v = float(rng.normal());
  const PagedSeq view = kv.view(seq, depth);
  for (int32_t l = 0; l < config.block_count; ++l) {
    const PagedKvLayer layer = kv.layer(l);
    for (int32_t p = 0; p < depth; ++p) {
      const size_t offset = (size_t(p) * 131 + size_t(l) * 17) % (values.size() - 2 * row);
      paged_kv_write(layer, view, p, values.data() + offset, values.data() + offset + row);
    }
  }
  kv.mark_computed(seq, depth);
  return seq;
}

std::vector<int32_t> capped(const std::vector<int32_t>& values, int32_t cap) {
  std::vector<int32_t> out;
  for (int32_t v : values) {
    const int32_t c = std::min(v, cap);
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  return out;
}

}  // namespace kvdesk::bench
