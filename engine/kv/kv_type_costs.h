// What each KV storage type costs for one model's shape: bytes per token (the KV arithmetic,
// layers x kv heads x (K row + V row), scales included). Computed once at load for the KV types
// panel, so no front end re-derives the formula. What a type costs in quality is measured on
// the model itself (engine/quality/kv_quality.h).
#pragma once
#include <vector>

#include "engine/engine_types.h"
#include "engine/model/model_config.h"

namespace kvdesk {

// One entry per KV type, in all_kv_types() order.
std::vector<KvTypeCost> kv_type_costs(const ModelConfig& config);

}  // namespace kvdesk
