// BusyCore: check the CPU against this process's affinity, fork, pin the child there and spin.
#include "app/bench/busy_core.h"

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "engine/error.h"

namespace kvdesk::bench {
namespace {

// The CPUs this process may run on, as "0-1" style ranges.
std::string cpu_list(const cpu_set_t& cpus) {
  std::string list;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &cpus) || (c > 0 && CPU_ISSET(c - 1, &cpus))) continue;
    int last = c;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &cpus)) ++last;
    list += (list.empty() ? "" : ",") + std::to_string(c) + (last > c ? "-" + std::to_string(last) : "");
  }
  return list;
}

void check_allowed(int cpu) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    throw Error(std::string("--busy-core: cannot read this process's CPUs: ") + std::strerror(errno));
  }
  if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed)) {
    throw Error("--busy-core " + std::to_string(cpu) + ": this process may not run on CPU " + std::to_string(cpu) +
                " (it may run on " + cpu_list(allowed) + ")");
  }
}

// The child: only async-signal-safe calls, since the parent may have threads.
[[noreturn]] void spin_on(int cpu, pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(0);  // the bench died before the request took hold
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  sched_setaffinity(0, sizeof one, &one);
  volatile uint64_t spins = 0;
  for (;;) spins = spins + 1;
}

}  // namespace

BusyCore::BusyCore(int cpu) : cpu_(cpu), pid_(-1) {
  check_allowed(cpu);
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0) throw Error(std::string("--busy-core: cannot start the spinning process: ") + std::strerror(errno));
  if (pid_ == 0) spin_on(cpu, parent);
}

BusyCore::~BusyCore() {
  kill(pid_, SIGKILL);
  while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace kvdesk::bench
