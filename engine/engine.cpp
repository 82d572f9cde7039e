// Engine: a command inbox and an event outbox around one engine thread that owns the model,
// the KV cache and the scheduler. Commands are closures run on the engine thread between
// steps, so the engine's state needs no locks; only the two queues and the stats are shared.
#include "engine/engine.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "engine/backend/forward_backend.h"
#include "engine/chat/chat_template.h"
#include "engine/chat/family_templates.h"
#include "engine/error.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/kv/kv_cache.h"
#include "engine/kv/kv_type_costs.h"
#include "engine/model/key_smoothing.h"
#include "engine/model/model.h"
#include "engine/model/model_info.h"
#include "engine/quality/kv_quality.h"
#include "engine/runtime/engine_core.h"
#include "engine/runtime/token_printing.h"
#include "engine/system/load_progress.h"
#include "engine/system/memory_limit.h"
#include "engine/system/thread_pool.h"
#include "kernels/hadamard.h"
#include "kernels/kv_quant.h"

namespace kvdesk {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kStatsInterval = std::chrono::milliseconds(100);
// Without an explicit budget the pool holds this many full contexts...
constexpr int64_t kDefaultContexts = 4;
// ...but never more than this share of the memory available now.
constexpr double kDefaultMemoryShare = 0.25;
// What the default budget assumes when MemAvailable cannot be read.
constexpr uint64_t kUnknownMemory = uint64_t{1} << 30;

int32_t pool_blocks(const KvLayout& layout, size_t budget, const ModelConfig& config, size_t bytes_per_block,
                    int32_t chunk_tokens) {
  if (layout.num_blocks > 0) return layout.num_blocks;
  if (budget == 0) {
    const size_t per_context =
        bytes_per_block * size_t(kv_blocks_for_sequence(config, layout.block_size, config.context_length, chunk_tokens));
    const uint64_t available = available_memory_bytes();
    budget = std::min(per_context * kDefaultContexts,
                      size_t(double(available > 0 ? available : kUnknownMemory) * kDefaultMemoryShare));
  }
  const size_t blocks = budget / bytes_per_block;
  if (blocks < 1) {
    throw Error("the KV budget of " + std::to_string(budget) + " bytes is smaller than one block (" +
                std::to_string(bytes_per_block) + " bytes: " + std::to_string(layout.block_size) + " tokens of K and V in each of " +
                std::to_string(kv_layer_groups(config).layers_per_block) + " layers)");
  }
  if (blocks > size_t(1) << 24) throw Error("the KV budget asks for more than 16M blocks");
  return int32_t(blocks);
}

uint64_t model_identity(const Model& m) {
  const ModelConfig& c = m.config();
  const std::string key = m.file().path() + "|" + std::to_string(m.file().file_size()) + "|" +
                          std::to_string(c.rope_freq_base) + "|" + std::to_string(c.rope_freq_scale);
  return std::hash<std::string>{}(key);
}

// The model's part of a saved KV's identity: a hash of the GGUF header (every metadata value)
// and tensor table, not of its gigabytes of weights.
std::string model_header_hash(const GgufFile& file) {
  std::string header = std::to_string(file.version()) + "|" + std::to_string(file.file_size());
  for (const auto& [key, value] : file.metadata()) {
    header += "|" + key + "=" + std::to_string(value.i) + "," + std::to_string(value.u) + "," + std::to_string(value.f) + "," + value.str;
    for (const std::string& s : value.strings) header += "," + s;
    for (double x : value.numbers) header += "," + std::to_string(x);
  }
  for (const GgufTensorInfo& t : file.tensors()) {
    header += "|" + t.name + ":" + std::to_string(int(t.type)) + "@" + std::to_string(t.offset);
    for (int64_t d : t.dims) header += "x" + std::to_string(d);
  }
  char model_hash[17];
  std::snprintf(model_hash, sizeof model_hash, "%016llx", static_cast<unsigned long long>(std::hash<std::string>{}(header)));
  return model_hash;
}

// The rows' scheme part of a KV identity ("; scheme k=mean+scale+hadamard v=hadamard"): what a K
// type stores besides its format, the model's mean key subtracted and its key scales applied
// (engine/model/key_smoothing.h) and the Hadamard rotation (kernels/hadamard.h), and a V type's
// rotation. "" when none applies, so f32 / f16 / bf16 KV saved before these schemes stays valid,
// while quantized KV of a build that stored other rows (plain, or int keys without the scales)
// is refused rather than read wrongly. Rows of a head dim that is not a multiple of an int type's
// group end in one wider group (kernels/kv_quant.h), which " wide last group" names: such rows
// saved when they ended in a short group are refused too.
std::string scheme_identity(const KvLayout& layout, const ModelConfig& config) {
  const bool smoothed = kv_keys_smoothed(layout, config);
  if (!smoothed && !kv_type_rotated(layout.k_type) && !kv_type_rotated(layout.v_type)) return "";
  std::string k = smoothed ? "mean" : "";
  if (kv_keys_scaled(layout, config)) k += "+scale";
  if (kv_type_rotated(layout.k_type)) k += k.empty() ? "hadamard" : "+hadamard";
  const bool wide = kv_row_wide_last_group(layout.k_type, config.head_dim) ||
                    kv_row_wide_last_group(layout.v_type, config.head_dim);
  return "; scheme k=" + (k.empty() ? std::string("plain") : k) + " v=" + (kv_type_rotated(layout.v_type) ? "hadamard" : "plain") +
         (wide ? " wide last group" : "");
}

// What a saved KV is valid for: the model, the pool's KV types, their rows' scheme and block
// size, and the chat template that rendered the tokens. Readable, so a refusal can name the part
// that differs.
std::string kv_identity(const std::string& model_hash, const KvLayout& layout, const ModelConfig& config,
                        const ChatTemplate& chat_template) {
  return "model " + model_hash + "; kv " + kv_type_name(layout.k_type) + "/" + kv_type_name(layout.v_type) +
         scheme_identity(layout, config) + "; block " + std::to_string(layout.block_size) + "; template " +
         chat_template.name + " " + chat_template.source_hash;
}

// What stored token ids are valid for: the model (its tokenizer and what it generates) and the
// chat template that rendered the spans; the KV identity's parts without the pool's layout.
std::string token_identity(const std::string& model_hash, const ChatTemplate& chat_template) {
  return "model " + model_hash + "; template " + chat_template.name + " " + chat_template.source_hash;
}

// "" when the identities match, else the first part ("model ...", "kv ...") that differs.
std::string identity_mismatch(const std::string& saved, const std::string& current) {
  if (saved == current) return "";
  size_t at = 0;
  while (at < saved.size() && at < current.size() && saved[at] == current[at]) ++at;
  const size_t part = current.rfind("; ", at);
  const size_t begin = part == std::string::npos ? 0 : part + 2;
  const std::string part_name = current.substr(begin, current.find(' ', begin) - begin);
  const std::string what = part_name == "kv" ? "KV type" : part_name == "scheme" ? "KV row scheme"
                         : part_name == "block" ? "block size"
                         : part_name == "template" ? "chat template" : "model";
  return "the saved KV was made with another " + what + " (saved: " + saved + "; now: " + current + ")";
}

}  // namespace

