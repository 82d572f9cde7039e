// Old database files for migration tests: a file the current store wrote, taken back to what
// kvdesk wrote at an older schema version (app/store/schema.cpp): version 5 has no tool role and
// no messages.fields_json (tool messages are dropped); version 4 also no kv_quality table;
// version 3 also no conversations.engine; version 1 also no message token ids and no
// per-conversation settings.
#pragma once
#include <string>

#include "app/store/sqlite_db.h"

namespace kvdesk::test {

inline void downgrade_to_version_5(const std::string& path) {
  store::Database db(path, store::OpenMode::ReadWrite, 1000);
  db.exec("PRAGMA foreign_keys = OFF");
  db.exec(R"sql(
CREATE TABLE messages_v5 (
  id                INTEGER PRIMARY KEY,
  conversation_id   INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
  parent_id         INTEGER REFERENCES messages(id) ON DELETE CASCADE,
  role              TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
  content           TEXT NOT NULL,
  status            TEXT NOT NULL
                    CHECK (status IN ('complete', 'streaming', 'stopped', 'failed', 'interrupted')),
  created_at        INTEGER NOT NULL,
  updated_at        INTEGER NOT NULL,
  model             TEXT,
  prompt_tokens     INTEGER,
  completion_tokens INTEGER,
  ttft_ms           REAL,
  decode_tok_s      REAL,
  finish_reason     TEXT,
  token_identity    TEXT,
  token_ids         BLOB
);
INSERT INTO messages_v5 SELECT id, conversation_id, parent_id, role, content, status, created_at, updated_at, model,
  prompt_tokens, completion_tokens, ttft_ms, decode_tok_s, finish_reason, token_identity, token_ids
  FROM messages WHERE role != 'tool';
DROP TABLE messages;
ALTER TABLE messages_v5 RENAME TO messages;
CREATE INDEX messages_by_conversation ON messages(conversation_id, parent_id);
CREATE INDEX messages_by_parent ON messages(parent_id);
PRAGMA user_version = 5;
)sql");
}

inline void downgrade_to_version_4(const std::string& path) {
  downgrade_to_version_5(path);
  store::Database db(path, store::OpenMode::ReadWrite, 1000);
  db.exec("DROP TABLE kv_quality");
  db.exec("PRAGMA user_version = 4");
}

inline void downgrade_to_version_3(const std::string& path) {
  downgrade_to_version_4(path);
  store::Database db(path, store::OpenMode::ReadWrite, 1000);
  db.exec("ALTER TABLE conversations DROP COLUMN engine");
  db.exec("PRAGMA user_version = 3");
}

inline void downgrade_to_version_1(const std::string& path) {
  downgrade_to_version_3(path);
  store::Database db(path, store::OpenMode::ReadWrite, 1000);
  db.exec("DROP TABLE conversation_settings");
  db.exec("ALTER TABLE messages DROP COLUMN token_ids");
  db.exec("ALTER TABLE messages DROP COLUMN token_identity");
  db.exec("PRAGMA user_version = 1");
}

}  // namespace kvdesk::test
