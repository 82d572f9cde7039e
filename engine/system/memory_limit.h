// Memory the engine may still take, checked before each big allocation (the model's weights,
// the KV pool) so that a model or budget too large for this machine is refused with a message
// naming what needed how much, instead of the process being killed by the OOM killer later.
// The figure is MemAvailable from /proc/meminfo unless the caller sets a limit of its own.
#pragma once
#include <cstdint>
#include <string>

namespace kvdesk {

// MemAvailable from /proc/meminfo; 0 when it cannot be read.
uint64_t available_memory_bytes();

// `limit` when non-zero, else available_memory_bytes().
uint64_t memory_budget(uint64_t limit);

// Throws kvdesk::Error "<what> needs X MiB but only Y MiB of memory is available" when
// needed > available. available 0 means unknown: no check.
void require_memory(uint64_t needed, uint64_t available, const std::string& what);

// "12.3 MiB"
std::string mib_text(uint64_t bytes);

}  // namespace kvdesk
