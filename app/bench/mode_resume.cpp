// kvdesk-bench resume: time to first token of a conversation's next turn by where the KV of its
// history comes from, at several history lengths:
//   cold      nothing reused: an engine without prefix cache computes history and turn
//   parked    the engine still holds the conversation, as between two turns in the app
//   database  a new engine imports the KV the app saved in its SQLite store, through the app's
//             own load and import path (app/chat/saved_kv.h); the load and the import are part
//             of the TTFT, as for a turn sent the moment the conversation is opened
//   opened    the same, with load and import done before the turn is sent, as the app does
//             when a conversation is opened (the user reads and types meanwhile)
//   host tier an engine whose pool holds the history and little more: a short request
//             in between fills the pool, the parked history moves to the host tier
//             (engine/kv/host_tier.h), and the turn swaps it back in
// and the bytes one conversation's saved KV takes per KV type, encoded and as stored (zstd).
// Histories are random tokens (TTFT does not depend on their values); each run draws new ones,
// so no arm reuses another run's blocks.
#include <unistd.h>

#include <filesystem>
#include <optional>

#include "app/bench/bench_modes.h"
#include "app/bench/bench_stats.h"
#include "app/chat/saved_kv.h"
#include "app/replay/replayer.h"
#include "app/store/conversation_store.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "kernels/kv_type.h"

