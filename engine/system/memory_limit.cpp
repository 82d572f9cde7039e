// Reading MemAvailable and refusing allocations that cannot fit.
#include "engine/system/memory_limit.h"

#include <cstdio>

#include "engine/error.h"

namespace kvdesk {

uint64_t available_memory_bytes() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long kib = 0;
  while (std::fgets(line, sizeof line, f)) {
    if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
  }
  std::fclose(f);
  return uint64_t(kib) * 1024;
}

uint64_t memory_budget(uint64_t limit) { return limit != 0 ? limit : available_memory_bytes(); }

std::string mib_text(uint64_t bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "%.1f MiB", double(bytes) / (1024.0 * 1024.0));
  return text;
}

void require_memory(uint64_t needed, uint64_t available, const std::string& what) {
  if (available == 0 || needed <= available) return;
  throw Error(what + " needs " + mib_text(needed) + " but only " + mib_text(available) +
              " of memory is available");
}

}  // namespace kvdesk