struct Engine::State {
  std::function<void()> wake;
  std::thread thread;

  // Shared between threads, guarded by mutex.
  std::mutex mutex;
  std::condition_variable work_cv;
  std::condition_variable idle_cv;
  std::deque<std::function<void()>> inbox;
  std::vector<Event> outbox;
  EngineStats stats;
  bool stopping = false;
  bool idle = true;
  std::atomic<RequestId> next_id{1};
  // Loads are numbered as posted; a load is cancelled when cancelled_loads has reached its number.
  std::atomic<uint64_t> posted_loads{0};
  std::atomic<uint64_t> cancelled_loads{0};

  // Engine thread only.
  EngineSettings settings;
  BackendChoice backend;
  std::unique_ptr<Model> model;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<ForwardBackend> forward;   // the chosen backend's forward pass over model
  std::unique_ptr<KvCache> kv;
  std::unique_ptr<EngineCore> core;
  // The loaded model's KV quality being measured, one step at a time when no request has work;
  // null when none is asked for. It runs over model and forward, so it goes before them.
  std::unique_ptr<KvQualityMeasurement> quality;
  ChatTemplate chat_template;
  std::string model_hash;                    // model_header_hash of the loaded model
  std::vector<KvTypeCost> kv_costs;          // of the loaded model's shape
  ModelDescription description;              // of the loaded model
  std::vector<Event> pending;
  // Chat requests in flight: their messages' spans, completed with the generated ids as Token
  // events pass and handed out with the Finished event.
  std::unordered_map<RequestId, ChatTokens> chat_turns;
  Clock::time_point last_stats;
  uint64_t tokens_at_last_stats = 0;

