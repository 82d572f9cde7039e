// kvdesk-bench quality: what each KV storage type costs in output quality, measured against
// f32 KV on the same model and text: perplexity, mean and max KL divergence of the next-token
// distributions, and top-1 agreement. One KV comparison (engine/quality/kv_comparison.h, the
// one the engine and `kvdesk-cli info` measure KV quality with) scores every type, the f32
// reference run once per window. Deterministic, so one run each.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "app/bench/bench_modes.h"
#include "app/bench/bench_stats.h"
#include "engine/backend/forward_backend.h"
#include "engine/error.h"
#include "engine/kv/kv_storage.h"
#include "engine/model/model.h"
#include "engine/quality/kv_comparison.h"
#include "engine/system/thread_pool.h"

namespace kvdesk::bench {
namespace {

constexpr const char* kSampleName = "tinystories_sample.txt";
constexpr int32_t kGeneratedWords = 600;

struct Text {
  std::string source;  // the file, or "generated (seed N)"
  std::string body;
};

// Where the bundled sample is: in the source tree this was built from, else where
// `cmake --install` puts it beside the program (PREFIX/bin/.. /share/kvdesk).
std::vector<std::string> sample_paths() {
  std::vector<std::string> paths = {std::string(KVDESK_SOURCE_DIR) + "/assets/quality/" + kSampleName};
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) paths.push_back((exe.parent_path().parent_path() / "share/kvdesk" / kSampleName).string());
  return paths;
}

std::optional<std::string> read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// --text, else the bundled sample, else (sample missing) words drawn from the seed.
Text load_text(const BenchOptions& o) {
  if (!o.text_path.empty()) {
    if (std::optional<std::string> body = read_whole(o.text_path)) return {o.text_path, std::move(*body)};
    throw Error(o.text_path + ": cannot open the text file");
  }
  for (const std::string& path : sample_paths()) {
    if (std::optional<std::string> body = read_whole(path)) return {path, std::move(*body)};
  }
  Rng rng(o.seed);
  return {"generated (" + std::to_string(kGeneratedWords) + " words, seed " + std::to_string(o.seed) + ")",
          random_words(kGeneratedWords, rng)};
}

KvLayout layout_of(KvType type, const Knobs& knobs) {
  KvLayout layout;
  layout.k_type = type;
  layout.v_type = type;
  layout.block_size = knobs.block_size;
  layout.recent_rows = knobs.kv_recent;
  return layout;
}

}  // namespace

Report run_quality(const BenchOptions& o) {
  const Text text = load_text(o);
  const std::unique_ptr<Model> model = Model::load(o.model_path, ModelLoadOptions{o.tokenizer_path});
  ThreadPool pool(resolve_threads(o.knobs.threads));
  std::vector<int32_t> tokens = model->tokenizer().encode(text.body, false);
  if (o.max_text_tokens > 0 && int32_t(tokens.size()) > o.max_text_tokens) tokens.resize(size_t(o.max_text_tokens));
  const bool retention = std::any_of(o.retention_policies.begin(), o.retention_policies.end(),
                                     [](const std::string& p) { return p != "none"; });
  if (retention) return run_retention_quality(o, *model, tokens, text.source);
  Report r;
  r.mode = "quality";
  r.repeated = false;
  Table t{"KV type vs f32 KV",
          {"KV type", "bytes/token", "perplexity", "f32 perplexity", "KL mean (nats)", "KL max", "top-1 agree %"},
          {}};
  Plot p{"kl", "Mean KL divergence from f32 KV", "KV type", "nats", {}, {{"KL mean", {}, {}}}};
  nlohmann::json rows = nlohmann::json::array();
  std::vector<KvType> types = parse_kv_types(o.kv_types);
  std::erase(types, KvType::F32);
  KvComparisonOptions co;
  for (KvType type : types) co.layouts.push_back(layout_of(type, o.knobs));
  co.reference = layout_of(KvType::F32, o.knobs);
  co.ctx = o.ctx;
  co.bos = model->tokenizer().bos_id();
  CpuForward forward(*model, pool);
  std::optional<KvComparison> comparison;
  if (!types.empty()) comparison.emplace(*model, forward, tokens, co);
  while (comparison && !stop_requested() && comparison->step()) {
  }
  const size_t finished = comparison ? comparison->finished() : 0;
  for (size_t i = 0; i < finished; ++i) {
    const KvType type = types[i];
    const PerplexityResult q = comparison->result(i);
    const size_t bytes = kv_bytes_per_token(model->config(), type, type);
    progress("quality " + std::string(kv_type_name(type)) + ": ppl " + format_number(q.ppl, 4) + " (f32 " +
             format_number(q.ppl_ref, 4) + "), KL " + format_number(q.kl_mean, 6));
    t.rows.push_back({kv_type_name(type), std::to_string(bytes), format_number(q.ppl, 4), format_number(q.ppl_ref, 4),
                      format_number(q.kl_mean, 6), format_number(q.kl_max, 6), format_number(q.top1_agree, 2)});
    p.categories.push_back(kv_type_name(type));
    p.series[0].y.push_back(q.kl_mean);
    rows.push_back({{"kv_type", kv_type_name(type)},
                    {"bytes_per_token", bytes},
                    {"ppl", q.ppl},
                    {"ppl_ref", q.ppl_ref},
                    {"kl_mean", q.kl_mean},
                    {"kl_max", q.kl_max},
                    {"top1_agree", q.top1_agree},
                    {"tokens", q.tokens},
                    {"ctx", q.ctx}});
  }
  r.partial = stop_requested();
  r.settings = {{"text", text.source},
                {"text_tokens", tokens.size()},
                {"ctx", rows.empty() ? nlohmann::json(o.ctx) : rows[0]["ctx"]},
                {"reference", "f32"},
                {"block_size", o.knobs.block_size},
                {"kv_recent", o.knobs.kv_recent}};
  r.results["types"] = rows;
  r.tables.push_back(t);
  r.plots.push_back(p);
  r.notes.push_back(
      "Every type runs the same windows of the text as the f32 reference; KL is KL(f32 || type) per "
      "position, top-1 agreement the share of positions whose most likely next token matches f32's.");
  return r;
}

}  // namespace kvdesk::bench
