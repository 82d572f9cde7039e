// ConversationStore: a conversation's own generation settings, one row of
// conversation_settings per conversation that has any (schema version 2). A NULL column is a
// setting left to the app's default.
#include "app/store/conversation_store.h"

#include "engine/error.h"

namespace kvdesk::store {
namespace {

// Numeric columns read only as numbers: text or a blob stored there (a hand-edited file) reads
// as NULL, so the setting falls back to the app's default instead of a made-up 0.
constexpr const char* kSettingsSelect =
    "SELECT CASE WHEN typeof(context_length) = 'integer' THEN context_length END, "
    "CASE WHEN typeof(max_tokens) = 'integer' THEN max_tokens END, "
    "CASE WHEN typeof(temperature) IN ('integer', 'real') THEN temperature END, "
    "CASE WHEN typeof(top_p) IN ('integer', 'real') THEN top_p END, "
    "CASE WHEN typeof(top_k) = 'integer' THEN top_k END, "
    "CASE WHEN typeof(min_p) IN ('integer', 'real') THEN min_p END, "
    "CASE WHEN typeof(seed) = 'integer' THEN seed END, "
    "CASE WHEN typeof(kv_retention) = 'text' THEN kv_retention END, "
    "CASE WHEN typeof(kv_keep) IN ('integer', 'real') THEN kv_keep END "
    "FROM conversation_settings WHERE conversation_id = ?1";

std::optional<double> optional_double(const Statement& s, int column) {
  if (s.is_null(column)) return std::nullopt;
  return s.column_double(column);
}

std::optional<std::string> optional_text(const Statement& s, int column) {
  if (s.is_null(column)) return std::nullopt;
  return s.column_text(column);
}

}  // namespace

ConversationSettings ConversationStore::conversation_settings(ConversationId id) {
  Statement s = db_->prepare(kSettingsSelect);
  s.bind(1, id);
  if (!s.step()) return {};
  return ConversationSettings{
      .context_length = s.column_optional_int(0),
      .max_tokens = s.column_optional_int(1),
      .temperature = optional_double(s, 2),
      .top_p = optional_double(s, 3),
      .top_k = s.column_optional_int(4),
      .min_p = optional_double(s, 5),
      .seed = s.column_optional_int(6),
      .kv_retention = optional_text(s, 7),
      .kv_keep = optional_double(s, 8),
  };
}

void ConversationStore::set_conversation_settings(ConversationId id, const ConversationSettings& settings) {
  Transaction tx(*db_);
  require_conversation(id);
  write_settings(id, settings);
  tx.commit();
}

void ConversationStore::write_settings(ConversationId id, const ConversationSettings& settings) {
  if (settings.empty()) {
    db_->prepare("DELETE FROM conversation_settings WHERE conversation_id = ?1").bind(1, id).run();
  } else {
    db_->prepare("INSERT OR REPLACE INTO conversation_settings (conversation_id, context_length, max_tokens, "
                 "temperature, top_p, top_k, min_p, seed, kv_retention, kv_keep) "
                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)")
        .bind(1, id)
        .bind(2, settings.context_length)
        .bind(3, settings.max_tokens)
        .bind(4, settings.temperature)
        .bind(5, settings.top_p)
        .bind(6, settings.top_k)
        .bind(7, settings.min_p)
        .bind(8, settings.seed)
        .bind(9, settings.kv_retention)
        .bind(10, settings.kv_keep)
        .run();
  }
}

}  // namespace kvdesk::store
