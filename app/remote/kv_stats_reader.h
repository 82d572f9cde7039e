// kvdesk serve's GET /v1/kv read back into EngineStats: the pool layout, occupancy, waste,
// prefix-cache counters, every block and every sequence with its owner, so a remote kvdesk's
// block map draws as a local one does. The names are those app/server/kv_json.cpp writes.
#pragma once
#include <nlohmann/json.hpp>

#include "engine/engine_types.h"

namespace kvdesk::remote {

// Throws nlohmann::json::exception when a field has the wrong type.
void read_kv_stats_json(const nlohmann::json& j, EngineStats& stats);

}  // namespace kvdesk::remote
