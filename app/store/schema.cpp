// Schema checks and migrations (see schema.h). A migration is appended, never edited: a file at
// version N has run exactly the first N entries of kMigrations.
#include "app/store/schema.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

#include "engine/error.h"

namespace kvdesk::store {
namespace {

struct Migration {
  int64_t version;   // user_version once this migration has run
  const char* sql;
};

// Version 1. Messages form a tree per conversation: parent_id is NULL for a root, and siblings
// share a parent. conversations.active_leaf_id is the end of the branch on screen; it always
// names a message of the same conversation (checked by the store, which the FK cannot express).
// The KV blob's data column comes last so reading its metadata never pages in the bytes.
constexpr Migration kMigrations[] = {
    {1, R"sql(
CREATE TABLE conversations (
  id             INTEGER PRIMARY KEY,
  title          TEXT NOT NULL,
  system_prompt  TEXT NOT NULL DEFAULT '',
  active_leaf_id INTEGER REFERENCES messages(id) ON DELETE SET NULL,
  created_at     INTEGER NOT NULL,
  updated_at     INTEGER NOT NULL
);
CREATE INDEX conversations_by_update ON conversations(updated_at DESC, id DESC);

CREATE TABLE messages (
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
  finish_reason     TEXT
);
CREATE INDEX messages_by_conversation ON messages(conversation_id, parent_id);
CREATE INDEX messages_by_parent ON messages(parent_id);

CREATE TABLE presets (
  id            INTEGER PRIMARY KEY,
  name          TEXT NOT NULL UNIQUE,
  system_prompt TEXT NOT NULL
);

CREATE TABLE settings (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE recent_models (
  path        TEXT PRIMARY KEY,
  last_opened INTEGER NOT NULL,
  seq         INTEGER NOT NULL
);

CREATE TABLE conversation_kv (
  conversation_id INTEGER PRIMARY KEY REFERENCES conversations(id) ON DELETE CASCADE,
  key             TEXT NOT NULL,
  codec           TEXT NOT NULL CHECK (codec IN ('raw', 'zstd')),
  num_bytes       INTEGER NOT NULL,
  saved_at        INTEGER NOT NULL,
  data            BLOB NOT NULL
);
)sql"},
    // Version 2. A message's token ids (its span of the conversation's token sequence, see
    // MessageTokens) and the model and chat template they are valid for; NULL for rows written
    // before, whose text stands in for them.
    {2, R"sql(
ALTER TABLE messages ADD COLUMN token_identity TEXT;
ALTER TABLE messages ADD COLUMN token_ids BLOB;
)sql"},
    // Version 3. A conversation's own generation settings; a NULL column (or no row, as for
    // every conversation of an older file) means the app's default for that setting.
    {3, R"sql(
CREATE TABLE conversation_settings (
  conversation_id INTEGER PRIMARY KEY REFERENCES conversations(id) ON DELETE CASCADE,
  context_length  INTEGER,
  max_tokens      INTEGER,
  temperature     REAL,
  top_p           REAL,
  top_k           INTEGER,
  min_p           REAL,
  seed            INTEGER,
  kv_retention    TEXT,
  kv_keep         REAL
);
)sql"},
    // Version 4. The engine a conversation's latest answer came from: "in-process" (the app's own
    // engine) or a remote server's URL. NULL for conversations of an older file (unknown).
    {4, R"sql(
ALTER TABLE conversations ADD COLUMN engine TEXT;
)sql"},
    // Version 5. What each KV type costs a model (KL divergence from f32 KV and top-1 agreement
    // of its next-token distributions), measured once per model on a built-in text.
    {5, R"sql(
CREATE TABLE kv_quality (
  model_identity TEXT NOT NULL,
  kv_type        TEXT NOT NULL,
  text_id        TEXT NOT NULL,
  kl             REAL NOT NULL,
  top1           REAL NOT NULL,
  tokens         INTEGER NOT NULL,
  measured_at    INTEGER NOT NULL,
  PRIMARY KEY (model_identity, kv_type, text_id)
) WITHOUT ROWID;
)sql"},
    // Version 6. Tool results (role 'tool') and a message's other OpenAI fields (fields_json: a
    // JSON object's text, NULL when none; see Message::fields_json). SQLite cannot change a CHECK
    // constraint in place, so the table is rebuilt (its ids kept) with foreign keys off, as
    // SQLite's documented procedure for other schema changes does; see kRebuildsTables.
    {6, R"sql(
CREATE TABLE messages_v6 (
  id                INTEGER PRIMARY KEY,
  conversation_id   INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
  parent_id         INTEGER REFERENCES messages(id) ON DELETE CASCADE,
  role              TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
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
  token_ids         BLOB,
  fields_json       TEXT
);
INSERT INTO messages_v6 (id, conversation_id, parent_id, role, content, status, created_at, updated_at, model,
                         prompt_tokens, completion_tokens, ttft_ms, decode_tok_s, finish_reason, token_identity,
                         token_ids)
  SELECT id, conversation_id, parent_id, role, content, status, created_at, updated_at, model, prompt_tokens,
         completion_tokens, ttft_ms, decode_tok_s, finish_reason, token_identity, token_ids FROM messages;
DROP TABLE messages;
ALTER TABLE messages_v6 RENAME TO messages;
CREATE INDEX messages_by_conversation ON messages(conversation_id, parent_id);
CREATE INDEX messages_by_parent ON messages(parent_id);
)sql"},
};

// Migrations that rebuild a table another table's foreign key names. They run with foreign key
// enforcement off (it cannot change inside a transaction, so it is switched around it), and
// PRAGMA foreign_key_check must find nothing before they commit.
constexpr int64_t kRebuildsTables[] = {6};

static_assert(std::size(kMigrations) == kSchemaVersion, "one migration per schema version");

// What a file says about itself before anything is written to it.
struct FileState {
  int64_t user_version = 0;
  int64_t application_id = 0;
  int64_t num_objects = 0;   // tables, indexes, views and triggers
  bool is_new() const { return user_version == 0 && application_id == 0 && num_objects == 0; }
};

// The first reads of a file: these fail for a file that is not SQLite or whose header is damaged.
FileState inspect(Database& db) {
  FileState s;
  s.user_version = db.query_int("PRAGMA user_version");
  s.application_id = db.query_int("PRAGMA application_id");
  s.num_objects = db.query_int("SELECT count(*) FROM sqlite_schema");
  return s;
}

[[noreturn]] void refuse_newer(const Database& db, int64_t version) {
  throw Error(db.path() + ": was written by a newer kvdesk (database schema version " + std::to_string(version) +
              ", this kvdesk knows up to " + std::to_string(kSchemaVersion) +
              "); it was left as it is: update kvdesk or choose another database");
}

// Walks every page of the chat tables and their indexes (a cost that grows with the chat text).
// The saved KV blobs, which can be far larger, are checked when loaded instead: their size, and
// zstd's checksum.
void quick_check(Database& db) {
  std::vector<std::string> tables;
  {
    Statement s = db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' "
                             "ESCAPE '\\' AND name != 'conversation_kv'");
    while (s.step()) tables.push_back(s.column_text(0));
  }
  for (const std::string& table : tables) {
    std::string quoted;
    for (char c : table) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
    const std::string result = db.query_text("PRAGMA quick_check(\"" + quoted + "\")");
    if (result != "ok") {
      throw Error(db.path() + ": the database file is corrupt (" + result +
                  "); it was left as it is: restore a backup or move it away to start a new one");
    }
  }
}

bool rebuilds_tables(int64_t version) {
  return std::find(std::begin(kRebuildsTables), std::end(kRebuildsTables), version) != std::end(kRebuildsTables);
}

void require_foreign_keys_hold(Database& db) {
  Statement s = db.prepare("PRAGMA foreign_key_check");
  if (s.step()) {
    throw Error(db.path() + ": upgrading the database found a row of '" + s.column_text(0) +
                "' whose reference is broken (the file is damaged); it was left as it is");
  }
}

void run_migrations(Database& db) {
  Transaction tx(db);
  // Read again under the write lock: another kvdesk may have migrated the file since inspect().
  const int64_t version = db.query_int("PRAGMA user_version");
  if (version > kSchemaVersion) refuse_newer(db, version);
  bool rebuilt = false;
  for (const Migration& m : kMigrations) {
    if (m.version <= version) continue;
    db.exec(m.sql);
    db.exec("PRAGMA user_version = " + std::to_string(m.version));
    rebuilt = rebuilt || rebuilds_tables(m.version);
  }
  if (rebuilt) require_foreign_keys_hold(db);
  db.exec("PRAGMA application_id = " + std::to_string(kApplicationId));
  tx.commit();
}

void migrate(Database& db) {
  const int64_t version = db.query_int("PRAGMA user_version");
  const bool rebuild = std::any_of(std::begin(kMigrations), std::end(kMigrations),
                                   [&](const Migration& m) { return m.version > version && rebuilds_tables(m.version); });
  if (!rebuild) return run_migrations(db);
  const int64_t enforced = db.query_int("PRAGMA foreign_keys");
  db.exec("PRAGMA foreign_keys = OFF");
  try {
    run_migrations(db);
  } catch (...) {
    db.exec("PRAGMA foreign_keys = " + std::to_string(enforced));
    throw;
  }
  db.exec("PRAGMA foreign_keys = " + std::to_string(enforced));
}

}  // namespace

void prepare_schema(Database& db, OpenMode mode, bool verify) {
  const FileState state = inspect(db);
  if (state.user_version > kSchemaVersion) refuse_newer(db, state.user_version);
  if (!state.is_new() && state.application_id != kApplicationId) {
    throw Error(db.path() + ": is an SQLite database of another program, not a kvdesk database; "
                            "it was left as it is: choose another file");
  }
  // kvdesk's file with tables but no schema version: no migration can tell where to start.
  if (state.num_objects > 0 && state.user_version <= 0) {
    throw Error(db.path() + ": has kvdesk's tables but database schema version " + std::to_string(state.user_version) +
                " (the file is damaged); it was left as it is: restore a backup or move it away to start a new one");
  }
  if (verify) quick_check(db);
  if (mode == OpenMode::ReadOnly) {
    if (state.is_new()) throw Error(db.path() + ": is empty, not a kvdesk database yet");
    if (state.user_version < kSchemaVersion) {
      throw Error(db.path() + ": uses an older database schema (version " + std::to_string(state.user_version) +
                  "); open it once with kvdesk to upgrade it");
    }
    return;
  }
  // WAL: readers never block the writer, and a commit is one append to the log. synchronous=NORMAL
  // in WAL mode keeps every commit across a crash of kvdesk; only a power cut can lose the last ones.
  db.exec("PRAGMA journal_mode = WAL");
  db.exec("PRAGMA synchronous = NORMAL");
  if (state.user_version < kSchemaVersion) migrate(db);
}

}  // namespace kvdesk::store
