// ThreadCountTuner: how many of a pool's threads the next parallel loop should use, chosen by
// measurement. On a machine where another process holds a core, a helper thread loses its core for
// milliseconds at a time and every loop it holds a chunk of waits for it: then fewer threads are
// faster. The tuner keeps a chosen count and now and then probes a neighbouring count (one fewer or
// one more, in turn) against it: during a probe the two counts take turns every kSwitchLoops loops,
// so a slow spell of the machine falls on both alike, and they are compared over loops of equal
// signature only (a decode step repeats the same matmul loops layer after layer), so a change of
// workload cannot pass for a change of speed. A candidate with more threads is kept when it is
// faster by more than kMargin, one with fewer when it is at least as fast: beside a busy core the
// OS may run the helper on the caller's core, where it adds wake-ups and a chance to hold a loop up
// and nothing else (2 cores, a busy loop pinned to one: the helper got 5-15% of a core, 2 threads
// decoded at 0.98x one thread's speed), and on a tie the fewer threads leave a core to the
// machine's other programs. A candidate slower by more than kClearLoss loses as soon as
// kMinMatchedLoops loops, or kMinComparedSeconds of the chosen count's time, can be compared,
// without waiting for kArmSeconds: one thread of two on a free machine runs a matmul at about 0.6x,
// and a prefill's loops take milliseconds each, so a full probe of one thread kept a third of a
// short prefill's loop time at one thread (kvdesk-bench speed, 128 tokens, TinyLlama-shaped Q4_0);
// lost early it costs one loop of each large signature. Only losing is decided early: a stall that
// slows one turn of the chosen count must not make a candidate look faster on a handful of loops. A
// probe that keeps the chosen count doubles the time to the next one (up to kMaxSettledSeconds),
// one that changes it starts over at kFirstSettledSeconds: on a steady machine probes cost little,
// and the count drops when a core is taken and climbs back when it is freed. The tuner only sees
// the times it is given, so tests inject them.
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
  // Loop time each of the two counts needs before a probe's verdict.
  static constexpr double kArmSeconds = 0.05;
  // Loops in a row at one count during a probe.
  static constexpr int kSwitchLoops = 8;
  // Loops that both counts ran (by signature) needed for a verdict.
  static constexpr int kMinMatchedLoops = 16;
  // Loop time at the chosen count between probes: the first, and at most.
  static constexpr double kFirstSettledSeconds = 0.5;
  static constexpr double kMaxSettledSeconds = 4.0;
  // How much faster a candidate with more threads must be to replace the chosen count.
  static constexpr double kMargin = 0.03;
  // How much slower the candidate must be to lose before kArmSeconds, and over how much of the
  // chosen count's loop time, when fewer than kMinMatchedLoops loops compare.
  static constexpr double kClearLoss = 0.2;
  static constexpr double kMinComparedSeconds = 0.005;

  // Starts at max_threads (at least 1) with a probe.
  explicit ThreadCountTuner(int max_threads);

  int max_threads() const { return max_threads_; }
  // The count the next loop runs at.
  int threads() const { return probing_ && on_candidate_ ? candidate_ : chosen_; }
  // The count the tuner settles on between probes.
  int chosen_threads() const { return chosen_; }

  // A loop with this signature ran at threads() and took `seconds`.
  void record(LoopSignature signature, double seconds);

 private:
  // A probe's loop time per signature at [0] the chosen and [1] the candidate count.
  struct ArmTimes {
    double seconds[2] = {0, 0};
    int loops[2] = {0, 0};
  };

  // The probe's loops so far, compared signature by signature.
  struct Comparison {
    int matched = 0;               // loops that ran at both counts, per signature the fewer
    double chosen_seconds = 0;     // those loops' time at the chosen count (mean per signature)
    double candidate_seconds = 0;  // and at the candidate count
  };

  void record_probe(LoopSignature signature, double seconds);
  Comparison compare() const;
  bool clearly_slower(const Comparison& c) const;
  void finish_probe(const Comparison& c);
  void start_probe();
  int next_candidate();

  int max_threads_;
  int chosen_;
  int candidate_;
  bool probe_fewer_next_ = true;  // probes alternate between one fewer and one more thread
  bool probing_ = false;

  // Settled: loop time since the last probe, and how much is due before the next one.
  double settled_seconds_ = 0;
  double settled_due_ = kFirstSettledSeconds;
  // Probe: whose turn it is, for how many loops so far, and the times per count.
  bool on_candidate_ = false;
  int loops_in_turn_ = 0;
  double arm_seconds_[2] = {0, 0};
  std::map<LoopSignature, ArmTimes> probe_;
};

}  // namespace kvdesk
