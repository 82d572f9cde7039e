// ThreadCountTuner: settled spell, probe with the two counts taking turns, verdict, and again.
#include "engine/system/thread_count_tuner.h"

#include <algorithm>

namespace kvdesk {

ThreadCountTuner::ThreadCountTuner(int max_threads)
    : max_threads_(max_threads < 1 ? 1 : max_threads), chosen_(max_threads_), candidate_(max_threads_) {
  if (max_threads_ > 1) start_probe();
}

void ThreadCountTuner::record(LoopSignature signature, double seconds) {
  if (max_threads_ == 1) return;
  if (probing_) {
    record_probe(signature, seconds);
    return;
  }
  settled_seconds_ += seconds;
  if (settled_seconds_ >= settled_due_) start_probe();
}

void ThreadCountTuner::record_probe(LoopSignature signature, double seconds) {
  const int arm = on_candidate_ ? 1 : 0;
  ArmTimes& t = probe_[signature];
  t.seconds[arm] += seconds;
  ++t.loops[arm];
  arm_seconds_[arm] += seconds;
  if (++loops_in_turn_ == kSwitchLoops) {
    on_candidate_ = !on_candidate_;
    loops_in_turn_ = 0;
  }
  const Comparison c = compare();
  if ((arm_seconds_[0] >= kArmSeconds && arm_seconds_[1] >= kArmSeconds) || clearly_slower(c)) finish_probe(c);
}

// Each signature both counts ran weighs in with the loops it has at both, at each count's mean
// time.
ThreadCountTuner::Comparison ThreadCountTuner::compare() const {
  Comparison c;
  for (const auto& [signature, t] : probe_) {
    const int weight = std::min(t.loops[0], t.loops[1]);
    if (weight == 0) continue;
    c.matched += weight;
    c.chosen_seconds += weight * t.seconds[0] / t.loops[0];
    c.candidate_seconds += weight * t.seconds[1] / t.loops[1];
  }
  return c;
}

bool ThreadCountTuner::clearly_slower(const Comparison& c) const {
  const bool enough = c.matched >= kMinMatchedLoops || (c.matched > 0 && c.chosen_seconds >= kMinComparedSeconds);
  return enough && c.candidate_seconds > c.chosen_seconds * (1 + kClearLoss);
}

// The verdict, once enough loops could be compared: one more thread replaces the chosen count
// only when it was faster by the margin, one fewer whenever it was at least as fast.
void ThreadCountTuner::finish_probe(const Comparison& c) {
  const double bar = candidate_ < chosen_ ? 1.0 : 1 - kMargin;
  if (c.matched >= kMinMatchedLoops && c.candidate_seconds <= c.chosen_seconds * bar) {
    chosen_ = candidate_;
    settled_due_ = kFirstSettledSeconds;
  } else {
    settled_due_ = std::min(2 * settled_due_, kMaxSettledSeconds);
  }
  probing_ = false;
  settled_seconds_ = 0;
}

void ThreadCountTuner::start_probe() {
  candidate_ = next_candidate();
  probe_.clear();
  probing_ = true;
  on_candidate_ = false;
  loops_in_turn_ = 0;
  arm_seconds_[0] = arm_seconds_[1] = 0;
}

int ThreadCountTuner::next_candidate() {
  if (chosen_ == 1) return 2;
  if (chosen_ == max_threads_) return max_threads_ - 1;
  const bool fewer = probe_fewer_next_;
  probe_fewer_next_ = !probe_fewer_next_;
  return fewer ? chosen_ - 1 : chosen_ + 1;
}

}  // namespace kvdesk
