// KV quality (see kv_quality.h): the built-in text as one window, f32 KV as the reference, one
// layout per type with that type for K and V and the default newest rows in f32.
#include "engine/quality/kv_quality.h"

#include <algorithm>

#include "engine/model/key_smoothing.h"
#include "engine/model/model.h"
#include "engine/quality/kv_comparison.h"
#include "kernels/attention.h"
#include "kernels/kv_quant.h"

namespace kvdesk {
namespace {

KvLayout layout_of(KvType type) {
  KvLayout layout;
  layout.k_type = type;
  layout.v_type = type;
  return layout;
}

// The window's text: the prose's tokens without BOS, as many as one window of
// kKvQualityTokens (or the model's context, when shorter) holds beside BOS.
std::vector<int32_t> quality_text(const Model& model, int32_t window, bool has_bos) {
  std::vector<int32_t> tokens = model.tokenizer().encode(key_smoothing_text(), false);
  tokens.resize(std::min(tokens.size(), size_t(window - (has_bos ? 1 : 0))));
  return tokens;
}

KvComparisonOptions quality_options(const Model& model, const std::vector<KvType>& types) {
  KvComparisonOptions options;
  for (KvType t : types) options.layouts.push_back(layout_of(t));
  options.reference = layout_of(KvType::F32);
  options.ctx = std::min(kKvQualityTokens, model.config().context_length);
  options.bos = model.tokenizer().bos_id();
  options.chunk_tokens = kKvQualityChunk;
  return options;
}

}  // namespace

const char* kv_quality_text_id(int32_t head_dim) {
  static_assert(kKvQualityTokens == 128 && kKvRecentRows == 16, "name the text measured");
  static_assert(kQueryCodeMax == 127 && kQueryPairMaxBytePairs == 128 && kValueWeightCodeMax == 255 &&
                    kValueWeightCodeMaxBytePairs == 127,
                "name the integer attention's rounding");
  const IntAttentionScheme int8 = cpu::int_attention_scheme(KvType::INT8, KvType::INT8, head_dim);
  const bool wide = kv_row_wide_last_group(KvType::INT8, head_dim) || kv_row_wide_last_group(KvType::INT4, head_dim);
  if (int8.query_pair_max == 0) return wide ? "lighthouse-128-recent-16-q8-wl" : "lighthouse-128-recent-16-q8";
  return wide ? "lighthouse-128-recent-16-p8w7r32-wl" : "lighthouse-128-recent-16-p8w7r32";
}

KvQualityMeasurement::KvQualityMeasurement(Model& model, ForwardBackend& forward, std::vector<KvType> types)
    : types_(std::move(types)), head_dim_(model.config().head_dim) {
  const KvComparisonOptions options = quality_options(model, types_);
  comparison_ = std::make_unique<KvComparison>(model, forward, quality_text(model, options.ctx, options.bos >= 0), options);
}

KvQualityMeasurement::~KvQualityMeasurement() = default;

bool KvQualityMeasurement::step(std::vector<KvQuality>& measured) {
  const bool more = comparison_->step();
  for (; reported_ < comparison_->finished(); ++reported_) {
    const PerplexityResult r = comparison_->result(reported_);
    KvQuality q;
    q.text_id = kv_quality_text_id(head_dim_);
    q.type = types_[reported_];
    q.kl = r.kl_mean;
    q.top1 = r.top1_agree;
    q.tokens = int32_t(r.tokens);
    measured.push_back(std::move(q));
  }
  return more;
}

std::vector<KvType> KvQualityMeasurement::remaining() const {
  return {types_.begin() + std::ptrdiff_t(reported_), types_.end()};
}

std::vector<KvQuality> measure_kv_quality(Model& model, ForwardBackend& forward, std::span<const KvType> types) {
  KvQualityMeasurement measurement(model, forward, {types.begin(), types.end()});
  std::vector<KvQuality> measured;
  while (measurement.step(measured)) {
  }
  return measured;
}

}  // namespace kvdesk
