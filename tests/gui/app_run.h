// Running the real kvdesk window under its own Xvfb server in tests: to its end (run_kvdesk) or
// in the background while the test talks to it (start_kvdesk), and checking its screenshots.
#pragma once
#include <catch2/catch.hpp>
#include <stb_image.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/test_support.h"

namespace kvdesk::test {

// What the wrapper below prints on stderr once kvdesk has ended, with kvdesk's exit status.
constexpr const char* kExitStatusLine = "kvdesk exit status ";

// xvfb-run's arguments for kvdesk. xvfb-run -a takes the first free display from -n on;
// starting the search at a number from the pid keeps parallel tests from racing for one.
// kvdesk runs under a shell that prints its exit status: xvfb-run exits 5 instead of passing it
// on when it cannot remove its temporary folder afterwards (seen once under parallel CTest).
inline std::vector<std::string> xvfb_kvdesk_arguments(const std::vector<std::string>& args) {
  const std::string first_display = std::to_string(100 + ::getpid() % 800);
  std::vector<std::string> all = {"-a", "-n", first_display, "-s", "-screen 0 1280x800x24", "sh", "-c",
                                  std::string("\"$0\" \"$@\"; s=$?; echo \"") + kExitStatusLine + "$s\" >&2; exit $s",
                                  KVDESK_APP_PATH};
  all.insert(all.end(), args.begin(), args.end());
  return all;
}

// The run with kvdesk's own exit status where xvfb-run's cleanup replaced it.
inline CliRun with_kvdesk_status(CliRun run) {
  const size_t at = run.err.rfind(kExitStatusLine);
  if (run.exit_code == 5 && at != std::string::npos) run.exit_code = std::atoi(run.err.c_str() + at + std::strlen(kExitStatusLine));
  return run;
}

inline CliRun run_kvdesk(const std::vector<std::string>& args) {
  return with_kvdesk_status(run_program("xvfb-run", xvfb_kvdesk_arguments(args)));
}

inline ChildProcess start_kvdesk(const std::vector<std::string>& args) {
  return ChildProcess("xvfb-run", xvfb_kvdesk_arguments(args));
}

// A screenshot that is a real picture: the window's size, and not one flat colour.
inline void check_screenshot(const std::string& path) {
  int w = 0, h = 0, channels = 0;
  unsigned char* pixels = stbi_load(path.c_str(), &w, &h, &channels, 3);
  REQUIRE(pixels != nullptr);
  CHECK(w == 1280);
  CHECK(h == 800);
  double sum = 0, sum_sq = 0;
  const size_t n = size_t(w) * size_t(h) * 3;
  for (size_t i = 0; i < n; ++i) {
    sum += pixels[i];
    sum_sq += double(pixels[i]) * pixels[i];
  }
  stbi_image_free(pixels);
  const double mean = sum / double(n);
  const double variance = sum_sq / double(n) - mean * mean;
  INFO(path << ": mean " << mean << ", variance " << variance);
  CHECK(variance > 100.0);
}

}  // namespace kvdesk::test
