// A thin RAII layer over the SQLite C API: Database (one connection), Statement (a prepared
// statement borrowed from the connection's cache) and Transaction (BEGIN IMMEDIATE, rolled back
// unless committed). Every SQLite failure becomes a kvdesk::Error naming the file and saying
// what the user can do about it. Callers bind values; SQL text never contains user data.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;
struct sqlite3_blob;

namespace kvdesk::store {

enum class OpenMode {
  ReadWrite,   // creates the file when it is missing
  ReadOnly,    // never writes; the file must exist
};

class Database;

// One use of a prepared statement. Parameters are 1-based (?1, ?2 in the SQL), columns 0-based.
// When the use ends the statement is reset and its bindings cleared, so an abandoned SELECT
// holds no read lock and the next use starts from a clean slate.
class Statement {
 public:
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&&) = delete;
  ~Statement();

  Statement& bind(int index, int value) { return bind(index, int64_t{value}); }
  Statement& bind(int index, int64_t value);
  Statement& bind(int index, double value);
  Statement& bind(int index, std::string_view text);
  Statement& bind(int index, const char* text) { return bind(index, std::string_view(text)); }
  Statement& bind(int index, const std::string& text) { return bind(index, std::string_view(text)); }
  Statement& bind_blob(int index, std::span<const uint8_t> bytes);
  // As bind_blob without SQLite's copy, for values of many megabytes: `bytes` must stay alive
  // and unchanged until this use of the statement ends.
  Statement& bind_blob_borrowed(int index, std::span<const uint8_t> bytes);
  Statement& bind_null(int index);
  template <class T>
  Statement& bind(int index, const std::optional<T>& value) {
    return value ? bind(index, *value) : bind_null(index);
  }

  bool step();   // true: a row is ready to read; false: the statement is done
  void run();    // steps to the end; for statements that return no rows

  bool is_null(int column) const;
  int64_t column_int(int column) const;
  double column_double(int column) const;
  std::string column_text(int column) const;
  std::vector<uint8_t> column_blob(int column) const;
  std::optional<int64_t> column_optional_int(int column) const;

 private:
  friend class Database;
  Statement(Database& db, sqlite3_stmt* stmt, bool* in_use);

  Database* db_;
  sqlite3_stmt* stmt_;
  bool* in_use_;   // the cache slot's flag; nullptr: this statement is not cached and is finalized
};

// One SQLite connection. Not thread-safe: use it from one thread at a time.
// Invariant: every cached statement belongs to this connection and is finalized before it closes;
// a slot marked in_use is lent to exactly one live Statement (a second use of the same SQL while
// the first is alive gets a fresh, uncached statement).
class Database {
 public:
  Database(const std::string& path, OpenMode mode, int busy_timeout_ms);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  const std::string& path() const { return path_; }
  bool read_only() const;

  Statement prepare(std::string_view sql);
  // Runs SQL without parameters (schema, pragmas, BEGIN/COMMIT). Never pass user data here.
  void exec(std::string_view sql);
  // As exec, for cleanup paths that must not throw: false when the SQL failed.
  bool try_exec(std::string_view sql) noexcept;
  // The first column of the first row of a parameterless query (PRAGMA user_version, ...).
  int64_t query_int(std::string_view sql);
  std::string query_text(std::string_view sql);

  int64_t last_insert_id() const;
  int64_t changes() const;

  // Throws the kvdesk::Error for SQLite result code `rc`: the file, what went wrong, what to do.
  [[noreturn]] void fail(int rc) const;

 private:
  struct CachedStatement {
    sqlite3_stmt* stmt = nullptr;
    bool in_use = false;
  };
  // Lets the cache be searched with a string_view: a hit allocates nothing.
  struct SqlHash {
    using is_transparent = void;
    size_t operator()(std::string_view sql) const { return std::hash<std::string_view>{}(sql); }
  };

  friend class BlobReader;

  std::string path_;
  OpenMode mode_;
  sqlite3* db_ = nullptr;
  std::unordered_map<std::string, CachedStatement, SqlHash, std::equal_to<>> cache_;   // key: the SQL text
};

// One BLOB cell read in pieces (SQLite's incremental blob I/O): the bytes go from the database's
// pages straight into the caller's buffers, where a SELECT would first assemble the whole value
// in memory and then copy it out. Holds a read of the row until it is destroyed.
class BlobReader {
 public:
  // Throws kvdesk::Error when the row does not exist or the column is not a BLOB.
  BlobReader(Database& db, const char* table, const char* column, int64_t rowid);
  ~BlobReader();
  BlobReader(const BlobReader&) = delete;
  BlobReader& operator=(const BlobReader&) = delete;

  size_t size() const { return size_; }
  // Fills `out` with the bytes at [offset, offset + out.size()), which must lie in the value.
  void read(size_t offset, std::span<uint8_t> out);

 private:
  Database& db_;
  sqlite3_blob* blob_ = nullptr;
  size_t size_ = 0;
};

// A write transaction. BEGIN IMMEDIATE takes the write lock up front (waiting up to the busy
// timeout), so a transaction never fails halfway because another writer appeared.
class Transaction {
 public:
  explicit Transaction(Database& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  Database& db_;
  bool open_ = true;
};

// The user-facing explanation of an SQLite result code (no file name, one line).
std::string describe_sqlite_error(int rc);

}  // namespace kvdesk::store
