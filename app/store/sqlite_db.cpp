// The SQLite RAII layer (see sqlite_db.h): opening, the statement cache, binding and reading,
// and the translation of SQLite result codes into messages a user can act on.
#include "app/store/sqlite_db.h"

#include <sqlite3.h>

#include <filesystem>
#include <system_error>
#include <utility>

#include "engine/error.h"

namespace kvdesk::store {

std::string describe_sqlite_error(int rc) {
  switch (rc) {
    case SQLITE_CANTOPEN_ISDIR:
      return "the path is a folder, not a database file";
    case SQLITE_READONLY_DIRECTORY:
      return "the database's folder is read-only; kvdesk needs to create files next to the database";
    default:
      break;
  }
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return "the database is locked by another program (is another kvdesk running?); close it and try again";
    case SQLITE_READONLY:
      return "the database is read-only; check the permissions of the file and of its folder";
    case SQLITE_CANTOPEN:
      return "cannot open the file; check that its folder exists and that kvdesk may write there";
    case SQLITE_CORRUPT:
      return "the database file is corrupt; it was left as it is: restore a backup or move it away to start a new one";
    case SQLITE_NOTADB:
      return "the file is not an SQLite database; it was left as it is: choose another file or move it away";
    case SQLITE_FULL:
      return "the disk is full (or the database reached its size limit) and the last change was not saved; "
             "free some space and try again";
    case SQLITE_IOERR:
      return "reading or writing the file failed; check the drive";
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return "permission denied";
    case SQLITE_NOMEM:
      return "out of memory";
    default:
      return sqlite3_errstr(rc);
  }
}

namespace {

// The message for a failure of connection `db` (may be null) with result code `rc`.
std::string error_message(const std::string& path, sqlite3* db, int rc) {
  std::string message = path + ": " + describe_sqlite_error(rc);
  const char* detail = db ? sqlite3_errmsg(db) : nullptr;
  if (detail && *detail && std::string_view(detail) != sqlite3_errstr(rc)) {
    std::string line = detail;
    for (char& c : line) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    message += " (SQLite: " + line + ")";
  }
  return message;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// BlobReader
// ---------------------------------------------------------------------------------------------

BlobReader::BlobReader(Database& db, const char* table, const char* column, int64_t rowid) : db_(db) {
  const int rc = sqlite3_blob_open(db.db_, "main", table, column, rowid, 0, &blob_);
  if (rc != SQLITE_OK) {
    sqlite3_blob_close(blob_);   // SQLite may hand back a handle to close even on failure
    db.fail(rc);
  }
  size_ = size_t(sqlite3_blob_bytes(blob_));
}

BlobReader::~BlobReader() { sqlite3_blob_close(blob_); }

void BlobReader::read(size_t offset, std::span<uint8_t> out) {
  KVDESK_ASSERT(offset <= size_ && out.size() <= size_ - offset);
  const int rc = sqlite3_blob_read(blob_, out.data(), int(out.size()), int(offset));
  if (rc != SQLITE_OK) db_.fail(rc);
}

// ---------------------------------------------------------------------------------------------
// Database
// ---------------------------------------------------------------------------------------------

Database::Database(const std::string& path, OpenMode mode, int busy_timeout_ms) : path_(path), mode_(mode) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) throw Error(path + ": is a folder, not a database file; choose a file");
  const int flags = SQLITE_OPEN_EXRESCODE |
                    (mode == OpenMode::ReadWrite ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY);
  const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    const std::string message = error_message(path_, db_, rc);
    sqlite3_close(db_);
    throw Error(message);
  }
  sqlite3_busy_timeout(db_, busy_timeout_ms);
}

Database::~Database() {
  for (auto& [sql, slot] : cache_) {
    KVDESK_ASSERT(!slot.in_use);
    sqlite3_finalize(slot.stmt);
  }
  sqlite3_close(db_);
}

bool Database::read_only() const { return sqlite3_db_readonly(db_, "main") == 1; }

void Database::fail(int rc) const {
  if ((rc & 0xff) == SQLITE_READONLY && mode_ == OpenMode::ReadOnly) {
    throw Error(path_ + ": the database was opened read-only; this change was not saved");
  }
  throw Error(error_message(path_, db_, rc));
}

Statement Database::prepare(std::string_view sql) {
  auto it = cache_.find(sql);
  if (it == cache_.end()) it = cache_.emplace(std::string(sql), CachedStatement{}).first;
  CachedStatement& slot = it->second;
  if (slot.in_use) {
    sqlite3_stmt* fresh = nullptr;
    const int rc = sqlite3_prepare_v2(db_, sql.data(), int(sql.size()), &fresh, nullptr);
    if (rc != SQLITE_OK) fail(rc);
    return Statement(*this, fresh, nullptr);
  }
  if (!slot.stmt) {
    const int rc = sqlite3_prepare_v3(db_, sql.data(), int(sql.size()), SQLITE_PREPARE_PERSISTENT, &slot.stmt, nullptr);
    if (rc != SQLITE_OK) {
      cache_.erase(it);
      fail(rc);
    }
    KVDESK_ASSERT(slot.stmt != nullptr);
  }
  slot.in_use = true;
  return Statement(*this, slot.stmt, &slot.in_use);
}

