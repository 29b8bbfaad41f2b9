// The baseline database as a file: schema, migrations, and the checks made before and after
// opening it (store_file.h).
#include "harness/baseline/store_file.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <vector>

#include "harness/core/error.h"

namespace lockstep::baseline::file {
namespace {

namespace fs = std::filesystem;

// Version 1: environments, runs, results, sequences, metric samples.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE environments(
  id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, torch TEXT NOT NULL, torch_line TEXT NOT NULL,
  cuda TEXT NOT NULL, nccl TEXT NOT NULL, compiler TEXT NOT NULL, cpu TEXT NOT NULL, gpu TEXT NOT NULL,
  driver TEXT NOT NULL, lockstep_rev TEXT NOT NULL);
CREATE TABLE runs(
  id INTEGER PRIMARY KEY, uid TEXT NOT NULL UNIQUE, env_id INTEGER NOT NULL REFERENCES environments(id),
  started_at TEXT NOT NULL, kind TEXT NOT NULL, repeat INTEGER NOT NULL, lockstep_rev TEXT NOT NULL);
CREATE TABLE sequences(id INTEGER PRIMARY KEY, hash TEXT NOT NULL UNIQUE, ranks INTEGER NOT NULL);
CREATE TABLE sequence_calls(
  sequence_id INTEGER NOT NULL REFERENCES sequences(id), rank INTEGER NOT NULL, pos INTEGER NOT NULL,
  seq INTEGER NOT NULL, kind TEXT NOT NULL, op TEXT NOT NULL, dtype TEXT NOT NULL, count INTEGER NOT NULL,
  device TEXT NOT NULL, reduce TEXT NOT NULL, root INTEGER NOT NULL, peer INTEGER NOT NULL,
  tag INTEGER NOT NULL, send_counts TEXT NOT NULL, recv_counts TEXT NOT NULL, phase TEXT NOT NULL,
  step INTEGER NOT NULL, call_index INTEGER NOT NULL, wire TEXT NOT NULL,
  PRIMARY KEY(sequence_id, rank, pos)) WITHOUT ROWID;
CREATE TABLE results(
  id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id), scenario TEXT NOT NULL,
  name TEXT NOT NULL, file TEXT NOT NULL, variant TEXT NOT NULL, status TEXT NOT NULL,
  expected TEXT NOT NULL, diagnosis TEXT NOT NULL, digest TEXT NOT NULL, duration_s REAL NOT NULL,
  world_size INTEGER NOT NULL, sequence_id INTEGER REFERENCES sequences(id), UNIQUE(run_id, scenario));
CREATE TABLE metric_samples(
  result_id INTEGER NOT NULL REFERENCES results(id), name TEXT NOT NULL, value REAL NOT NULL,
  PRIMARY KEY(result_id, name)) WITHOUT ROWID;
)sql";

// Version 2: the host a run was recorded on, per-rank collective timelines, a scenario index.
constexpr const char* kMigrateV2 = R"sql(
ALTER TABLE runs ADD COLUMN host TEXT NOT NULL DEFAULT '';
CREATE TABLE timelines(result_id INTEGER PRIMARY KEY REFERENCES results(id), spans TEXT NOT NULL);
CREATE INDEX results_scenario ON results(scenario);
)sql";

// Version 3: per-iteration samples, the verdicts of checks, the environment's counters.
constexpr const char* kMigrateV3 = R"sql(
CREATE TABLE sample_series(
  result_id INTEGER NOT NULL REFERENCES results(id), name TEXT NOT NULL, vals TEXT NOT NULL,
  PRIMARY KEY(result_id, name)) WITHOUT ROWID;
ALTER TABLE results ADD COLUMN verdict TEXT NOT NULL DEFAULT '';
ALTER TABLE results ADD COLUMN verdict_detail TEXT NOT NULL DEFAULT '';
ALTER TABLE environments ADD COLUMN counters TEXT NOT NULL DEFAULT '';
)sql";

// Version 4: the process group of a program's call on a group other than the default one; what
// each result ran on (a program's torch, a system's packages).
constexpr const char* kMigrateV4 = R"sql(
ALTER TABLE sequence_calls ADD COLUMN grp TEXT NOT NULL DEFAULT '';
ALTER TABLE results ADD COLUMN system TEXT NOT NULL DEFAULT '';
)sql";

// Version 5: the call-field table's rows after root, peer and tag (harness/trace/call_fields.h),
// "name=value" pairs joined by ';' for those set; a row added to the table needs no migration.
constexpr const char* kMigrateV5 = R"sql(
ALTER TABLE sequence_calls ADD COLUMN fields TEXT NOT NULL DEFAULT '';
)sql";

