// Old database files for migration tests: a file the current store wrote, taken back to what
// kvdesk wrote at schema version 1 (app/store/schema.cpp: no message token ids, no
// per-conversation settings).
#pragma once
#include <string>

#include "app/store/sqlite_db.h"

namespace kvdesk::test {

inline void downgrade_to_version_1(const std::string& path) {
  store::Database db(path, store::OpenMode::ReadWrite, 1000);
  db.exec("DROP TABLE conversation_settings");
  db.exec("ALTER TABLE messages DROP COLUMN token_ids");
  db.exec("ALTER TABLE messages DROP COLUMN token_identity");
  db.exec("PRAGMA user_version = 1");
}

}  // namespace kvdesk::test
