// KV quality of a model (see KvQuality in engine/engine_types.h): every KV type scored with the
// KV comparison (kv_comparison.h) against f32 KV, through the caller's forward backend, on the
// built-in prose of engine/model/key_smoothing.h cut to one window of kKvQualityTokens tokens
// (BOS included). Short, so a 7B model on a CPU measures all types in minutes (the f32
// reference and one run per type, 128 tokens each), and in chunks of kKvQualityChunk positions,
// so the engine can run it one step at a time between its users' steps.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/engine_types.h"

namespace kvdesk {

class ForwardBackend;
class KvComparison;
class Model;

inline constexpr int32_t kKvQualityTokens = 128;
inline constexpr int32_t kKvQualityChunk = 32;

// The measurement's name in stored results ("lighthouse-128-recent-16-q8"); it changes with the
// text, its length, the newest rows kept in f32 (KvLayout::recent_rows) or the integer
// attention's own rounding on this CPU (kernels/attention_int_keys.h, attention_int_values.h):
// q8, int8 / int4 keys against an 8-bit query and values weighed by 8-bit codes (AVX-512 VNNI);
// p8w7r32, int8 keys against a query whose pairs of codes are limited, int8 values weighed by
// 7-bit codes and int4 values over runs of 32 rows (AVX2; p8w7 was its 16-row runs), for a
// head dim of head_dim (the model's); -wl where an int8 or int4 row of that head dim ends in a
// wider group (kernels/kv_quant.h). So results measured another way are not shown as this one's.
const char* kv_quality_text_id(int32_t head_dim);

class KvQualityMeasurement {
 public:
  // types: measured in this order. Throws kvdesk::Error when the model's tokenizer leaves the
  // text no token to score. model and forward must outlive this.
  KvQualityMeasurement(Model& model, ForwardBackend& forward, std::vector<KvType> types);
  ~KvQualityMeasurement();
  KvQualityMeasurement(const KvQualityMeasurement&) = delete;
  KvQualityMeasurement& operator=(const KvQualityMeasurement&) = delete;

  // One forward step; appends the types it finished to `measured` (model_identity left empty).
  // false once every type is measured. Throws kvdesk::Error when the engine step fails.
  bool step(std::vector<KvQuality>& measured);
  // The types not measured yet, in order.
  std::vector<KvType> remaining() const;

 private:
  std::vector<KvType> types_;
  int32_t head_dim_;
  std::unique_ptr<KvComparison> comparison_;
  size_t reported_ = 0;   // types handed out by step()
};

// Every type, on the caller's thread (kvdesk-cli info): the same steps, run to the end.
std::vector<KvQuality> measure_kv_quality(Model& model, ForwardBackend& forward, std::span<const KvType> types);

}  // namespace kvdesk
