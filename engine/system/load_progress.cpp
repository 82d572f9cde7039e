// LoadProgress: stage shares -> one growing fraction, reported at most once per percent.
#include "engine/system/load_progress.h"

#include <algorithm>
#include <utility>

namespace kvdesk {
namespace {

constexpr double kReportStep = 0.01;

}  // namespace

LoadProgress::LoadProgress(Report report, CancelCheck cancelled)
    : report_(std::move(report)), cancelled_(std::move(cancelled)) {}

void LoadProgress::begin_stage(double share, uint64_t total) {
  stage_start_ = std::min(1.0, stage_start_ + stage_share_);
  stage_share_ = std::clamp(share, 0.0, 1.0 - stage_start_);
  stage_total_ = total;
  stage_done_ = 0;
  report(stage_start_, last_reported_ < 0);
  check_cancelled();
}

void LoadProgress::advance(uint64_t units) {
  stage_done_ = std::min(stage_total_, stage_done_ + units);
  const double part = stage_total_ > 0 ? double(stage_done_) / double(stage_total_) : 1.0;
  report(stage_start_ + stage_share_ * part, false);
  check_cancelled();
}

void LoadProgress::check_cancelled() const {
  if (cancelled_ && cancelled_()) throw LoadCancelled();
}

void LoadProgress::finish() {
  stage_start_ = 1;
  stage_share_ = 0;
  report(1.0, true);
}

void LoadProgress::report(double fraction, bool always) {
  if (!report_ || fraction <= last_reported_) return;
  if (!always && fraction < last_reported_ + kReportStep) return;
  last_reported_ = fraction;
  report_(fraction);
}

}  // namespace kvdesk