  void post(std::function<void()> command) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      inbox.push_back(std::move(command));
      idle = false;
    }
    work_cv.notify_one();
  }

  void run();
  void track_chat_tokens(Event& e);
  void flush_events();
  void publish_stats(bool force);
  void error_event(RequestId id, const std::string& message) {
    Event e;
    e.kind = EventKind::Error;
    e.request = id;
    e.text = message;
    pending.push_back(std::move(e));
  }

  void drop_model();
  void load(const EngineSettings& s, uint64_t load_number);
  void load_and_report(const EngineSettings& s, uint64_t load_number);
  void post_progress(double fraction);
  void create_kv(const KvLayout& layout, size_t budget, bool prefix_caching);
  void submit(RequestId id, Request request, Clock::time_point submitted);
  void start_kv_quality(std::vector<KvType> types);
  void step_kv_quality();
  void kv_quality_event(KvQuality quality, const std::string& failure);
};

void Engine::State::run() {
  for (;;) {
    std::deque<std::function<void()>> commands;
    const bool busy = core && core->has_work();
    {
      std::unique_lock<std::mutex> lock(mutex);
      if (!busy && inbox.empty()) {
        idle = true;
        idle_cv.notify_all();
      }
      work_cv.wait(lock, [&] { return stopping || busy || quality || !inbox.empty(); });
      if (stopping) return;
      commands.swap(inbox);
    }
    for (auto& command : commands) {
      try {
        command();
      } catch (const std::exception& e) {
        error_event(0, e.what());
      }
    }
    if (core && core->has_work()) {
      try {
        core->step(pending);
      } catch (const std::exception& e) {
        core->fail_all(std::string("engine step failed: ") + e.what(), pending);
      }
    } else if (quality) {
      step_kv_quality();   // only while no request has work: requests never wait on more than one step of it
    }
    publish_stats(!commands.empty() || (!(core && core->has_work()) && !quality));
    flush_events();
  }
}

void Engine::State::track_chat_tokens(Event& e) {
  const auto it = chat_turns.find(e.request);
  if (it == chat_turns.end()) return;
  if (e.kind == EventKind::Token && e.token >= 0) it->second.answer.push_back(e.token);
  if (e.kind == EventKind::Finished) e.chat_tokens = std::move(it->second);
  if (e.kind == EventKind::Finished || e.kind == EventKind::Error) chat_turns.erase(it);
}

void Engine::State::flush_events() {
  if (pending.empty()) return;
  for (Event& e : pending) track_chat_tokens(e);
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (Event& e : pending) outbox.push_back(std::move(e));
  }
  pending.clear();
  if (wake) wake();
}

