#pragma once
// RAII over the SQLite C API. Every sqlite3 call goes through LOCKSTEP_SQLITE, which turns an
// error code into lockstep::Error carrying SQLite's own message. <sqlite3.h> stays out of
// this header.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace lockstep::baseline {

// An open database connection. Movable, not copyable; closed in the destructor.
class Db {
 public:
  enum class Mode { kReadOnly, kReadWrite, kCreate };
  // Opens the file at `path` (kCreate: creating it when missing). Checks nothing about its
  // content (see Store). Throws InputError when it cannot be opened.
  Db(const std::string& path, Mode mode);
  ~Db();
  Db(Db&& other) noexcept;
  Db& operator=(Db&& other) noexcept;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // Runs one or more statements that return no rows. Throws Error on failure.
  void exec(const std::string& sql);
  std::int64_t last_insert_id() const;
  // True when the connection cannot write (the file or its filesystem is read-only).
  bool read_only() const;
  const std::string& path() const { return path_; }
  sqlite3* handle() const { return db_; }

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

// A prepared statement: prepared in the constructor, finalised in the destructor.
// Bind indexes are 1-based, column indexes 0-based.
class Statement {
 public:
  Statement(const Db& db, std::string_view sql);
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int index, std::int64_t value);
  Statement& bind(int index, int value) { return bind(index, static_cast<std::int64_t>(value)); }
  Statement& bind(int index, double value);
  Statement& bind(int index, std::string_view value);
  Statement& bind(int index, const char* value) { return bind(index, std::string_view(value)); }
  Statement& bind(int index, const std::string& value) { return bind(index, std::string_view(value)); }
  Statement& bind_null(int index);
  Statement& bind_blob(int index, std::string_view bytes);  // a BLOB (text binds TEXT)
  // Returns true when a row is available, false when done. Throws Error on failure.
  bool step();
  // Steps a statement that returns no rows, then resets it for reuse.
  void run();
  void reset();

  std::int64_t int64(int column) const;
  double real(int column) const;
  std::string text(int column) const;
  std::string blob(int column) const;  // a BLOB's bytes ("" for NULL)
  bool is_null(int column) const;

 private:
  const Db* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

// BEGIN IMMEDIATE in the constructor (takes the write lock up front, waiting up to the busy
// timeout); rolls back in the destructor unless commit() was called.
class Transaction {
 public:
  explicit Transaction(Db& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  Db* db_;
  bool done_ = false;
};

namespace detail {
// Failures of the file (damaged, not a database, read-only, cannot open, disk full, I/O, locked)
// throw InputError with a plain one-line message naming `db`'s path; the rest (misuse, SQL
// errors, constraints: bugs) throw Error("file:line: what: <sqlite message>").
[[noreturn]] void throw_sqlite(const Db& db, int rc, const char* what, const char* file, int line);
}

}  // namespace lockstep::baseline

// LOCKSTEP_SQLITE(db, call): throws (see detail::throw_sqlite) unless `call` returns SQLITE_OK,
// SQLITE_ROW or SQLITE_DONE. `db` is the Db the call is about.
#define LOCKSTEP_SQLITE(db, call)                                                          \
  do {                                                                                     \
    const int lockstep_rc_ = (call);                                                       \
    if (lockstep_rc_ != 0 && lockstep_rc_ != 100 && lockstep_rc_ != 101)                   \
      ::lockstep::baseline::detail::throw_sqlite((db), lockstep_rc_, #call, __FILE__, __LINE__); \
  } while (0)