namespace kvdesk::bench {
namespace {

using Clock = std::chrono::steady_clock;

enum Arm { kCold, kParked, kDatabase, kOpened, kHostTier, kNumArms };
constexpr const char* kArmKeys[] = {"cold", "parked", "database", "database_opened", "host_tier"};
constexpr uint64_t kConversation = 1;
constexpr KvType kDefaultBytesTypes[] = {KvType::F16, KvType::BF16, KvType::FP8_E4M3, KvType::INT8, KvType::INT4};

// One arm's runs at one history length. The token counts are the last run's (every run has the
// same lengths).
struct ArmRuns {
  std::vector<double> ttft_ms;
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;
};

struct HistoryResult {
  int32_t history_tokens = 0;
  ArmRuns arms[kNumArms];
  std::vector<double> load_ms;     // database: reading and decoding the saved KV
  std::vector<double> import_ms;   // database: the engine adopting it
};

// A saved conversation's size for one KV type and history length.
struct BytesResult {
  KvType type = KvType::F16;
  int32_t history_tokens = 0;
  int64_t encoded_bytes = 0;
  int64_t stored_bytes = 0;
};

// The engines and the scratch database the arms share.
struct Bench {
  std::unique_ptr<Engine> app;     // the app's settings: parked turns, then exports
  std::unique_ptr<Engine> fresh;   // imports saved KV
  std::unique_ptr<Engine> cold;    // no prefix cache
  std::unique_ptr<Engine> tiered;  // a pool of one history: its parked turn goes to the host tier
  std::filesystem::path db_path;
  std::optional<store::ConversationStore> store;
};

std::unique_ptr<Engine> load_engine(const BenchOptions& o, const Knobs& k) {
  auto engine = std::make_unique<Engine>();
  engine->load_model(engine_settings(o, k));
  wait_for_model(*engine);
  return engine;
}

// Runs tokens as one request that generates a single token (a turn of the conversation when
// key is non-zero) and returns its metrics.
RequestMetrics run_request(Engine& engine, std::vector<int32_t> tokens, uint64_t key) {
  Request r;
  r.prompt_tokens = std::move(tokens);
  r.max_tokens = 1;
  r.stop_at_eos = false;
  r.conversation_key = key;
  const RequestId id = engine.submit(std::move(r));
  for (;;) {
    engine.wait_idle(std::chrono::seconds(1));
    for (const Event& e : engine.poll_events()) {
      if (e.request != id) continue;
      if (e.kind == EventKind::Error) throw Error("resume benchmark request failed: " + e.text);
      if (e.kind == EventKind::Finished) return e.metrics;
    }
  }
}

void record(ArmRuns& arm, const RequestMetrics& m, double ttft_ms) {
  arm.ttft_ms.push_back(ttft_ms);
  arm.prompt_tokens = m.prompt_tokens;
  arm.cached_tokens = m.cached_tokens;
}

// The conversation's history as the app's engine leaves it after a turn: computed and parked.
ConversationKv park_history(Engine& engine, const std::vector<int32_t>& history) {
  run_request(engine, history, kConversation);
  std::optional<ConversationKv> kv = engine.export_conversation(kConversation).get();
  if (!kv) throw Error("the engine parked no KV for the history (is the KV budget too small?)");
  return std::move(*kv);
}

// Saves kv as a new conversation's KV in the scratch store; returns the conversation.
store::ConversationId save(Bench& b, const ConversationKv& kv, int64_t* stored_bytes) {
  const store::ConversationId id = b.store->create_conversation("resume benchmark");
  const store::KvSaveResult saved = chat::save_conversation_kv(*b.store, id, kv);
  if (!saved.saved) throw Error("the saved-KV cap of the scratch database refused the history's KV");
  if (stored_bytes) *stored_bytes = saved.stored_bytes;
  return id;
}

// The database arms as the app takes them: load and decode the saved KV, import it, then the
// turn. The engine runs import and turn in order on its thread, so a turn sent at once waits for
// both (database) and a turn sent after the conversation was opened waits for neither (opened).
void run_database(Bench& b, store::ConversationId id, const std::vector<int32_t>& next, HistoryResult& h) {
  const auto start = Clock::now();
  chat::SavedKv saved = chat::load_saved_kv(*b.store, id);
  if (!saved.kv) throw Error("the saved KV could not be loaded: " + saved.why_not);
  const double load_ms = ms_since(start);
  const std::string refused = b.fresh->import_conversation(kConversation, std::move(*saved.kv)).get();
  if (!refused.empty()) throw Error("the engine refused the saved KV: " + refused);
  const double restored_ms = ms_since(start);
  const RequestMetrics m = run_request(*b.fresh, next, kConversation);
  record(h.arms[kDatabase], m, restored_ms + m.ttft_ms);
  record(h.arms[kOpened], m, m.ttft_ms);
  h.load_ms.push_back(load_ms);
  h.import_ms.push_back(restored_ms - load_ms);
  b.fresh->release_conversation(kConversation);
  b.store->delete_conversation(id);
}

// The tiered engine's pool sized for the history, the turn and two blocks more.
void size_tiered_pool(Bench& b, const BenchOptions& o, int32_t history_tokens) {
  const EngineSettings s = engine_settings(o, o.knobs);
  KvLayout layout = s.kv;
  const int32_t groups = b.tiered->stats().kv.layer_groups;
  layout.num_blocks = (kv_blocks_for(int64_t(history_tokens) + o.turn_tokens + 1, layout.block_size) + 2) * groups;
  b.tiered->reconfigure_kv(layout, 0, s.prefix_caching, s.scheduler.host_tier_bytes);
  wait_for_model(*b.tiered);
}

// Parks the history, then runs a request one block larger than what the pool has left, so the
// parked turn must leave the pool for the host tier; the turn then brings it back.
void run_host_tier(Bench& b, const std::vector<int32_t>& history, const std::vector<int32_t>& next, Rng& rng,
                   int32_t vocab_size, HistoryResult& h) {
  Engine& e = *b.tiered;
  run_request(e, history, kConversation);
  const KvSnapshot kv = e.stats().kv;
  const int32_t available = kv.blocks_free + kv.blocks_cached;
  const int32_t filler_blocks = (available + kv.layer_groups) / kv.layer_groups;
  run_request(e, random_tokens(filler_blocks * kv.layout.block_size, vocab_size, rng), 0);
  const RequestMetrics m = run_request(e, next, kConversation);
  if (m.host_tier_tokens == 0) throw Error("the history did not come back from the host tier (is --host-tier-mib 0?)");
  record(h.arms[kHostTier], m, m.ttft_ms);
  e.release_conversation(kConversation);
}

void run_history_once(Bench& b, const BenchOptions& o, const ModelConfig& config, int32_t bos, uint64_t seed,
                      HistoryResult& h) {
  Rng rng(seed);
  std::vector<int32_t> history = {bos};
  const std::vector<int32_t> body = random_tokens(h.history_tokens - 1, config.vocab_size, rng);
  history.insert(history.end(), body.begin(), body.end());
  std::vector<int32_t> next = history;
  const std::vector<int32_t> turn = random_tokens(o.turn_tokens, config.vocab_size, rng);
  next.insert(next.end(), turn.begin(), turn.end());

  const RequestMetrics cold = run_request(*b.cold, next, 0);
  record(h.arms[kCold], cold, cold.ttft_ms);

  const ConversationKv kv = park_history(*b.app, history);
  const RequestMetrics parked = run_request(*b.app, next, kConversation);
  record(h.arms[kParked], parked, parked.ttft_ms);
  b.app->release_conversation(kConversation);

  run_database(b, save(b, kv, nullptr), next, h);
  run_host_tier(b, history, next, rng, config.vocab_size, h);
}

BytesResult measure_bytes(Bench& b, Engine& engine, KvType type, const ModelConfig& config, int32_t bos,
                          int32_t history_tokens, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> history = {bos};
  const std::vector<int32_t> body = random_tokens(history_tokens - 1, config.vocab_size, rng);
  history.insert(history.end(), body.begin(), body.end());
  const ConversationKv kv = park_history(engine, history);
  engine.release_conversation(kConversation);
  BytesResult r{type, history_tokens, int64_t(chat::encode_kv(kv).size()), 0};
  b.store->delete_conversation(save(b, kv, &r.stored_bytes));
  return r;
}

std::vector<KvType> bytes_types(const BenchOptions& o) {
  if (o.kv_types.empty()) return {std::begin(kDefaultBytesTypes), std::end(kDefaultBytesTypes)};
  return parse_kv_types(o.kv_types);
}

void check_histories(const BenchOptions& o, const ModelConfig& config) {
  if (o.histories.empty()) throw Error("--histories needs at least one length");
  for (int32_t h : o.histories) {
    if (h < 2) throw Error("--histories must be at least 2 tokens");
    if (int64_t(h) + o.turn_tokens + 1 > config.context_length) {
      throw Error("a history of " + std::to_string(h) + " tokens and a turn of " + std::to_string(o.turn_tokens) +
                  " do not fit the model's context of " + std::to_string(config.context_length) +
                  "; lower --histories or --turn-tokens");
    }
  }
}

std::string ttft_cell(const HistoryResult& h, Arm arm) { return format_stats(summarize(h.arms[arm].ttft_ms), 1); }

std::string computed_cell(const HistoryResult& h) {
  std::string cell;
  for (int a = 0; a < kNumArms; ++a) {
    const ArmRuns& r = h.arms[a];
    cell += (a > 0 ? " / " : "") + std::to_string(r.prompt_tokens - r.cached_tokens);
  }
  return cell;
}

nlohmann::json arm_json(const ArmRuns& r) {
  nlohmann::json j = stats_json(summarize(r.ttft_ms));
  j["prompt_tokens"] = r.prompt_tokens;
  j["cached_tokens"] = r.cached_tokens;
  j["computed_tokens"] = r.prompt_tokens - r.cached_tokens;
  return j;
}

void add_ttft_results(Report& r, const BenchOptions& o, const std::vector<HistoryResult>& results) {
  Table t{"Time to first token of the next turn (ms; median [min-max] of " + std::to_string(o.repeat) + " runs)",
          {"history tokens", "cold", "parked", "database", "database, opened ahead", "host tier",
           "computed tokens (cold / parked / database / opened / host tier)"},
          {}};
  nlohmann::json rows = nlohmann::json::array();
  for (const HistoryResult& h : results) {
    t.rows.push_back({std::to_string(h.history_tokens), ttft_cell(h, kCold), ttft_cell(h, kParked),
                      ttft_cell(h, kDatabase), ttft_cell(h, kOpened), ttft_cell(h, kHostTier), computed_cell(h)});
    nlohmann::json j = {{"history_tokens", h.history_tokens}, {"turn_tokens", o.turn_tokens}};
    for (int a = 0; a < kNumArms; ++a) j[kArmKeys[a]] = arm_json(h.arms[a]);
    j["database"]["load_ms"] = stats_json(summarize(h.load_ms));
    j["database"]["import_ms"] = stats_json(summarize(h.import_ms));
    rows.push_back(j);
  }
  r.results["histories"] = rows;
  r.tables.push_back(t);
}

void add_bytes_results(Report& r, const BenchOptions& o, const std::vector<BytesResult>& bytes) {
  Table t{"Bytes per saved conversation (encoded / stored with zstd)", {"KV type"}, {}};
  for (int32_t h : o.histories) t.header.push_back(std::to_string(h) + " tokens");
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < bytes.size(); i += o.histories.size()) {
    std::vector<std::string> row = {kv_type_name(bytes[i].type)};
    for (size_t k = i; k < i + o.histories.size() && k < bytes.size(); ++k) {
      row.push_back(format_number(double(bytes[k].encoded_bytes) / 1024.0, 0) + " KiB / " +
                    format_number(double(bytes[k].stored_bytes) / 1024.0, 0) + " KiB");
      rows.push_back({{"kv_type", kv_type_name(bytes[k].type)},
                      {"history_tokens", bytes[k].history_tokens},
                      {"encoded_bytes", bytes[k].encoded_bytes},
                      {"stored_bytes", bytes[k].stored_bytes}});
    }
    t.rows.push_back(row);
  }
  r.results["bytes"] = rows;
  r.tables.push_back(t);
}

// A scratch database beside the system's temporary files, removed with its WAL files.
std::filesystem::path scratch_db_path(uint64_t seed) {
  return std::filesystem::temp_directory_path() /
         ("kvdesk-bench-resume-" + std::to_string(::getpid()) + "-" + std::to_string(seed) + ".db");
}

void remove_db(const std::filesystem::path& path) {
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path.string() + suffix, ec);
}

