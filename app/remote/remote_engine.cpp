// RemoteEngine: one thread per request streaming its answer, one thread connecting and then
// reading the server's statistics, and an outbox the caller drains. See remote_engine.h.
#include "app/remote/remote_engine.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "app/remote/kv_stats_reader.h"
#include "app/remote/model_list.h"
#include "app/remote/openai_stream.h"
#include "app/remote/prometheus_text.h"
#include "app/remote/server_stats.h"
#include "app/remote/sse_reader.h"
#include "engine/error.h"
#include "engine/runtime/percentile.h"

namespace kvdesk::remote {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr time_t kConnectTimeoutS = 5;
constexpr time_t kReadTimeoutS = 300;   // a long prefill on a busy server

// Statistics of a server whose /metrics could not be read (yet).
ServerStats unread_server(const std::string& url) {
  ServerStats s;
  s.url = url;
  s.kind = "unknown";
  return s;
}

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Timing of one streamed answer, turned into the engine's RequestMetrics.
struct StreamTiming {
  Clock::time_point submitted = Clock::now();
  Clock::time_point first, last;
  int32_t deltas = 0;
  std::vector<double> itl_ms;

  void on_delta() {
    const auto now = Clock::now();
    if (deltas++ == 0) {
      first = now;
    } else {
      itl_ms.push_back(ms_between(last, now));
    }
    last = now;
  }

  RequestMetrics metrics(const StreamState& s) const {
    RequestMetrics m;
    m.prompt_tokens = std::max(s.prompt_tokens, 0);
    m.cached_tokens = s.cached_tokens;
    m.generated_tokens = s.completion_tokens >= 0 ? s.completion_tokens : deltas;
    if (deltas == 0) return m;
    m.ttft_ms = ms_between(submitted, first);
    const double decode_ms = ms_between(first, last);
    m.decode_tok_s = m.generated_tokens > 1 && decode_ms > 0 ? (m.generated_tokens - 1) * 1000.0 / decode_ms : 0;
    m.itl_p50_ms = percentile(itl_ms, 0.50);
    m.itl_p95_ms = percentile(itl_ms, 0.95);
    return m;
  }
};

}  // namespace

struct RemoteEngine::State {
  RemoteOptions options;
  std::function<void()> wake;
  std::string model;   // the id requests name, once connected

  mutable std::mutex mutex;
  std::condition_variable cv;
  std::vector<Event> outbox;
  EngineStats stats;
  std::map<RequestId, std::shared_ptr<std::atomic<bool>>> in_flight;   // id -> cancelled
  // Each request's thread; ids in `ended` have returned and are joined at the next submit.
  std::map<RequestId, std::thread> request_threads;
  std::vector<RequestId> ended;
  std::thread stats_thread;
  bool stopping = false;
  RequestId next_id = 1;

  httplib::Client client() const {
    httplib::Client c(options.url);
    c.set_connection_timeout(kConnectTimeoutS, 0);
    c.set_read_timeout(kReadTimeoutS, 0);
    if (!options.api_key.empty()) c.set_bearer_token_auth(options.api_key);
    return c;
  }

  void post(Event e) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      outbox.push_back(std::move(e));
    }
    if (wake) wake();
  }

  void post_error(RequestId id, const std::string& message) {
    Event e;
    e.kind = EventKind::Error;
    e.request = id;
    e.text = message;
    post(std::move(e));
  }

  void connect();
  void read_statistics();
  void stats_loop();
  void run_request(RequestId id, Request request, std::shared_ptr<std::atomic<bool>> cancelled);
  void stream(RequestId id, const OpenAiCall& call, const std::atomic<bool>& cancelled);
  void finish_request(RequestId id);
};

// Lists the server's models and takes the asked one (or the first).
void RemoteEngine::State::connect() {
  const std::vector<ServerModel> models = list_server_models(options.url, options.api_key);
  const ServerModel* chosen = &models.front();
  if (!options.model.empty()) {
    const auto it = std::find_if(models.begin(), models.end(), [&](const ServerModel& m) { return m.id == options.model; });
    if (it == models.end()) throw Error(options.url + " does not serve '" + options.model + "'");
    chosen = &*it;
  }
  std::lock_guard<std::mutex> lock(mutex);
  model = chosen->id;
  stats.model_loaded = true;
  stats.model.name = chosen->id;
  stats.model.path = options.url;
  stats.model.backend = "remote";
  stats.model.context_length = chosen->context_length;
  stats.server = unread_server(options.url);
}

// /metrics for every server; /v1/kv as well when the server is kvdesk.
void RemoteEngine::State::read_statistics() {
  httplib::Client c = client();
  c.set_read_timeout(5, 0);
  const httplib::Result metrics = c.Get("/metrics");
  ServerStats server = unread_server(options.url);
  if (metrics && metrics->status == 200) server = read_server_stats(parse_prometheus_text(metrics->body), options.url);
  EngineStats next;
  {
    std::lock_guard<std::mutex> lock(mutex);
    next = stats;
  }
  next.server = server;
  if (server.kind == "kvdesk") {
    const httplib::Result kv = c.Get("/v1/kv");
    if (kv && kv->status == 200) {
      try {
        read_kv_stats_json(json::parse(kv->body), next);
      } catch (const json::exception&) {
        next.kv = KvSnapshot{};   // an unreadable block map is shown as none
      }
    }
  } else {
    next.running = int32_t(server.running.value_or(0));
    next.waiting = int32_t(server.waiting.value_or(0));
  }
  std::lock_guard<std::mutex> lock(mutex);
  next.steps = stats.steps + 1;
  next.model = stats.model;
  stats = std::move(next);
}

