#include "harness/baseline/sqlite.h"

#include <sqlite3.h>

#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "harness/baseline/store_file.h"
#include "harness/core/error.h"

namespace lockstep::baseline {

static_assert(SQLITE_ROW == 100 && SQLITE_DONE == 101, "LOCKSTEP_SQLITE assumes these codes");

namespace {

// An I/O error with less than this free on the database's filesystem is taken for a full disk
// (SQLite reports a full disk met while growing its -shm as an I/O error).
constexpr unsigned long long kNearlyFullBytes = 1u << 20;

std::string dir_of(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

// Bytes an unprivileged writer may still use on the filesystem of `dir`; -1 when unknown.
long long free_bytes(const std::string& dir) {
  struct statvfs v {};
  if (::statvfs(dir.c_str(), &v) != 0) return -1;
  return static_cast<long long>(v.f_bavail) * static_cast<long long>(v.f_frsize);
}

std::string disk_full(const std::string& path, long long free) {
  const std::string dir = dir_of(path);
  return path + ": the disk is full (" + (free >= 0 ? std::to_string(free) : std::string("unknown")) + " bytes free on " + dir +
         "); the write was rolled back: free space on " + dir + " and run the command again";
}

}  // namespace

namespace detail {
void throw_sqlite(const Db& db, int rc, const char* what, const char* file, int line) {
  const std::string& path = db.path();
  sqlite3* const handle = db.handle();
  const int sys_errno = handle ? sqlite3_system_errno(handle) : 0;
  switch (rc & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      throw InputError(path + ": not a valid lockstep baseline database: the file is damaged (" + sqlite3_errstr(rc) +
                       "); restore it from a backup or a text export (lockstep baseline import)");
    case SQLITE_FULL:
      throw InputError(disk_full(path, free_bytes(dir_of(path))));
    case SQLITE_READONLY:
      // A -wal or -shm file this user cannot write makes SQLite open the database read-only.
      if (const std::string why = file::side_file_problem(path); !why.empty()) throw InputError(path + ": cannot write: " + why);
      throw InputError(path + ": cannot write: the baseline database, its directory or its filesystem is read-only");
    case SQLITE_CANTOPEN:
      throw InputError(path + ": cannot open the baseline database or its -wal, -shm or -journal file next to it"
                              " (is its directory writable?)");
    case SQLITE_PERM:
    case SQLITE_AUTH:
      throw InputError(path + ": access to the baseline database was denied");
    case SQLITE_IOERR: {
      const long long free = free_bytes(dir_of(path));
      if (sys_errno == ENOSPC || sys_errno == EDQUOT || (free >= 0 && free < static_cast<long long>(kNearlyFullBytes))) {
        throw InputError(disk_full(path, free));
      }
      throw InputError(path + ": I/O error on the baseline database (" + sqlite3_errstr(rc) +
                       (sys_errno ? std::string(": ") + std::strerror(sys_errno) : std::string()) + ")");
    }
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      throw InputError(path + ": the baseline database stayed locked by another process for longer than the busy timeout");
    default:
      break;
  }
  const char* base = std::strrchr(file, '/');
  sqlite3* h = db.handle();
  throw Error(lockstep::detail::concat(base ? base + 1 : file, ":", line, ": ", what, ": ",
                                       h ? sqlite3_errmsg(h) : sqlite3_errstr(rc), " (", sqlite3_errstr(rc), ")"));
}
}  // namespace detail

Db::Db(const std::string& path, Mode mode) : path_(path) {
  int flags = SQLITE_OPEN_NOMUTEX;
  if (mode == Mode::kReadOnly) flags |= SQLITE_OPEN_READONLY;
  else flags |= SQLITE_OPEN_READWRITE | (mode == Mode::kCreate ? SQLITE_OPEN_CREATE : 0);
  const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_close(db_);
    db_ = nullptr;
    detail::throw_sqlite(*this, rc, "sqlite3_open_v2", __FILE__, __LINE__);
  }
  sqlite3_extended_result_codes(db_, 1);
  LOCKSTEP_SQLITE(*this, sqlite3_busy_timeout(db_, 60000));
}

Db::~Db() {
  if (db_) sqlite3_close_v2(db_);
}

Db::Db(Db&& other) noexcept : db_(std::exchange(other.db_, nullptr)), path_(std::move(other.path_)) {}

Db& Db::operator=(Db&& other) noexcept {
  if (this != &other) {
    if (db_) sqlite3_close_v2(db_);
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

void Db::exec(const std::string& sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    sqlite3_free(err);
    detail::throw_sqlite(*this, rc, sql.substr(0, 60).c_str(), __FILE__, __LINE__);
  }
}

std::int64_t Db::last_insert_id() const { return sqlite3_last_insert_rowid(db_); }

bool Db::read_only() const { return sqlite3_db_readonly(db_, "main") == 1; }

Statement::Statement(const Db& db, std::string_view sql) : db_(&db) {
  LOCKSTEP_SQLITE(db, sqlite3_prepare_v2(db.handle(), sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr));
}

Statement::~Statement() {
  if (stmt_) sqlite3_finalize(stmt_);
}

Statement::Statement(Statement&& other) noexcept : db_(other.db_), stmt_(std::exchange(other.stmt_, nullptr)) {}

Statement& Statement::bind(int index, std::int64_t value) {
  LOCKSTEP_SQLITE(*db_, sqlite3_bind_int64(stmt_, index, value));
  return *this;
}
Statement& Statement::bind(int index, double value) {
  LOCKSTEP_SQLITE(*db_, sqlite3_bind_double(stmt_, index, value));
  return *this;
}
Statement& Statement::bind(int index, std::string_view value) {
  LOCKSTEP_SQLITE(*db_, sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT));
  return *this;
}
Statement& Statement::bind_blob(int index, std::string_view bytes) {
  LOCKSTEP_SQLITE(*db_, sqlite3_bind_blob64(stmt_, index, bytes.data(), bytes.size(), SQLITE_TRANSIENT));
  return *this;
}
Statement& Statement::bind_null(int index) {
  LOCKSTEP_SQLITE(*db_, sqlite3_bind_null(stmt_, index));
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  detail::throw_sqlite(*db_, rc, sqlite3_sql(stmt_), __FILE__, __LINE__);
}

void Statement::run() {
  while (step()) {
  }
  reset();
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::int64_t Statement::int64(int column) const { return sqlite3_column_int64(stmt_, column); }
double Statement::real(int column) const { return sqlite3_column_double(stmt_, column); }
std::string Statement::text(int column) const {
  const auto* p = sqlite3_column_text(stmt_, column);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)))
           : std::string();
}
std::string Statement::blob(int column) const {
  const void* p = sqlite3_column_blob(stmt_, column);
  return p ? std::string(static_cast<const char*>(p), static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column))) : std::string();
}
bool Statement::is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }

Transaction::Transaction(Db& db) : db_(&db) { db.exec("BEGIN IMMEDIATE"); }

Transaction::~Transaction() {
  if (!done_) sqlite3_exec(db_->handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  db_->exec("COMMIT");
  done_ = true;
}

}  // namespace lockstep::baseline
