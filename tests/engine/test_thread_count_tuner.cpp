// ThreadCountTuner on injected loop times: a simulated machine says how long each loop takes at
// each thread count, so the tests decide what is faster and nothing depends on this machine's
// load. The tuner must move to fewer threads when a helper is made slow, back when it is not,
// and must not take a change of workload for a change of speed.
#include <catch2/catch.hpp>

#include <map>
#include <vector>

#include "engine/system/thread_count_tuner.h"

using namespace kvdesk;

namespace {

// Loop time = the loop's work x kSecondsPerWork x speed[threads] (speed[1] == 1).
constexpr double kSecondsPerWork = 1e-10;

// A decode-like step: per layer, two matmul loops and one attention loop.
const std::vector<LoopSignature> kLayerLoops = {{16, 3'000'000}, {16, 10'000'000}, {8, 1'000'000}};
// A prefill-like step: per layer, matmul loops of 6-10 ms each at one thread.
const std::vector<LoopSignature> kPrefillLayerLoops = {{16, 60'000'000}, {16, 100'000'000}, {16, 80'000'000}};
constexpr int kLayers = 22;

struct RunSummary {
  std::map<int, int> loops_at;  // threads -> loops run at that count
  int min_threads = 1 << 30;
  int max_threads = 0;
};

// Feeds `seconds` of simulated loop time, step after step, at whatever count the tuner picks.
RunSummary run_for(ThreadCountTuner& tuner, const std::map<int, double>& speed, double seconds,
                   const std::vector<LoopSignature>& layer_loops = kLayerLoops) {
  RunSummary s;
  double elapsed = 0;
  while (elapsed < seconds) {
    for (int layer = 0; layer < kLayers; ++layer) {
      for (const LoopSignature& loop : layer_loops) {
        const int threads = tuner.threads();
        const double t = double(loop.work) * kSecondsPerWork * speed.at(threads);
        ++s.loops_at[threads];
        s.min_threads = std::min(s.min_threads, threads);
        s.max_threads = std::max(s.max_threads, threads);
        tuner.record(loop, t);
        elapsed += t;
      }
    }
  }
  return s;
}

double share_at(const RunSummary& s, int threads) {
  int total = 0;
  for (const auto& [n, loops] : s.loops_at) total += loops;
  return s.loops_at.count(threads) ? double(s.loops_at.at(threads)) / total : 0.0;
}

}  // namespace

TEST_CASE("the tuner drops to one thread when the helper is slow and climbs back when it is not",
          "[engine][thread_pool][tuner]") {
  const std::map<int, double> free_machine = {{1, 1.0}, {2, 0.55}};
  const std::map<int, double> slow_helper = {{1, 1.0}, {2, 1.25}};
  ThreadCountTuner tuner(2);
  CHECK(tuner.threads() == 2);

  const RunSummary free1 = run_for(tuner, free_machine, 3.0);
  CHECK(tuner.chosen_threads() == 2);
  CHECK(share_at(free1, 2) > 0.9);

  const RunSummary busy = run_for(tuner, slow_helper, 8.0);
  CHECK(tuner.chosen_threads() == 1);
  CHECK(share_at(busy, 1) > 0.4);

  const RunSummary free2 = run_for(tuner, free_machine, 8.0);
  CHECK(tuner.chosen_threads() == 2);
  CHECK(share_at(free2, 2) > 0.4);
  CHECK(free2.min_threads >= 1);
  CHECK(free2.max_threads <= 2);
}

TEST_CASE("a plainly slower candidate loses its probe within a few loops", "[engine][thread_pool][tuner]") {
  // One thread of two runs a matmul at about 0.6x on a free machine. Decode's short loops: a
  // probe of one thread ends once kMinMatchedLoops loops compare, long before kArmSeconds of
  // one-thread loops. Prefill's long ones: after one loop of a signature the chosen count ran.
  const std::map<int, double> free_machine = {{1, 1.0}, {2, 0.6}};
  ThreadCountTuner decode(2);
  const RunSummary d = run_for(decode, free_machine, 2.0);
  CHECK(decode.chosen_threads() == 2);
  CHECK(d.loops_at.count(1) == 1);
  CHECK(share_at(d, 1) < 0.005);

  ThreadCountTuner prefill(2);
  const RunSummary p = run_for(prefill, free_machine, 4.0, kPrefillLayerLoops);
  CHECK(prefill.chosen_threads() == 2);
  CHECK(p.loops_at.count(1) == 1);
  INFO("share of prefill loops at one thread " << share_at(p, 1));
  CHECK(share_at(p, 1) < 0.01);
}

TEST_CASE("the tuner climbs down one thread at a time to the fastest count", "[engine][thread_pool][tuner]") {
  // Two of four cores taken: two threads are fastest, three and four lose to stalls.
  const std::map<int, double> two_cores_free = {{1, 1.0}, {2, 0.6}, {3, 0.75}, {4, 0.9}};
  ThreadCountTuner tuner(4);
  const RunSummary s = run_for(tuner, two_cores_free, 12.0);
  CHECK(tuner.chosen_threads() == 2);
  CHECK(s.min_threads >= 1);
  CHECK(s.max_threads <= 4);
}

TEST_CASE("on a tie the tuner settles on fewer threads and stays there", "[engine][thread_pool][tuner]") {
  // A helper that shares the caller's core: two threads run at one thread's speed.
  const std::map<int, double> helper_on_callers_core = {{1, 1.0}, {2, 1.0}};
  ThreadCountTuner tuner(2);
  run_for(tuner, helper_on_callers_core, 1.0);
  CHECK(tuner.chosen_threads() == 1);
  const RunSummary s = run_for(tuner, helper_on_callers_core, 8.0);
  CHECK(tuner.chosen_threads() == 1);
  CHECK(share_at(s, 1) > 0.9);

  // Slightly faster is not enough to take a thread back.
  const std::map<int, double> helper_barely_helps = {{1, 1.0}, {2, 0.99}};
  run_for(tuner, helper_barely_helps, 8.0);
  CHECK(tuner.chosen_threads() == 1);
}

TEST_CASE("the tuner keeps its count when the two counts of a probe ran different loops",
          "[engine][thread_pool][tuner]") {
  ThreadCountTuner tuner(2);
  const LoopSignature chosen_loop{16, 10'000'000};
  const LoopSignature candidate_loop{64, 50'000'000};
  // The candidate's loops take a tenth of the time, but no signature ran at both counts: no
  // verdict, through several probes.
  for (int i = 0; i < 20'000; ++i) {
    const bool candidate = tuner.threads() == 1;
    tuner.record(candidate ? candidate_loop : chosen_loop, candidate ? 1e-4 : 1e-3);
    REQUIRE(tuner.chosen_threads() == 2);
  }
}

TEST_CASE("a one-thread tuner always answers one", "[engine][thread_pool][tuner]") {
  ThreadCountTuner tuner(1);
  for (int i = 0; i < 1000; ++i) {
    REQUIRE(tuner.threads() == 1);
    tuner.record(LoopSignature{16, 1'000'000}, 1e-3);
  }
  CHECK(tuner.chosen_threads() == 1);
}