// Version 6: a result's [compare] tolerances; its numbers beyond the digest (kind "tensor": a
// parameter, shape "2x3", dtype; kind "curve": a logged curve, its steps in `shape` as "0,1,..."),
// values as little-endian float64, NULL for a tensor listed without them.
constexpr const char* kMigrateV6 = R"sql(
ALTER TABLE results ADD COLUMN tolerances TEXT NOT NULL DEFAULT '';
CREATE TABLE numerics(
  result_id INTEGER NOT NULL REFERENCES results(id), pos INTEGER NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL,
  shape TEXT NOT NULL, dtype TEXT NOT NULL, vals BLOB, PRIMARY KEY(result_id, pos)) WITHOUT ROWID;
)sql";

std::int64_t pragma_int(const Db& db, const char* pragma) {
  Statement st(db, std::string("PRAGMA ") + pragma);
  st.step();
  return st.int64(0);
}

std::string foreign(const std::string& path, const std::string& what) {
  return path + ": not a lockstep baseline database: " + what + "; give a new path";
}

std::uint32_t big_endian32(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}

// Refuses, from the 100-byte SQLite header alone (nothing opens the file for writing), a file
// that is empty, not SQLite, of another application or newer than this binary. The version and
// application_id are only judged when no -wal file holds commits newer than the header.
void check_header(const std::string& path) {
  unsigned char h[100];
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(path + ": cannot read the baseline database (" + std::strerror(errno) + ")");
  ssize_t got = 0;
  while (got < static_cast<ssize_t>(sizeof h)) {
    const ssize_t n = ::read(fd, h + got, sizeof h - static_cast<std::size_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += n;
  }
  ::close(fd);
  if (got == 0) throw InputError(path + ": empty file, not a lockstep baseline; delete it or give a new path");
  if (got < static_cast<ssize_t>(sizeof h) || std::memcmp(h, "SQLite format 3", 16) != 0)
    throw InputError(path + ": not a valid lockstep baseline database: not a SQLite database file");
  std::error_code ec;
  const auto wal_size = fs::file_size(path + "-wal", ec);
  if (!ec && wal_size > 0) return;
  const std::uint32_t user_version = big_endian32(h + 60);
  const std::uint32_t application_id = big_endian32(h + 68);
  if (application_id != 0 && application_id != static_cast<std::uint32_t>(kApplicationId)) {
    char id[16];
    std::snprintf(id, sizeof id, "0x%08x", application_id);
    throw InputError(foreign(path, std::string("a SQLite database of another application (application_id ") + id + ")"));
  }
  refuse_newer(path, user_version);
  if (user_version == 0) throw InputError(foreign(path, "a SQLite database without lockstep's tables"));
}

// The same checks on the open connection (authoritative: a WAL file's header may lag), then
// lockstep's tables and PRAGMA quick_check. Reads only.
void check_content(const Db& db) {
  const std::string& path = db.path();
  const std::int64_t application_id = pragma_int(db, "application_id");
  if (application_id != 0 && application_id != kApplicationId)
    throw InputError(foreign(path, "a SQLite database of another application"));
  const std::int64_t version = pragma_int(db, "user_version");
  refuse_newer(path, version);
  std::set<std::string> missing = {"environments", "runs", "sequences", "sequence_calls", "results", "metric_samples"};
  if (version >= 2) missing.insert("timelines");
  {
    Statement st(db, "SELECT name FROM sqlite_master WHERE type = 'table'");
    while (st.step()) missing.erase(st.text(0));
  }
  if (version == 0 || !missing.empty()) throw InputError(foreign(path, "a SQLite database without lockstep's tables"));
  std::vector<std::string> problems;
  {
    Statement st(db, "PRAGMA quick_check");
    while (st.step()) {
      std::string line = st.text(0);
      // The first problem comes after a "*** in database main ***" line.
      if (line.rfind("***", 0) == 0) line.erase(0, line.find('\n') == std::string::npos ? line.size() : line.find('\n') + 1);
      if (line != "ok" && !line.empty()) problems.push_back(line);
    }
  }
  if (!problems.empty()) {
    std::string first = problems.front();
    std::replace(first.begin(), first.end(), '\n', ' ');
    throw InputError(path + ": not a valid lockstep baseline database: the file is damaged (SQLite's quick check: " +
                     first + (problems.size() > 1 ? ", and " + std::to_string(problems.size() - 1) + " more" : "") +
                     "); restore it from a backup or a text export (lockstep baseline import)");
  }
}

bool writable(const std::string& path, std::string* why) {
  if (::access(path.c_str(), W_OK) != 0) {
    *why = path + ": the baseline database is read-only (" + std::strerror(errno) + "); this command writes to it";
    return false;
  }
  std::string dir = fs::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    *why = path + ": its directory " + dir + " is not writable (" + std::strerror(errno) +
           "); writing needs " + path + "-wal and " + path + "-shm next to it";
    return false;
  }
  return true;
}

