// BusyCore, the spinner of kvdesk-bench --busy-core: it runs on the CPU asked for and only
// there, keeps it busy, and is gone (killed and reaped) when the object is; a CPU this process
// may not use is refused with the CPUs it may. The bench records the CPU in its JSON.
#include <catch2/catch.hpp>

#include <sched.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "app/bench/busy_core.h"
#include "engine/error.h"
#include "tests/app/bench/bench_test_support.h"

namespace kvdesk::test {
namespace {

// The state letter of /proc/<pid>/stat: R running or runnable, S sleeping, Z zombie, ...
char process_state(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() ? '?' : line[paren + 2];
}

// The first CPU this process may run on.
int first_allowed_cpu() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) return c;
  }
  FAIL("no CPU allowed");
  return -1;
}

}  // namespace

TEST_CASE("a busy core spins on its CPU alone until it is destroyed", "[bench][busy_core]") {
  const int cpu = first_allowed_cpu();
  pid_t pid = -1;
  {
    bench::BusyCore busy(cpu);
    pid = busy.pid();
    REQUIRE(pid > 0);
    CHECK(busy.cpu() == cpu);
    // The child pins itself right after the fork: wait until it has.
    cpu_set_t child;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    do {
      CPU_ZERO(&child);
      REQUIRE(sched_getaffinity(pid, sizeof child, &child) == 0);
      if (CPU_COUNT(&child) == 1) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    } while (std::chrono::steady_clock::now() < deadline);
    CHECK(CPU_COUNT(&child) == 1);
    CHECK(CPU_ISSET(cpu, &child));
    CHECK(process_state(pid) == 'R');
  }
  CHECK(kill(pid, 0) == -1);
  CHECK(errno == ESRCH);
}

TEST_CASE("a busy core on a CPU this process may not use is refused", "[bench][busy_core]") {
  CHECK_THROWS_WITH(bench::BusyCore(CPU_SETSIZE), Catch::Contains("may not run on CPU") && Catch::Contains("may run on"));
  CHECK_THROWS_AS(bench::BusyCore(-1), Error);
}

TEST_CASE("bench --busy-core records the busy CPU and refuses one it cannot use", "[bench][busy_core][cli]") {
  TempDir dir;
  const CliRun run = run_bench({"kv", "-m", model_path("stories260K.gguf"), "--depths", "64", "--kv-types", "f16",
                                "--repeat", "1", "--busy-core", std::to_string(first_allowed_cpu()), "--json",
                                dir.file("out.json")});
  INFO("stderr: " << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(run.err.find("A process spins on CPU") != std::string::npos);
  CHECK(read_json(dir.file("out.json"))["machine"]["busy_core"] == first_allowed_cpu());

  const CliRun bad = run_bench({"kv", "-m", model_path("stories260K.gguf"), "--busy-core", "100000"});
  CHECK(bad.exit_code == 1);
  CHECK(bad.err.find("--busy-core 100000: this process may not run on CPU 100000") != std::string::npos);
  CHECK(run_bench({"kv", "-m", model_path("stories260K.gguf"), "--busy-core", "-1"}).exit_code == 2);
}

}  // namespace kvdesk::test
