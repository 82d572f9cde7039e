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
  if (arm_seconds_[0] >= kArmSeconds && arm_seconds_[1] >= kArmSeconds) finish_probe();
}

// The verdict: each signature both counts ran weighs in with the loops it has at both, at each
// count's mean time; the candidate replaces the chosen count only when enough loops could be
// compared and it was faster by the margin.
void ThreadCountTuner::finish_probe() {
  double chosen_total = 0, candidate_total = 0;
  int matched = 0;
  for (const auto& [signature, t] : probe_) {
    const int weight = std::min(t.loops[0], t.loops[1]);
    if (weight == 0) continue;
    matched += weight;
    chosen_total += weight * t.seconds[0] / t.loops[0];
    candidate_total += weight * t.seconds[1] / t.loops[1];
  }
  if (matched >= kMinMatchedLoops && candidate_total < chosen_total * (1 - kMargin)) {
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
