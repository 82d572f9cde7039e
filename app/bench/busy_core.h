// BusyCore: a child process that spins on one CPU for as long as the object lives, the stand-in
// for a desktop's other programs (kvdesk-bench --busy-core N). With a core taken, decode with 2
// threads must stay as fast as with 1 (engine/system/thread_count_tuner.h); the spinner makes
// that check one command, recorded in the report, instead of a shell loop started and stopped
// by hand. A process, not a thread: the OS schedules it as it would another program. The child
// asks the kernel to kill it when the bench dies (PR_SET_PDEATHSIG), so no spinner outlives a
// crashed or interrupted run.
#pragma once
#include <sys/types.h>

namespace kvdesk::bench {

class BusyCore {
 public:
  // Starts the spinner on CPU `cpu`; throws Error when this process may not run there.
  explicit BusyCore(int cpu);
  // Kills and reaps the spinner.
  ~BusyCore();
  BusyCore(const BusyCore&) = delete;
  BusyCore& operator=(const BusyCore&) = delete;

  int cpu() const { return cpu_; }
  pid_t pid() const { return pid_; }

 private:
  int cpu_;
  pid_t pid_;
};

}  // namespace kvdesk::bench