void Engine::State::publish_stats(bool force) {
  const auto now = Clock::now();
  if (!force && now - last_stats < kStatsInterval) return;
  EngineStats s;
  s.model_loaded = model != nullptr;
  if (model) {
    const ModelConfig& c = model->config();
    s.model = ModelSummary{model->file().path(), model_hash, c.name, c.architecture, c.context_length, c.block_count,
                           c.head_count, c.head_count_kv, c.head_dim, model->weights().num_parameters,
                           model->weights().weight_bytes, backend_name(backend.backend), backend.note,
                           pool->num_threads(), chat_template.name, chat_template.warning, chat_template.source,
                           special_texts(model->tokenizer()).bos, special_texts(model->tokenizer()).eos,
                           chat_template.opens_reasoning,
                           forward->device_memory(), kv->on_device(), kv_costs, description};
    const Scheduler& sched = core->scheduler();
    s.running = sched.num_running();
    s.waiting = sched.num_waiting();
    s.swapped = sched.num_swapped();
    s.parked = sched.num_parked();
    s.generated_tokens = core->generated_tokens();
    s.preemptions = sched.preemptions();
    s.swapped_bytes = sched.swapped_bytes();
    s.swap_ms = sched.swap_ms();
    s.kv = kv->snapshot();
    s.kv.host_tier = sched.host_tier().stats();
    s.owners = sched.sequence_owners();
    s.activation_bytes = model->scratch_bytes();
    s.memory_available_bytes = available_memory_bytes();
    s.prefix_caching = settings.prefix_caching;
    const double seconds = std::chrono::duration<double>(now - last_stats).count();
    s.tokens_per_s = seconds > 0 ? double(s.generated_tokens - tokens_at_last_stats) / seconds : 0;
    tokens_at_last_stats = s.generated_tokens;
  }
  last_stats = now;
  std::lock_guard<std::mutex> lock(mutex);
  s.steps = stats.steps + 1;
  stats = std::move(s);
}

// Progress goes out at once (with anything pending before it), not after the load's command.
void Engine::State::post_progress(double fraction) {
  Event e;
  e.kind = EventKind::LoadProgress;
  e.progress = fraction;
  pending.push_back(std::move(e));
  flush_events();
}

void Engine::State::load_and_report(const EngineSettings& s, uint64_t load_number) {
  try {
    load(s, load_number);
  } catch (const LoadCancelled& cancelled) {
    Event e;
    e.kind = EventKind::Error;
    e.finish = FinishReason::Cancelled;
    e.text = cancelled.what();
    pending.push_back(std::move(e));
  }
}

// Every part that holds on to the model, in the order they depend on each other.
void Engine::State::drop_model() {
  quality.reset();
  core.reset();
  kv.reset();
  forward.reset();
  model.reset();
}

void Engine::State::load(const EngineSettings& s, uint64_t load_number) {
  if (core) core->fail_all("the model was replaced", pending);
  drop_model();
  settings = s;
  backend = select_backend(s.backend);
  LoadProgress progress([this](double fraction) { post_progress(fraction); },
                        [this, load_number] { return cancelled_loads.load() >= load_number; });
  model = Model::load(s.model_path, ModelLoadOptions{s.tokenizer_path, s.memory_limit_bytes, backend.backend == Backend::Cpu},
                      progress);
  try {
    progress.check_cancelled();
    const int32_t threads = s.threads > 0 ? s.threads : std::max(1, int32_t(std::thread::hardware_concurrency()));
    pool = std::make_unique<ThreadPool>(threads);
    chat_template = chat_template_for(model->file(), s.chat_template_source.empty() ? s.chat_template : s.chat_template_file,
                                      s.chat_template_source);
    forward = make_forward_backend(backend.backend, *model, *pool);
    progress.check_cancelled();
    create_kv(s.kv, s.kv_budget_bytes, s.prefix_caching);
  } catch (const Error&) {
    forward.reset();
    model.reset();   // no model without its KV pool: requests then get "no model is loaded"
    throw;
  }
  kv_costs = kv_type_costs(model->config());
  description = describe_model(*model, s.tokenizer_path);
  model_hash = model_header_hash(model->file());
  core = std::make_unique<EngineCore>(*model, *forward, *kv, s.scheduler);
  progress.finish();
  Event e;
  e.kind = EventKind::ModelLoaded;
  e.text = backend.note;
  pending.push_back(std::move(e));
}

