// ThreadCountTuner: how many of a pool's threads the next parallel loop should use, chosen by
// measurement. On a machine where another process holds a core, a helper thread loses its
// core for milliseconds at a time and every loop it holds a chunk of waits for it: then fewer
// threads are faster. The tuner keeps a chosen count, and every kSettledSeconds of loop time
// probes a neighbouring count (one fewer or one more, in turn) against it: a baseline window at
// the chosen count, then a candidate window at the neighbour, compared over loops of equal
// signature only (a decode step repeats the same matmul loops layer after layer), so a change
// of workload between the windows cannot pass for a change of speed. The candidate is kept when
// it is faster by more than kMargin; so the count drops when a core is taken and climbs back
// when it is freed. It only sees the times it is given, so tests inject them.
#pragma once
#include <cstdint>
#include <map>
#include <utility>

namespace kvdesk {

// What makes two loops comparable: the same number of tasks over the same amount of work.
struct LoopSignature {
  int64_t num_tasks = 0;
  int64_t work = 0;
  auto operator<=>(const LoopSignature&) const = default;
};

class ThreadCountTuner {
 public:
  // Loop time a window needs (and loops it needs) before its verdict counts.
  static constexpr double kWindowSeconds = 0.02;
  static constexpr int kWindowLoops = 32;
  // Loops of the candidate window that must match a baseline loop for a verdict.
  static constexpr int kMinMatchedLoops = 16;
  // Loop time at the chosen count between probes.
  static constexpr double kSettledSeconds = 1.0;
  // How much faster the candidate must be to replace the chosen count.
  static constexpr double kMargin = 0.03;

  // Starts at max_threads (at least 1) with a probe.
  explicit ThreadCountTuner(int max_threads);

  int max_threads() const { return max_threads_; }
  // The count the next loop runs at.
  int threads() const { return phase_ == Phase::Candidate ? candidate_ : chosen_; }
  // The count the tuner settles on between probes.
  int chosen_threads() const { return chosen_; }

  // A loop with this signature ran at threads() and took `seconds`.
  void record(LoopSignature signature, double seconds);

 private:
  enum class Phase { Baseline, Candidate, Settled };

  struct Timing {
    double seconds = 0;
    int loops = 0;
  };

  void record_baseline(LoopSignature signature, double seconds);
  void record_candidate(LoopSignature signature, double seconds);
  void finish_probe();
  void start_probe();
  int next_candidate();

  int max_threads_;
  int chosen_;
  int candidate_;
  bool probe_fewer_next_ = true;  // probes alternate between one fewer and one more thread
  Phase phase_ = Phase::Baseline;

  // The current phase's loop count and loop time.
  int phase_loops_ = 0;
  double phase_seconds_ = 0;
  // Baseline window: loop time per signature at the chosen count.
  std::map<LoopSignature, Timing> baseline_;
  // Candidate window: the loops whose signature the baseline saw, their time at the candidate
  // count and the baseline's mean time for the same loops.
  int matched_loops_ = 0;
  double matched_candidate_seconds_ = 0;
  double matched_baseline_seconds_ = 0;
};

}  // namespace kvdesk