std::vector<HistoryResult> measure_ttft(Bench& b, const BenchOptions& o, const ModelConfig& config, int32_t bos) {
  std::vector<HistoryResult> results;
  for (int32_t history : o.histories) {
    HistoryResult h;
    h.history_tokens = history;
    size_tiered_pool(b, o, history);
    for (int32_t run = 0; run < o.repeat && !stop_requested(); ++run) {
      run_history_once(b, o, config, bos, o.seed + uint64_t(run) * 7919 + uint64_t(history), h);
      progress("resume history " + std::to_string(history) + " run " + std::to_string(run + 1) + "/" +
               std::to_string(o.repeat) + ": cold " + format_number(h.arms[kCold].ttft_ms.back(), 1) + " ms, parked " +
               format_number(h.arms[kParked].ttft_ms.back(), 1) + " ms, database " +
               format_number(h.arms[kDatabase].ttft_ms.back(), 1) + " ms, opened " +
               format_number(h.arms[kOpened].ttft_ms.back(), 1) + " ms, host tier " +
               format_number(h.arms[kHostTier].ttft_ms.back(), 1) + " ms");
    }
    if (!h.arms[kDatabase].ttft_ms.empty()) results.push_back(h);
  }
  return results;
}

std::vector<BytesResult> measure_all_bytes(Bench& b, const BenchOptions& o, const ModelConfig& config, int32_t bos) {
  std::vector<BytesResult> bytes;
  for (KvType type : bytes_types(o)) {
    if (stop_requested()) break;
    Knobs k = o.knobs;
    k.kv_type = type;
    const std::unique_ptr<Engine> engine = load_engine(o, k);
    for (int32_t history : o.histories) {
      bytes.push_back(measure_bytes(b, *engine, type, config, bos, history, o.seed + uint64_t(history)));
      progress("resume bytes " + std::string(kv_type_name(type)) + " at " + std::to_string(history) + " tokens: " +
               std::to_string(bytes.back().stored_bytes) + " stored");
    }
  }
  return bytes;
}

}  // namespace

