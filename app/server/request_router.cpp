// RequestRouter: submit() registers the route under the same lock as Engine::submit, so the
// router thread, which takes that lock to route, can never see an event of an unknown request.
#include "app/server/request_router.h"

#include <algorithm>
#include <cstdio>

#include "app/server/api_error.h"

namespace kvdesk::server {
namespace {

using Clock = std::chrono::steady_clock;
// The router also drains this often without a wake-up, so it notices stop() in time.
constexpr auto kIdleDrain = std::chrono::milliseconds(100);

}  // namespace

void Doorbell::ring() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    rung_ = true;
  }
  cv_.notify_one();
}

void Doorbell::wait_for(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait_for(lock, timeout, [&] { return rung_; });
  rung_ = false;
}

std::optional<Event> RequestStream::next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
  Event e = std::move(events_.front());
  events_.pop_front();
  return e;
}

void RequestStream::push(Event event) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back(std::move(event));
  }
  cv_.notify_one();
}

RequestRouter::RequestRouter(EngineClient& engine, Doorbell& doorbell, ServingMetrics& metrics, int32_t max_in_flight,
                             ModelState initial)
    : engine_(engine), doorbell_(doorbell), metrics_(metrics), max_in_flight_(max_in_flight), model_state_(initial),
      thread_([this] { run(); }) {}

RequestRouter::~RequestRouter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  doorbell_.ring();
  thread_.join();
}

std::shared_ptr<RequestStream> RequestRouter::submit(Request request) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (int32_t(routes_.size()) >= max_in_flight_) {
    throw ApiError(503, "the server is busy: " + std::to_string(routes_.size()) +
                            " requests are in flight (the most --max-queue allows); try again later",
                   "server_busy", "", "queue_full");
  }
  const int32_t samples = std::clamp(request.samples, 1, kMaxSamples);
  const RequestId id = engine_.submit(std::move(request));
  auto stream = std::make_shared<RequestStream>(id, samples);
  for (int32_t i = 0; i < samples; ++i) routes_.emplace(id + RequestId(i), Route{stream, std::nullopt});
  return stream;
}

void RequestRouter::cancel(RequestId id) { engine_.cancel(id); }

void RequestRouter::abandon(RequestId id) {
  metrics_.on_aborted();
  engine_.cancel(id);
}

void RequestRouter::cancel_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [id, route] : routes_) engine_.cancel(id);
}

ModelState RequestRouter::model_state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return model_state_;
}

std::string RequestRouter::load_error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return load_error_;
}

std::vector<RequestId> RequestRouter::in_flight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<RequestId> ids;
  for (const auto& [id, route] : routes_) ids.push_back(id);
  return ids;
}

uint64_t RequestRouter::ended() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ended_;
}

void RequestRouter::run() {
  for (;;) {
    doorbell_.wait_for(kIdleDrain);
    for (Event& e : engine_.poll_events()) route(std::move(e));
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
  }
}

void RequestRouter::route(Event event) {
  if (event.request == 0) {
    on_model_event(event);
    return;
  }
  std::shared_ptr<RequestStream> stream;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = routes_.find(event.request);
    if (it == routes_.end()) return;
    stream = it->second.stream;
    if (event.kind == EventKind::Token && event.token >= 0) {
      const auto now = Clock::now();
      if (it->second.last_token) metrics_.on_inter_token(std::chrono::duration<double>(now - *it->second.last_token).count());
      it->second.last_token = now;
    }
    if (event.kind == EventKind::Finished) metrics_.on_finished(event.metrics);
    if (event.kind == EventKind::Finished || event.kind == EventKind::Error) {
      routes_.erase(it);
      ++ended_;
    }
  }
  stream->push(std::move(event));
}

void RequestRouter::on_model_event(const Event& event) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (event.kind == EventKind::ModelLoaded) {
    model_state_ = ModelState::Loaded;
  } else if (event.kind == EventKind::Error && model_state_ == ModelState::Loading) {
    model_state_ = ModelState::Failed;
    load_error_ = event.text;
  } else if (event.kind == EventKind::Error) {
    std::fprintf(stderr, "kvdesk server: engine: %s\n", event.text.c_str());
  }
}

}  // namespace kvdesk::server
