// Old database files for migration tests: a file the current store wrote, taken back to what
// kvdesk wrote at an older schema version (app/store/schema.cpp): version 4 has no kv_quality
// table; version 3 also no conversations.engine; version 1 also no message token ids and no
// per-conversation settings.
#pragma once
#include <string>

#include "app/store/sqlite_db.h"

namespace kvdesk::test {

inline void downgrade_to_version_4(const std::string& path) {
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
