// EngineShare: two front ends on one engine. Each sees only its own requests' events and every
// model event, their greedy answers are the ones each gets alone, and a front end that goes
// away has its requests cancelled while the other carries on.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "app/server/engine_share.h"
#include "tests/test_support.h"

using namespace kvdesk;
using kvdesk::test::model_path;
using kvdesk::test::reference;

namespace {

using Clock = std::chrono::steady_clock;

EngineSettings stories_settings() {
  EngineSettings s;
  s.model_path = model_path("stories260K.gguf");
  s.threads = 2;
  s.kv.num_blocks = 128;
  return s;
}

Request greedy(const std::string& prompt, int32_t max_tokens) {
  Request r;
  r.prompt_text = prompt;
  r.max_tokens = max_tokens;
  return r;
}

// What one front end received.
struct Inbox {
  std::map<RequestId, std::string> text;
  std::set<RequestId> finished;
  std::map<RequestId, FinishReason> reasons;
  std::set<RequestId> seen;   // every request id any event named
  int model_loaded = 0;

  void take(const std::vector<Event>& events) {
    for (const Event& e : events) {
      seen.insert(e.request);
      if (e.kind == EventKind::ModelLoaded) ++model_loaded;
      if (e.kind == EventKind::Token) text[e.request] += e.text;
      if (e.kind == EventKind::Finished) {
        finished.insert(e.request);
        reasons[e.request] = e.finish;
      }
      REQUIRE(e.kind != EventKind::Error);
    }
  }
};

// Polls the clients until done() or 60 s pass.
bool pump(std::vector<std::pair<EngineClient*, Inbox*>> clients, const std::function<bool()>& done) {
  for (const auto deadline = Clock::now() + std::chrono::seconds(60); Clock::now() < deadline;) {
    for (auto& [client, inbox] : clients) inbox->take(client->poll_events());
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

}  // namespace

TEST_CASE("two front ends share one engine, each getting only its own answers", "[app][engine_share]") {
  server::EngineShare share;
  std::atomic<int> window_wakes{0}, server_wakes{0};
  std::unique_ptr<EngineClient> window = share.connect([&] { ++window_wakes; });
  std::unique_ptr<EngineClient> server = share.connect([&] { ++server_wakes; });
  Inbox w, s;
  share.engine().load_model(stories_settings());
  REQUIRE(pump({{window.get(), &w}, {server.get(), &s}}, [&] { return w.model_loaded == 1 && s.model_loaded == 1; }));

  const std::string prompt = reference()["prompt"];
  const RequestId a = window->submit(greedy(prompt, 64));
  const RequestId b = server->submit(greedy(prompt, 64));
  const RequestId c = server->submit(greedy("Lily went to the park", 32));
  REQUIRE(pump({{window.get(), &w}, {server.get(), &s}}, [&] { return w.finished.size() == 1 && s.finished.size() == 2; }));
  CHECK(w.seen == std::set<RequestId>{0, a});
  CHECK(s.seen == std::set<RequestId>{0, b, c});
  CHECK(w.text[a] == reference()["text"]);
  CHECK(s.text[b] == reference()["text"]);
  CHECK_FALSE(s.text[c].empty());
  CHECK(window_wakes > 0);
  CHECK(server_wakes > 0);
  CHECK(window->stats().model_loaded);
  CHECK(server->stats().generated_tokens == window->stats().generated_tokens);   // one engine

  // The server goes away mid-answer: its request is cancelled, the window's goes on.
  const RequestId long_answer = server->submit(greedy(prompt, 2000));
  const RequestId d = window->submit(greedy(prompt, 64));
  server.reset();
  REQUIRE(pump({{window.get(), &w}}, [&] { return w.finished.contains(d); }));
  CHECK(w.text[d] == reference()["text"]);
  CHECK_FALSE(w.seen.contains(long_answer));
  REQUIRE(share.engine().wait_idle(std::chrono::seconds(60)));
}