void Engine::State::create_kv(const KvLayout& layout, size_t budget, bool prefix_caching) {
  KvCacheConfig config;
  config.layout = layout;
  config.prefix_caching = prefix_caching;
  config.identity = model_identity(*model);
  const size_t bytes_per_block = kv_bytes_per_block(model->config(), layout.k_type, layout.v_type, layout.block_size);
  const int32_t chunk = settings.scheduler.step_token_budget;
  config.device_pool = forward->kv_pool();
  if (config.device_pool) {
    // Device memory, as vLLM: what the device's plan leaves beside the model, or less when a
    // pool size or budget was asked for.
    const int32_t device_blocks = forward->max_kv_blocks(bytes_per_block);
    const bool asked = layout.num_blocks > 0 || budget > 0;
    config.layout.num_blocks =
        asked ? std::min(pool_blocks(layout, budget, model->config(), bytes_per_block, chunk), device_blocks) : device_blocks;
    kv.reset();   // the old pool's device memory first: two pools the size of the device do not fit
  } else {
    config.layout.num_blocks = pool_blocks(layout, budget, model->config(), bytes_per_block, chunk);
    const uint64_t weights = model->weights().weight_bytes;
    const uint64_t limit = settings.memory_limit_bytes;
    const uint64_t available = limit == 0 ? available_memory_bytes() : limit > weights ? limit - weights : 1;
    require_memory(uint64_t(config.layout.num_blocks) * bytes_per_block, available,
                   "the KV pool of " + std::to_string(config.layout.num_blocks) + " blocks");
  }
  kv = std::make_unique<KvCache>(model->config(), config);
  settings.kv = layout;
  settings.kv_budget_bytes = budget;
  settings.prefix_caching = prefix_caching;
}

void Engine::State::submit(RequestId id, Request request, Clock::time_point submitted) {
  try {
    if (!model) throw Error("no model is loaded");
    const Tokenizer& tokenizer = model->tokenizer();
    std::vector<int32_t> prompt = request.prompt_tokens;
    if (!request.messages.empty()) {
      const std::string identity = token_identity(model_hash, chat_template);
      const std::tm date = request.template_time != 0 ? local_time(request.template_time) : local_now();
      const ChatRenderOptions options{request.tools_json, true, request.template_kwargs_json};
      ChatPrompt chat = encode_chat_prompt(tokenizer, chat_template, request.messages, request.message_tokens, identity,
                                           request.continue_answer, date, options);
      prompt = std::move(chat.tokens);
      chat_turns[id] = ChatTokens{identity, std::move(chat.spans), {}, chat.reused_messages};
      request.message_tokens.clear();
    } else if (!request.prompt_text.empty()) {
      prompt = tokenizer.encode(request.prompt_text, tokenizer.add_bos_default() && tokenizer.bos_id() >= 0);
      request.prompt_text.clear();
    }
    for (int32_t t : prompt) {
      if (t < 0 || t >= model->config().vocab_size) throw Error("token id " + std::to_string(t) + " is out of range");
    }
    core->add(id, request, std::move(prompt), submitted);
  } catch (const Error& e) {
    for (int32_t i = 0; i < std::clamp(request.samples, 1, kMaxSamples); ++i) error_event(id + RequestId(i), e.what());
  }
}

void Engine::State::start_kv_quality(std::vector<KvType> types) {
  quality.reset();
  if (!model || types.empty()) return;
  try {
    quality = std::make_unique<KvQualityMeasurement>(*model, *forward, types);
  } catch (const Error& e) {
    kv_quality_event(KvQuality{model_hash, kv_quality_text_id(model->config().head_dim), types.front()}, e.what());
  }
}

