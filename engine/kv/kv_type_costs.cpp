// KV type costs: the storage arithmetic of kv_storage.h for every type.
#include "engine/kv/kv_type_costs.h"

#include "engine/kv/kv_storage.h"

namespace kvdesk {

std::vector<KvTypeCost> kv_type_costs(const ModelConfig& config) {
  std::vector<KvTypeCost> costs;
  for (KvType t : all_kv_types()) costs.push_back(KvTypeCost{t, kv_bytes_per_token(config, t, t)});
  return costs;
}

}  // namespace kvdesk