void Database::exec(std::string_view sql) {
  const int rc = sqlite3_exec(db_, std::string(sql).c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) fail(rc);
}

bool Database::try_exec(std::string_view sql) noexcept {
  return sqlite3_exec(db_, std::string(sql).c_str(), nullptr, nullptr, nullptr) == SQLITE_OK;
}

int64_t Database::query_int(std::string_view sql) {
  Statement s = prepare(sql);
  KVDESK_ASSERT(s.step());
  return s.column_int(0);
}

std::string Database::query_text(std::string_view sql) {
  Statement s = prepare(sql);
  KVDESK_ASSERT(s.step());
  return s.column_text(0);
}

int64_t Database::last_insert_id() const { return sqlite3_last_insert_rowid(db_); }

int64_t Database::changes() const { return sqlite3_changes64(db_); }

// ---------------------------------------------------------------------------------------------
// Statement
// ---------------------------------------------------------------------------------------------

Statement::Statement(Database& db, sqlite3_stmt* stmt, bool* in_use) : db_(&db), stmt_(stmt), in_use_(in_use) {}

Statement::Statement(Statement&& other) noexcept
    : db_(other.db_), stmt_(std::exchange(other.stmt_, nullptr)), in_use_(std::exchange(other.in_use_, nullptr)) {}

Statement::~Statement() {
  if (!stmt_) return;
  if (in_use_) {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    *in_use_ = false;
  } else {
    sqlite3_finalize(stmt_);
  }
}

Statement& Statement::bind(int index, int64_t value) {
  if (const int rc = sqlite3_bind_int64(stmt_, index, value); rc != SQLITE_OK) db_->fail(rc);
  return *this;
}

Statement& Statement::bind(int index, double value) {
  if (const int rc = sqlite3_bind_double(stmt_, index, value); rc != SQLITE_OK) db_->fail(rc);
  return *this;
}

Statement& Statement::bind(int index, std::string_view text) {
  // SQLITE_TRANSIENT: SQLite copies the text, so the caller's buffer may change before step().
  // An empty view may have a null data(), which SQLite would bind as NULL rather than ''.
  const char* data = text.data() ? text.data() : "";
  const int rc = sqlite3_bind_text64(stmt_, index, data, text.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK) db_->fail(rc);
  return *this;
}

Statement& Statement::bind_blob(int index, std::span<const uint8_t> bytes) {
  const int rc = sqlite3_bind_blob64(stmt_, index, bytes.data(), bytes.size(), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) db_->fail(rc);
  return *this;
}

Statement& Statement::bind_blob_borrowed(int index, std::span<const uint8_t> bytes) {
  const int rc = sqlite3_bind_blob64(stmt_, index, bytes.data(), bytes.size(), SQLITE_STATIC);
  if (rc != SQLITE_OK) db_->fail(rc);
  return *this;
}

Statement& Statement::bind_null(int index) {
  if (const int rc = sqlite3_bind_null(stmt_, index); rc != SQLITE_OK) db_->fail(rc);
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_->fail(rc);
}

void Statement::run() {
  while (step()) {
  }
}

bool Statement::is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }

int64_t Statement::column_int(int column) const { return sqlite3_column_int64(stmt_, column); }

double Statement::column_double(int column) const { return sqlite3_column_double(stmt_, column); }

std::string Statement::column_text(int column) const {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  const int size = sqlite3_column_bytes(stmt_, column);
  return text ? std::string(text, size_t(size)) : std::string();
}

std::vector<uint8_t> Statement::column_blob(int column) const {
  const auto* data = static_cast<const uint8_t*>(sqlite3_column_blob(stmt_, column));
  const int size = sqlite3_column_bytes(stmt_, column);
  return data ? std::vector<uint8_t>(data, data + size) : std::vector<uint8_t>();
}

std::optional<int64_t> Statement::column_optional_int(int column) const {
  if (is_null(column)) return std::nullopt;
  return column_int(column);
}

// ---------------------------------------------------------------------------------------------
// Transaction
// ---------------------------------------------------------------------------------------------

Transaction::Transaction(Database& db) : db_(db) { db_.exec("BEGIN IMMEDIATE"); }

Transaction::~Transaction() {
  // A failed statement may already have rolled the transaction back; then this ROLLBACK is a no-op error.
  if (open_) db_.try_exec("ROLLBACK");
}

void Transaction::commit() {
  db_.exec("COMMIT");
  open_ = false;
}

}  // namespace kvdesk::store
