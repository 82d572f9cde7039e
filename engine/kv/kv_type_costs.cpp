// KV type costs: the storage arithmetic of kv_storage.h and a seeded round trip through the
// reference quantizer (kernels/kv_quant.h).
#include "engine/kv/kv_type_costs.h"

#include <random>

#include "engine/kv/kv_storage.h"
#include "kernels/kv_quant.h"

namespace kvdesk {
namespace {

// Round-trip NMSE (sum err^2 / sum x^2) of one type on seeded Gaussian rows.
double round_trip_nmse(KvType type, int32_t head_dim) {
  constexpr int kRows = 64;
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(head_dim)), y(static_cast<size_t>(head_dim));
  std::vector<uint8_t> row(kv_row_bytes(type, head_dim));
  double err = 0, ref = 0;
  for (int r = 0; r < kRows; ++r) {
    for (float& v : x) v = normal(rng);
    ref::quantize_kv_row(type, x.data(), row.data(), head_dim);
    ref::dequantize_kv_row(type, row.data(), y.data(), head_dim);
    for (size_t i = 0; i < x.size(); ++i) {
      err += double(x[i] - y[i]) * double(x[i] - y[i]);
      ref += double(x[i]) * double(x[i]);
    }
  }
  return ref > 0 ? err / ref : 0.0;
}

}  // namespace

std::vector<KvTypeCost> kv_type_costs(const ModelConfig& config) {
  std::vector<KvTypeCost> costs;
  for (KvType t : all_kv_types()) {
    costs.push_back(KvTypeCost{t, kv_bytes_per_token(config, t, t), round_trip_nmse(t, config.head_dim)});
  }
  return costs;
}

}  // namespace kvdesk
