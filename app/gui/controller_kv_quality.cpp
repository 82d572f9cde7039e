// Controller, KV quality: what each KV type costs the in-process engine's model (KL divergence
// from f32 KV and top-1 agreement, KvQuality). When a model has loaded, the figures stored for
// it (by model identity and the engine's text) show at once; the types without any are
// measured by the engine in the background, "measuring..." until each result arrives, which is
// then shown and stored. Results of another model (one replaced while it was measured) are
// dropped; a remote server's model has none.
#include "app/gui/controller.h"
#include "engine/error.h"

namespace kvdesk::gui {

void Controller::start_kv_quality() {
  forget_kv_quality();
  const ModelSummary model = engine_.local().stats().model;
  kv_quality_model_ = model.identity;
  if (kv_quality_model_.empty()) return;
  for (const store::KvQualityRecord& r : store().kv_quality(kv_quality_model_, kv_quality_text_id(model.head_dim))) {
    kv_quality_[r.kv_type] = {ui::KvQualityState::Measured, r.kl, r.top1, ""};
  }
  std::vector<KvType> missing;
  for (KvType t : all_kv_types()) {
    if (kv_quality_.count(kv_type_name(t))) continue;
    missing.push_back(t);
    kv_quality_[kv_type_name(t)] = {ui::KvQualityState::Measuring, 0, 0, ""};
  }
  if (!missing.empty()) engine_.local().measure_kv_quality(std::move(missing));
  show_kv_quality();
}

void Controller::on_kv_quality(const Event& e) {
  const KvQuality& q = e.kv_quality;
  if (q.model_identity.empty() || q.model_identity != kv_quality_model_) return;
  if (!e.text.empty()) {
    // The measurement stopped at this type: it and the ones still pending have no figures.
    for (auto& [name, view] : kv_quality_) {
      if (view.state == ui::KvQualityState::Measuring) view = {ui::KvQualityState::Failed, 0, 0, e.text};
    }
    show_kv_quality();
    set_status("KV quality of " + std::string(kv_type_name(q.type)) + " not measured: " + e.text, true);
    return;
  }
  kv_quality_[kv_type_name(q.type)] = kv_quality_view(q);
  show_kv_quality();
  store().save_kv_quality(store::KvQualityRecord{.model_identity = q.model_identity,
                                                 .kv_type = kv_type_name(q.type),
                                                 .text_id = q.text_id,
                                                 .kl = q.kl,
                                                 .top1 = q.top1,
                                                 .tokens = q.tokens});
}

void Controller::forget_kv_quality() {
  kv_quality_model_.clear();
  kv_quality_.clear();
}

void Controller::show_kv_quality() {
  for (ui::KvTypeCost& t : vm_.kv_types) {
    const auto known = kv_quality_.find(t.name);
    t.quality = known == kv_quality_.end() ? ui::KvQualityView{} : known->second;
  }
}

}  // namespace kvdesk::gui