// Removes the -wal and -shm files an open of `path` left behind (a read-only connection to a
// WAL file cannot delete them on close) when they were not there before and hold no data.
void remove_side_files(const std::string& path, bool had_wal, bool had_shm) {
  std::error_code ec;
  const std::string wal = path + "-wal", shm = path + "-shm";
  if (!had_wal && fs::exists(wal, ec) && fs::file_size(wal, ec) == 0) fs::remove(wal, ec);
  if (!had_shm && !fs::exists(wal, ec)) fs::remove(shm, ec);
}

// "user (uid N)" of `uid`.
std::string user_name(uid_t uid) {
  const passwd* pw = ::getpwuid(uid);
  return (pw ? std::string(pw->pw_name) + " " : std::string()) + "(uid " + std::to_string(uid) + ")";
}

std::string mode_text(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

// A side file this user cannot use, with what lstat said of it.
struct SideFile {
  std::string file;
  struct stat st {};
  bool regular() const { return S_ISREG(st.st_mode); }
  std::string describe() const {
    return file + " (owned by " + user_name(st.st_uid) + ", mode " + mode_text(st.st_mode) + ", " +
           std::to_string(static_cast<long long>(st.st_size)) + " bytes)";
  }
};

std::vector<SideFile> unusable_side_files(const std::string& path) {
  std::vector<SideFile> out;
  for (const char* suffix : {"-shm", "-wal"}) {
    SideFile f{path + suffix};
    if (::lstat(f.file.c_str(), &f.st) != 0) continue;
    if (f.regular() && ::access(f.file.c_str(), R_OK | W_OK) == 0) continue;
    out.push_back(f);
  }
  return out;
}

// What to do about `f`, which this user cannot write.
std::string unusable_text(const SideFile& f, const std::string& what_then) {
  if (!f.regular()) return f.file + " is not a regular file: remove it (no process may have the database open)";
  return f.describe() + " is not writable by this user, " + user_name(::geteuid()) +
         ", so SQLite would open the database read-only (another user's access to the database created it); " + what_then;
}

// SQLite's lock bytes in the main database file (os_unix.c: PENDING_BYTE, then the RESERVED byte
// and the 510-byte SHARED range). Every open connection of a WAL database holds a SHARED lock.
constexpr off_t kPendingByte = 0x40000000;
constexpr off_t kLockBytes = 512;

}  // namespace

std::string side_file_problem(const std::string& path) {
  const auto bad = unusable_side_files(path);
  if (bad.empty()) return "";
  return unusable_text(bad.front(), "ask its owner or root to remove it while no process has the database open, or to make it writable (chmod a+rw " + bad.front().file + ")");
}

void recover_side_files(const std::string& path) {
  const auto bad = unusable_side_files(path);
  if (bad.empty()) return;
  for (const auto& f : bad) {
    if (!f.regular()) throw InputError(path + ": cannot write: " + unusable_text(f, ""));
  }
  // An open file description lock conflicts with SQLite's record locks, even this process's own.
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) throw InputError(path + ": cannot open the baseline database (" + std::strerror(errno) + ")");
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = kPendingByte;
  lock.l_len = kLockBytes;
  if (::fcntl(fd, F_OFD_SETLK, &lock) != 0) {
    const int err = errno;
    ::close(fd);
    throw InputError(path + ": cannot write: " +
                     unusable_text(bad.front(), std::string("it cannot be replaced now because the database is open in another process") +
                                                    (err == EAGAIN || err == EACCES ? "" : std::string(" (") + std::strerror(err) + ")") +
                                                    ": run the command again once it has closed, or ask its owner or root to make it writable (chmod a+rw " +
                                                    bad.front().file + ")"));
  }
  std::string failed;
  for (const auto& f : bad) {
    const bool is_wal = f.file.size() > 4 && f.file.compare(f.file.size() - 4, 4, "-wal") == 0;
    if (!is_wal || f.st.st_size == 0) {
      if (::unlink(f.file.c_str()) != 0) {
        failed = unusable_text(f, std::string("removing it failed (") + std::strerror(errno) +
                                      "; a directory with the sticky bit lets only a file's owner remove it): ask its owner or root to remove it "
                                      "while no process has the database open, or to make it writable (chmod a+rw " + f.file + ")");
      }
    } else {
      // The -wal may hold commits not yet in the database: replace it by a copy this user owns.
      std::string tmp = f.file + ".tmp-XXXXXX";
      const int out = ::mkstemp(tmp.data());
      const int in = out >= 0 ? ::open(f.file.c_str(), O_RDONLY | O_CLOEXEC) : -1;
      bool ok = out >= 0 && in >= 0;
      char buf[1 << 16];
      while (ok) {
        const ssize_t n = ::read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          ok = n == 0;
          break;
        }
        for (ssize_t done = 0; ok && done < n;) {
          const ssize_t w = ::write(out, buf + done, static_cast<std::size_t>(n - done));
          if (w < 0 && errno == EINTR) continue;
          ok = w > 0;
          if (ok) done += w;
        }
      }
      ok = ok && ::fchmod(out, f.st.st_mode & 0666) == 0 && ::fsync(out) == 0;
      const int err = errno;
      if (in >= 0) ::close(in);
      if (out >= 0) ::close(out);
      if (ok && ::rename(tmp.c_str(), f.file.c_str()) == 0) continue;
      const int why = ok ? errno : err;
      if (out >= 0) ::unlink(tmp.c_str());
      failed = unusable_text(f, std::string("replacing it by a copy this user owns failed (") + std::strerror(why) +
                                    "): ask its owner or root to make it writable (chmod a+rw " + f.file + ")");
    }
    if (!failed.empty()) break;
  }
  ::close(fd);  // releases the lock
  if (!failed.empty()) throw InputError(path + ": cannot write: " + failed);
}

