// LoadProgress: how far a model load has got, and whether it should stop. A load is a few
// stages (reading the file, repacking matrices), each a fixed share of the whole decided when
// it begins, so the fraction reported only grows and ends at exactly 1. Between chunks of
// work the loader asks whether the load was cancelled; a cancelled load throws LoadCancelled,
// which unwinds everything it had built.
#pragma once
#include <cstdint>
#include <functional>

#include "engine/error.h"

namespace kvdesk {

// Thrown by a load that was cancelled (an Error, so every path that cleans up after a failed
// load cleans up after a cancelled one).
class LoadCancelled : public Error {
 public:
  LoadCancelled() : Error("the model load was cancelled") {}
};

class LoadProgress {
 public:
  using Report = std::function<void(double fraction)>;
  using CancelCheck = std::function<bool()>;

  // Reports nothing and is never cancelled.
  LoadProgress() = default;
  // report: called with a fraction in [0, 1] whenever it has grown by a percent, and once at
  // the start and the end; cancelled: polled between chunks of work.
  LoadProgress(Report report, CancelCheck cancelled);

  // Starts the next stage: `share` of the whole load (the stages' shares add up to at most 1),
  // made of `total` units of work (bytes). Checks for cancellation.
  void begin_stage(double share, uint64_t total);
  // `units` more of the stage done. Checks for cancellation.
  void advance(uint64_t units);
  // Throws LoadCancelled when the load was cancelled.
  void check_cancelled() const;
  // The whole load is done: reports 1.
  void finish();

 private:
  void report(double fraction, bool always);

  Report report_;
  CancelCheck cancelled_;
  // Invariant: stage_start_ + stage_share_ <= 1 and stage_done_ <= stage_total_.
  double stage_start_ = 0;
  double stage_share_ = 0;
  uint64_t stage_total_ = 0;
  uint64_t stage_done_ = 0;
  double last_reported_ = -1;
};

}  // namespace kvdesk
