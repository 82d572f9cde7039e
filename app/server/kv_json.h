// GET /v1/kv: the engine's whole KV picture as JSON: pool layout and occupancy, fragmentation,
// prefix cache and retention counters, each block's state, and each sequence with its owner.
#pragma once
#include <nlohmann/json.hpp>

#include "engine/engine_types.h"

namespace kvdesk::server {

// The cache alone: layout, occupancy, waste, sharing and retention counters, every block.
nlohmann::json kv_snapshot_json(const KvSnapshot& kv);
// The cache with the engine's queues and each sequence's owner.
nlohmann::json kv_stats_json(const EngineStats& stats);

}  // namespace kvdesk::server