// One step of the measurement; each type it finishes goes out as an event. A failure ends the
// measurement with one event naming the type it stopped at.
void Engine::State::step_kv_quality() {
  std::vector<KvQuality> measured;
  bool more = false;
  try {
    more = quality->step(measured);
  } catch (const std::exception& e) {
    const std::vector<KvType> remaining = quality->remaining();
    quality.reset();
    if (!remaining.empty()) kv_quality_event(KvQuality{model_hash, kv_quality_text_id(model->config().head_dim), remaining.front()}, e.what());
    return;
  }
  for (KvQuality& q : measured) {
    q.model_identity = model_hash;
    kv_quality_event(std::move(q), "");
  }
  if (!more) quality.reset();
}

void Engine::State::kv_quality_event(KvQuality q, const std::string& failure) {
  Event e;
  e.kind = EventKind::KvQuality;
  e.kv_quality = std::move(q);
  e.text = failure;
  pending.push_back(std::move(e));
}

std::vector<std::string> chat_template_names() {
  std::vector<std::string> out;
  for (const FamilyTemplate& f : family_templates()) out.emplace_back(f.name);
  return out;
}

bool is_chat_template_name(const std::string& name) { return find_family_template(name) != nullptr; }

Engine::Engine(std::function<void()> wake) : state_(std::make_unique<State>()) {
  state_->wake = std::move(wake);
  state_->thread = std::thread([s = state_.get()] { s->run(); });
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  state_->work_cv.notify_one();
  state_->thread.join();
}

void Engine::load_model(const EngineSettings& settings) {
  const uint64_t load_number = ++state_->posted_loads;
  state_->post([s = state_.get(), settings, load_number] { s->load_and_report(settings, load_number); });
}

void Engine::cancel_load() { state_->cancelled_loads.store(state_->posted_loads.load()); }

void Engine::reconfigure_kv(const KvLayout& kv, size_t kv_budget_bytes, bool prefix_caching, size_t host_tier_bytes) {
  state_->post([s = state_.get(), kv, kv_budget_bytes, prefix_caching, host_tier_bytes] {
    if (!s->model) throw Error("no model is loaded");
    s->core->detach_all_sequences();
    s->core->set_host_tier_budget(host_tier_bytes);
    s->settings.scheduler.host_tier_bytes = host_tier_bytes;
    try {
      s->create_kv(kv, kv_budget_bytes, prefix_caching);
    } catch (const Error&) {
      if (!s->kv) {   // a device pool was released first: no model without its pool
        s->core->fail_all("the KV pool could not be re-created", s->pending);
        s->drop_model();
      }
      throw;
    }
    s->core->set_kv_cache(*s->kv);
    Event e;
    e.kind = EventKind::ModelLoaded;
    s->pending.push_back(std::move(e));
  });
}

void Engine::measure_kv_quality(std::vector<KvType> types) {
  state_->post([s = state_.get(), types = std::move(types)]() mutable { s->start_kv_quality(std::move(types)); });
}

void Engine::set_chat_template(const std::string& name) {
  state_->post([s = state_.get(), name] {
    if (!name.empty() && !is_chat_template_name(name)) throw Error("unknown chat template '" + name + "'");
    s->settings.chat_template = name;
    s->settings.chat_template_source.clear();
    if (s->model) s->chat_template = chat_template_for(s->model->file(), name);
  });
}

// A request for several samples takes that many consecutive ids, one per answer.
RequestId Engine::submit(Request request) {
  const RequestId id = state_->next_id.fetch_add(RequestId(std::clamp(request.samples, 1, kMaxSamples)));
  const auto submitted = Clock::now();
  state_->post([s = state_.get(), id, request = std::move(request), submitted]() mutable {
    s->submit(id, std::move(request), submitted);
  });
  return id;
}

void Engine::cancel(RequestId request) {
  state_->post([s = state_.get(), request] {
    if (s->core) s->core->cancel(request, s->pending);
  });
}