void enable_wal(const Db& db) {
  Statement mode(db, "PRAGMA journal_mode = WAL");
  mode.step();
}

void refuse_newer(const std::string& path, std::int64_t version) {
  if (version > kSchemaVersion) {
    throw InputError(path + ": baseline schema version " + std::to_string(version) +
                     " is newer than this lockstep supports (" + std::to_string(kSchemaVersion) +
                     "); use a newer lockstep");
  }
}

// Brings a database of schema `version` (0: empty) to kSchemaVersion, inside the caller's
// transaction.
void upgrade(Db& db, int version) {
  if (version == 0) {
    db.exec(kSchemaV1);
    version = 1;
  }
  if (version == 1) {
    db.exec(kMigrateV2);
    version = 2;
  }
  if (version == 2) {
    db.exec(kMigrateV3);
    version = 3;
  }
  if (version == 3) {
    db.exec(kMigrateV4);
    version = 4;
  }
  if (version == 4) {
    db.exec(kMigrateV5);
    version = 5;
  }
  if (version == 5) {
    db.exec(kMigrateV6);
    version = 6;
  }
  db.exec("PRAGMA user_version = " + std::to_string(version));
  db.exec("PRAGMA application_id = " + std::to_string(kApplicationId));
}

namespace {

// Creates a complete baseline database at `path` (schema, application_id, WAL) unless a file
// appears there meanwhile: it is built under a temporary name and hard-linked into place, so no
// process ever sees a partly written file.
void create_new(const std::string& path) {
  std::string dir = fs::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  std::string tmp = (fs::path(dir) / (fs::path(path).filename().string() + ".tmp-XXXXXX")).string();
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) throw InputError(path + ": cannot create the baseline database (" + std::strerror(errno) + ")");
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  ::close(fd);
  try {
    Db db(tmp, Db::Mode::kReadWrite);
    Transaction tx(db);
    upgrade(db, 0);
    tx.commit();
    enable_wal(db);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  const int rc = ::link(tmp.c_str(), path.c_str());
  const int err = errno;
  ::unlink(tmp.c_str());
  if (rc != 0 && err != EEXIST)
    throw InputError(path + ": cannot create the baseline database (" + std::strerror(err) + ")");
}

}  // namespace

// Checks `path` for `access` and returns a connection to it; see Store::Store.
Db open_checked(const std::string& path, Access access) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    if (access != Access::kCreate) throw InputError(path + ": no such baseline database");
    create_new(path);
  }
  if (!fs::is_regular_file(path, ec)) throw InputError(path + ": not a regular file");
  check_header(path);
  std::string why;
  const bool can_write = writable(path, &why);
  if (access != Access::kRead && !can_write) throw InputError(why);
  if (access != Access::kRead) recover_side_files(path);
  const bool had_wal = fs::exists(path + "-wal", ec), had_shm = fs::exists(path + "-shm", ec);
  try {
    // Read-write when allowed even for reading, so that closing removes the -wal and -shm files.
    Db db(path, can_write ? Db::Mode::kReadWrite : Db::Mode::kReadOnly);
    check_content(db);
    if (access != Access::kRead) {
      if (db.read_only()) throw InputError(path + ": the baseline database is read-only; this command writes to it");
      enable_wal(db);
    }
    return db;
  } catch (...) {
    remove_side_files(path, had_wal, had_shm);
    throw;
  }
}

}  // namespace lockstep::baseline::file