void RemoteEngine::State::stats_loop() {
  try {
    connect();
    Event loaded;
    loaded.kind = EventKind::ModelLoaded;
    loaded.text = "connected to " + options.url;
    post(std::move(loaded));
  } catch (const Error& e) {
    post_error(0, e.what());
    return;
  }
  std::unique_lock<std::mutex> lock(mutex);
  while (!stopping) {
    lock.unlock();
    read_statistics();
    lock.lock();
    cv.wait_for(lock, options.stats_interval, [&] { return stopping; });
  }
}

void RemoteEngine::State::stream(RequestId id, const OpenAiCall& call, const std::atomic<bool>& cancelled) {
  httplib::Client c = client();
  SseReader sse;
  StreamState state;
  StreamTiming timing;
  int status = 0;
  std::string error_body;   // the body of a refusal (status other than 200)
  httplib::Request req;
  req.method = "POST";
  req.path = call.path;
  req.body = call.body.dump();
  req.set_header("Content-Type", "application/json");
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    if (status != 200) {
      error_body.append(data, size);
      return true;
    }
    for (const std::string& payload : sse.feed(std::string_view(data, size))) {
      read_stream_chunk(payload, state);
      if (state.delta.empty()) continue;
      timing.on_delta();
      Event e;
      e.kind = EventKind::Token;
      e.request = id;
      e.text = state.delta;
      post(std::move(e));
    }
    return !cancelled.load();
  };
  httplib::Response response;
  httplib::Error err = httplib::Error::Success;
  const bool sent = c.send(req, response, err);
  if (sent && status != 200) throw Error(call.path + " answered " + std::to_string(status) + ": " + openai_error_message(error_body));
  if (!sent && !cancelled.load()) throw Error("the stream from " + options.url + " broke: " + httplib::to_string(err));
  Event done;
  done.kind = EventKind::Finished;
  done.request = id;
  done.finish = cancelled.load() ? FinishReason::Cancelled : finish_reason_from_openai(state.finish_reason.value_or("stop"));
  done.metrics = timing.metrics(state);
  post(std::move(done));
}

void RemoteEngine::State::run_request(RequestId id, Request request, std::shared_ptr<std::atomic<bool>> cancelled) {
  try {
    std::string chosen;
    {
      std::lock_guard<std::mutex> lock(mutex);
      chosen = model;
    }
    if (chosen.empty()) throw Error("not connected to " + options.url + " yet");
    stream(id, openai_call(request, chosen), *cancelled);
  } catch (const Error& e) {
    post_error(id, e.what());
  }
  finish_request(id);
}

void RemoteEngine::State::finish_request(RequestId id) {
  std::lock_guard<std::mutex> lock(mutex);
  in_flight.erase(id);
  ended.push_back(id);
  cv.notify_all();
}

RemoteEngine::RemoteEngine(RemoteOptions options, std::function<void()> wake) : state_(std::make_unique<State>()) {
  state_->options = std::move(options);
  state_->wake = std::move(wake);
  state_->stats_thread = std::thread([s = state_.get()] { s->stats_loop(); });
}

RemoteEngine::~RemoteEngine() {
  std::map<RequestId, std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
    for (auto& [id, cancelled] : state_->in_flight) cancelled->store(true);
    threads.swap(state_->request_threads);
  }
  state_->cv.notify_all();
  for (auto& [id, t] : threads) t.join();
  state_->stats_thread.join();
}

RequestId RemoteEngine::submit(Request request) {
  State& s = *state_;
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  std::vector<std::thread> returned;
  RequestId id = 0;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    for (RequestId done : s.ended) {
      returned.push_back(std::move(s.request_threads.at(done)));
      s.request_threads.erase(done);
    }
    s.ended.clear();
    id = s.next_id++;
    s.in_flight[id] = cancelled;
    s.request_threads[id] = std::thread([&s, id, request = std::move(request), cancelled]() mutable {
      s.run_request(id, std::move(request), std::move(cancelled));
    });
  }
  for (std::thread& t : returned) t.join();
  return id;
}

void RemoteEngine::cancel(RequestId request) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const auto it = state_->in_flight.find(request);
  if (it != state_->in_flight.end()) it->second->store(true);
}

std::vector<Event> RemoteEngine::poll_events() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<Event> events;
  events.swap(state_->outbox);
  return events;
}

EngineStats RemoteEngine::stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->stats;
}

bool RemoteEngine::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(state_->mutex);
  return state_->cv.wait_for(lock, timeout, [&] { return state_->in_flight.empty(); });
}

namespace {

template <class T>
std::future<T> refused(const char* what) {
  std::promise<T> promise;
  promise.set_exception(std::make_exception_ptr(
      Error(std::string(what) + " needs the model's vocabulary, which a remote engine keeps on its server")));
  return promise.get_future();
}

}  // namespace

std::future<std::vector<int32_t>> RemoteEngine::tokenize(std::string, bool, bool) {
  return refused<std::vector<int32_t>>("tokenizing");
}

std::future<std::string> RemoteEngine::detokenize(std::vector<int32_t>) { return refused<std::string>("detokenizing"); }

}  // namespace kvdesk::remote