RequestId Engine::fork(RequestId source, const SamplingParams& sampling, int32_t max_tokens) {
  const RequestId id = state_->next_id++;
  state_->post([s = state_.get(), source, id, sampling, max_tokens] {
    validate_sampling_params(sampling);
    if (!s->core || !s->core->fork(source, id, sampling, max_tokens)) {
      s->error_event(id, "request " + std::to_string(source) + " is not running: nothing to fork");
    }
  });
  return id;
}

// Both run on the engine thread, between steps, where the model cannot change under them.
std::future<std::vector<int32_t>> Engine::tokenize(std::string text, bool add_special, bool parse_special) {
  auto promise = std::make_shared<std::promise<std::vector<int32_t>>>();
  std::future<std::vector<int32_t>> result = promise->get_future();
  state_->post([s = state_.get(), text = std::move(text), add_special, parse_special, promise] {
    if (!s->model) {
      promise->set_exception(std::make_exception_ptr(Error("no model is loaded")));
      return;
    }
    try {
      const Tokenizer& tokenizer = s->model->tokenizer();
      const bool bos = add_special && tokenizer.add_bos_default() && tokenizer.bos_id() >= 0;
      promise->set_value(tokenizer.encode_segments({TextSegment{text, parse_special}}, bos));
    } catch (const Error&) {
      promise->set_exception(std::current_exception());
    }
  });
  return result;
}

std::future<std::string> Engine::detokenize(std::vector<int32_t> ids) {
  auto promise = std::make_shared<std::promise<std::string>>();
  std::future<std::string> result = promise->get_future();
  state_->post([s = state_.get(), ids = std::move(ids), promise] {
    try {
      if (!s->model) throw Error("no model is loaded");
      const Tokenizer& tokenizer = s->model->tokenizer();
      std::string text;
      for (int32_t id : ids) {
        if (id < 0 || id >= tokenizer.vocab_size()) throw Error("token id " + std::to_string(id) + " is out of range");
        text += printed_token(tokenizer, id, true);
      }
      promise->set_value(std::move(text));
    } catch (const Error&) {
      promise->set_exception(std::current_exception());
    }
  });
  return result;
}

std::future<std::optional<ConversationKv>> Engine::export_conversation(uint64_t conversation_key) {
  auto promise = std::make_shared<std::promise<std::optional<ConversationKv>>>();
  std::future<std::optional<ConversationKv>> result = promise->get_future();
  state_->post([s = state_.get(), conversation_key, promise] {
    std::optional<ConversationKv> kv;
    if (s->core) kv = s->core->export_conversation(conversation_key);
    if (kv) kv->identity = kv_identity(s->model_hash, s->kv->layout(), s->model->config(), s->chat_template);
    promise->set_value(std::move(kv));
  });
  return result;
}

std::future<std::string> Engine::import_conversation(uint64_t conversation_key, ConversationKv kv) {
  auto promise = std::make_shared<std::promise<std::string>>();
  std::future<std::string> result = promise->get_future();
  state_->post([s = state_.get(), conversation_key, promise, kv = std::move(kv)] {
    if (!s->core) {
      promise->set_value("no model is loaded");
      return;
    }
    std::string why = identity_mismatch(kv.identity, kv_identity(s->model_hash, s->kv->layout(), s->model->config(), s->chat_template));
    if (why.empty() && !s->core->import_conversation(conversation_key, kv)) {
      why = "the saved KV does not match its tokens or the KV pool has no room for it now";
    }
    promise->set_value(why);
  });
  return result;
}

void Engine::release_conversation(uint64_t conversation_key) {
  state_->post([s = state_.get(), conversation_key] {
    if (s->core) s->core->release_conversation(conversation_key);
  });
}

std::vector<Event> Engine::poll_events() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<Event> events;
  events.swap(state_->outbox);
  return events;
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->stats;
}

bool Engine::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(state_->mutex);
  return state_->idle_cv.wait_for(lock, timeout, [&] { return state_->idle && state_->inbox.empty(); });
}

}  // namespace kvdesk