Report run_resume(const BenchOptions& o) {
  const ModelConfig config = read_config(o.model_path);
  check_histories(o, config);
  const int32_t bos = read_bos_id(o.model_path);
  Report r;
  r.mode = "resume";
  Bench b;
  b.db_path = scratch_db_path(o.seed);
  remove_db(b.db_path);
  b.store = store::ConversationStore::open(b.db_path);
  b.store->set_setting(chat::kKvCapSetting, std::to_string(int64_t(1) << 40));
  try {
    Knobs no_cache = o.knobs;
    no_cache.prefix_cache = false;
    b.app = load_engine(o, o.knobs);
    b.fresh = load_engine(o, o.knobs);
    b.cold = load_engine(o, no_cache);
    b.tiered = load_engine(o, o.knobs);
    const std::vector<HistoryResult> ttft = measure_ttft(b, o, config, bos);
    b.app.reset();   // the TTFT engines' memory back before the per-type engines load
    b.fresh.reset();
    b.cold.reset();
    b.tiered.reset();
    const std::vector<BytesResult> bytes = measure_all_bytes(b, o, config, bos);
    add_ttft_results(r, o, ttft);
    add_bytes_results(r, o, bytes);
  } catch (...) {
    b.store.reset();
    remove_db(b.db_path);
    throw;
  }
  b.store.reset();
  remove_db(b.db_path);
  r.partial = stop_requested();
  nlohmann::json types = nlohmann::json::array();
  for (KvType t : bytes_types(o)) types.push_back(kv_type_name(t));
  r.settings = {{"histories", o.histories}, {"turn_tokens", o.turn_tokens}, {"repeat", o.repeat},
                {"seed", o.seed},           {"bytes_kv_types", types},     {"knobs", knobs_json(o.knobs)}};
  r.notes.push_back(
      "Each run: a history of random tokens (BOS first), then a user turn of " + std::to_string(o.turn_tokens) +
      " tokens; TTFT is the turn's time to its first token. Cold: an engine without prefix cache computes history "
      "and turn. Parked: the engine that ran the history as a conversation's turn (the app's settings) still holds "
      "it. Database: the history's KV, exported after that turn and saved in a SQLite store as the app saves it, is "
      "loaded, decoded and imported into another engine; the load and import times are included (database), or "
      "done before the turn is sent, as the app does when the conversation is opened (database, opened ahead). Host tier: an engine whose pool "
      "holds the history, the turn and two blocks parks the history, runs a request just larger than the rest of its "
      "pool (the parked history moves to the host tier), then the turn, which swaps it back in. Computed tokens: prompt tokens minus those whose KV was reused. Bytes: one "
      "conversation's saved KV (token ids and blocks) per KV type, as encoded and as stored (zstd) in the database.");
  return r;
}

}  // namespace kvdesk::bench
