// The database layout: the ordered migrations that build the current schema, and the checks a
// file passes before kvdesk writes to it (is it SQLite, is it whole, is it ours, is it from a
// kvdesk no newer than this one). The schema version lives in PRAGMA user_version.
#pragma once
#include <cstdint>

#include "app/store/sqlite_db.h"

namespace kvdesk::store {

inline constexpr int64_t kSchemaVersion = 6;
inline constexpr int64_t kApplicationId = 0x6B764442;   // "kvDB" in PRAGMA application_id

// Checks the freshly opened `db` (with PRAGMA quick_check when `verify`) and, for ReadWrite,
// switches it to WAL and applies the migrations it lacks, each in its own transaction.
// Throws kvdesk::Error, having written nothing, for a file that is not SQLite, is corrupt,
// belongs to another program or comes from a newer kvdesk (never migrated down).
void prepare_schema(Database& db, OpenMode mode, bool verify);

}  // namespace kvdesk::store
