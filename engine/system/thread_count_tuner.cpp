// ThreadCountTuner: baseline window, candidate window, verdict, settled spell, and again.
#include "engine/system/thread_count_tuner.h"

namespace kvdesk {

ThreadCountTuner::ThreadCountTuner(int max_threads)
    : max_threads_(max_threads < 1 ? 1 : max_threads), chosen_(max_threads_), candidate_(max_threads_) {
  if (max_threads_ == 1) {
    phase_ = Phase::Settled;
  } else {
    start_probe();
  }
}

void ThreadCountTuner::record(LoopSignature signature, double seconds) {
  if (max_threads_ == 1) return;
  ++phase_loops_;
  phase_seconds_ += seconds;
  switch (phase_) {
    case Phase::Baseline:
      record_baseline(signature, seconds);
      break;
    case Phase::Candidate:
      record_candidate(signature, seconds);
      break;
    case Phase::Settled:
      if (phase_seconds_ >= kSettledSeconds) start_probe();
      break;
  }
}

void ThreadCountTuner::record_baseline(LoopSignature signature, double seconds) {
  Timing& t = baseline_[signature];
  t.seconds += seconds;
  ++t.loops;
  if (phase_loops_ < kWindowLoops || phase_seconds_ < kWindowSeconds) return;
  phase_ = Phase::Candidate;
  phase_loops_ = 0;
  phase_seconds_ = 0;
}

void ThreadCountTuner::record_candidate(LoopSignature signature, double seconds) {
  const auto it = baseline_.find(signature);
  if (it != baseline_.end()) {
    ++matched_loops_;
    matched_candidate_seconds_ += seconds;
    matched_baseline_seconds_ += it->second.seconds / it->second.loops;
  }
  if (phase_loops_ < kWindowLoops || phase_seconds_ < kWindowSeconds) return;
  finish_probe();
}

// The verdict: the candidate replaces the chosen count only when enough of its loops could be
// compared and they were faster by the margin; otherwise the chosen count stays until the next
// probe.
void ThreadCountTuner::finish_probe() {
  if (matched_loops_ >= kMinMatchedLoops && matched_candidate_seconds_ < matched_baseline_seconds_ * (1 - kMargin)) {
    chosen_ = candidate_;
  }
  phase_ = Phase::Settled;
  phase_loops_ = 0;
  phase_seconds_ = 0;
}

void ThreadCountTuner::start_probe() {
  candidate_ = next_candidate();
  baseline_.clear();
  matched_loops_ = 0;
  matched_candidate_seconds_ = 0;
  matched_baseline_seconds_ = 0;
  phase_ = Phase::Baseline;
  phase_loops_ = 0;
  phase_seconds_ = 0;
}

int ThreadCountTuner::next_candidate() {
  if (chosen_ == 1) return 2;
  if (chosen_ == max_threads_) return max_threads_ - 1;
  const bool fewer = probe_fewer_next_;
  probe_fewer_next_ = !probe_fewer_next_;
  return fewer ? chosen_ - 1 : chosen_ + 1;
}

}  // namespace kvdesk
