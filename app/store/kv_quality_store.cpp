// ConversationStore: the engine's KV quality measurements, one row of kv_quality per model,
// KV type and text (schema version 5), so a model opened again shows them without measuring.
#include "app/store/conversation_store.h"

namespace kvdesk::store {

void ConversationStore::save_kv_quality(const KvQualityRecord& record) {
  db_->prepare("INSERT OR REPLACE INTO kv_quality (model_identity, kv_type, text_id, kl, top1, tokens, measured_at) "
               "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")
      .bind(1, record.model_identity)
      .bind(2, record.kv_type)
      .bind(3, record.text_id)
      .bind(4, record.kl)
      .bind(5, record.top1)
      .bind(6, record.tokens)
      .bind(7, unix_time_ms())
      .run();
}

std::vector<KvQualityRecord> ConversationStore::kv_quality(std::string_view model_identity, std::string_view text_id) {
  Statement s = db_->prepare("SELECT kv_type, kl, top1, tokens FROM kv_quality WHERE model_identity = ?1 AND text_id = ?2 "
                             "ORDER BY kv_type");
  s.bind(1, model_identity).bind(2, text_id);
  std::vector<KvQualityRecord> out;
  while (s.step()) {
    out.push_back(KvQualityRecord{.model_identity = std::string(model_identity),
                                  .kv_type = s.column_text(0),
                                  .text_id = std::string(text_id),
                                  .kl = s.column_double(1),
                                  .top1 = s.column_double(2),
                                  .tokens = s.column_int(3)});
  }
  return out;
}

}  // namespace kvdesk::store
