// Tests of how the baseline store (harness/baseline/store.h) opens a file: every failure of the
// file is an InputError (exit 2) with a plain one-line message naming it, raised before any
// scenario runs, and a refused file is left byte for byte as it was, with no -wal or -shm file
// next to it. Foreign, empty, damaged, newer, read-only and full files; all-or-nothing imports.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "harness/baseline/sqlite.h"
#include "harness/baseline/store.h"
#include "harness/core/error.h"
#include "tests/test_util.h"

namespace lockstep::baseline {
namespace {

namespace fs = std::filesystem;

using lockstep::test::CliResult;
using lockstep::test::quote;
using lockstep::test::read_file;

// What a refused open must not change: the bytes of the file and which side files exist.
struct FileState {
  std::string bytes;
  bool wal = false, shm = false, journal = false;
  bool operator==(const FileState& o) const {
    return bytes == o.bytes && wal == o.wal && shm == o.shm && journal == o.journal;
  }
};

FileState state_of(const std::string& file) {
  return FileState{read_file(file), fs::exists(file + "-wal"), fs::exists(file + "-shm"), fs::exists(file + "-journal")};
}

#define EXPECT_UNCHANGED(before, file)                                                                   \
  do {                                                                                                   \
    const FileState after_ = state_of(file);                                                             \
    EXPECT_TRUE(after_.bytes == (before).bytes) << (file) << ": bytes changed";                         \
    EXPECT_FALSE(after_.wal && !(before).wal) << (file) << ": -wal left behind";                        \
    EXPECT_FALSE(after_.shm && !(before).shm) << (file) << ": -shm left behind";                        \
    EXPECT_FALSE(after_.journal && !(before).journal) << (file) << ": -journal left behind";            \
  } while (0)

// A message for the user: one line, naming `file`, without SQL or source locations.
void expect_plain(const std::string& message, const std::string& file) {
  EXPECT_CONTAINS(message, file);
  std::string text = message;
  if (!text.empty() && text.back() == '\n') text.pop_back();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 0) << text;
  for (const char* raw : {"SELECT", "INSERT", "PRAGMA", "CREATE", "BEGIN", "sqlite3_", ".cpp:"})
    EXPECT_EQ(text.find(raw), std::string::npos) << "raw '" << raw << "' in: " << text;
}

// The InputError message of `open` (fails the test when it does not throw one).
template <typename F>
std::string input_error_of(F&& open) {
  return test::message_of<InputError>(std::forward<F>(open));
}

// Runs `sql` on `file` through SQLite directly, not through the code under test.
void exec_raw(const std::string& file, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

// The first column of the first row of `sql` on `file`, through SQLite directly. Read-write (it
// only reads) so that closing removes the -wal and -shm files of a WAL file.
std::int64_t query_int(const std::string& file, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_stmt* st = nullptr;
  std::int64_t v = -1;
  if (sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK &&
      sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

Environment test_env(const std::string& name, const std::string& torch = "9.9.9") {
  return Environment{name, torch, "test", "none", "none", "GNU test", "test cpu", "none", "none", "abc123"};
}

report::RunSummary summary(int scenarios) {
  report::RunSummary run;
  run.started_at = "2026-01-01T00:00:00Z";
  for (int i = 0; i < scenarios; ++i) {
    report::ScenarioResult r;
    r.name = "t.s" + std::to_string(i);
    r.id = r.name;
    r.file = "t/s" + std::to_string(i) + ".toml";
    r.status = report::Status::kPass;
    r.expected = "pass";
    r.world_size = 2;
    r.digest = "digest of scenario " + std::to_string(i);
    r.duration_s = 0.1 * (i + 1);
    r.metrics = {{"items_per_s", 1e6 + i}, {"steps", 3}};
    run.results.push_back(r);
  }
  return run;
}

// A clean two-rank scenario (what `record` and `run` would run if the store let them).
constexpr const char* kScenario = R"(name = "store.small"
[run]
world_size = 2
[workload]
kind = "collectives"
steps = 1
count = 8
ops = ["all_reduce"]
[expect]
outcome = "pass"
)";

class StoreTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return tmp_ / name; }
  std::string write(const std::string& name, const std::string& text) { return tmp_.write(name, text); }
  // Runs `lockstep ARGS`, as another user when `prefix` is a setpriv command line.
  CliResult lockstep(const std::string& args, const std::string& prefix = "") {
    if (prefix.empty()) return lockstep::test::run_cli(LOCKSTEP_BINARY, args, dir_);
    const std::string out = dir_ + "/cli.stdout", err = dir_ + "/cli.stderr";
    const int status = std::system((prefix + quote(LOCKSTEP_BINARY) + " " + args + " >" + quote(out) + " 2>" + quote(err)).c_str());
    return CliResult{WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(out), read_file(err)};
  }
  // A baseline with environment "e" and `runs` runs of `scenarios` results, closed (no -wal).
  std::string make_store(const std::string& name, int runs = 2, int scenarios = 10) {
    const std::string file = path(name);
    Store store(file, Access::kCreate);
    for (int i = 0; i < runs; ++i) store.record(test_env("e"), summary(scenarios), dir_, i);
    return file;
  }
  // Expects `cmd` (a lockstep command taking --baseline) to exit 2 on `file` with a plain
  // message, before running any scenario, leaving the file as it was.
  void expect_refused(const std::string& cmd, const std::string& file, const std::string& needle,
                      const std::string& prefix = "") {
    const FileState before = state_of(file);
    const std::string report_dir = path("out/report_" + std::to_string(++calls_));
    const auto r = lockstep(cmd + " --baseline " + quote(file) + " --report-dir " + quote(report_dir), prefix);
    EXPECT_EQ(r.code, 2) << cmd << "\n" << r.out << r.err;
    expect_plain(r.err, file);
    EXPECT_CONTAINS(r.err, needle);
    EXPECT_FALSE(fs::exists(report_dir)) << cmd << ": a scenario ran: " << r.out;
    EXPECT_EQ(r.out.find("store.small"), std::string::npos) << cmd << ": a scenario ran: " << r.out;
    EXPECT_UNCHANGED(before, file);
  }
  lockstep::test::TempDir tmp_{"lockstep_store"};
  const std::string dir_ = tmp_.path();
  int calls_ = 0;
};

constexpr Access kAllAccess[] = {Access::kRead, Access::kWrite, Access::kCreate};

// ---------------------------------------------------------------------------------------------
// Foreign, empty, newer

TEST_F(StoreTest, ForeignSqliteFilesAreRefusedWithoutAWrite) {
  // Another application's files: rollback journal, WAL with an application_id, and WAL with a
  // user_version lockstep uses and only some of lockstep's table names.
  const std::string notes = path("notes.db");
  exec_raw(notes, "CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT); INSERT INTO notes VALUES(1, 'keep me');");
  const std::string app = path("app.db");
  exec_raw(app, "PRAGMA journal_mode = WAL; PRAGMA application_id = 4660; PRAGMA user_version = 1;"
                "CREATE TABLE t(x); INSERT INTO t VALUES(1);");
  const std::string lookalike = path("lookalike.db");
  exec_raw(lookalike, "PRAGMA journal_mode = WAL; PRAGMA user_version = 2; CREATE TABLE runs(x); CREATE TABLE results(y);");
  for (const std::string& file : {notes, app, lookalike}) {
    ASSERT_FALSE(fs::exists(file + "-wal")) << file;
    for (Access access : kAllAccess) {
      const FileState before = state_of(file);
      const std::string msg = input_error_of([&] { Store store(file, access); });
      expect_plain(msg, file);
      EXPECT_CONTAINS(msg, "not a lockstep baseline database");
      EXPECT_UNCHANGED(before, file);
    }
  }
  EXPECT_CONTAINS(input_error_of([&] { Store store(app, Access::kRead); }), "application_id 0x00001234");
  // Through the CLI: nothing runs, nothing changes.
  write("s/small.toml", kScenario);
  for (const std::string& file : {notes, app}) {
    expect_refused("record " + quote(path("s")) + " --repeat 1 --env fresh", file, "not a lockstep baseline database");
    expect_refused("run " + quote(path("s")) + " --repeat 1 --env fresh", file, "not a lockstep baseline database");
  }
}

TEST_F(StoreTest, EmptyFileIsRefusedAndAMissingOneIsCreatedComplete) {
  const std::string empty = write("empty.db", "");
  for (Access access : kAllAccess) {
    const std::string msg = input_error_of([&] { Store store(empty, access); });
    EXPECT_EQ(msg, empty + ": empty file, not a lockstep baseline; delete it or give a new path");
    EXPECT_EQ(fs::file_size(empty), 0u);
    EXPECT_FALSE(fs::exists(empty + "-wal") || fs::exists(empty + "-shm") || fs::exists(empty + "-journal"));
  }
  write("s/small.toml", kScenario);
  expect_refused("record " + quote(path("s")) + " --repeat 1 --env fresh", empty, "empty file");

  // A path that does not exist: refused for reading and writing, created by kCreate.
  const std::string fresh = path("fresh.db");
  EXPECT_EQ(input_error_of([&] { Store store(fresh, Access::kRead); }), fresh + ": no such baseline database");
  EXPECT_EQ(input_error_of([&] { Store store(fresh, Access::kWrite); }), fresh + ": no such baseline database");
  EXPECT_FALSE(fs::exists(fresh));
  { Store store(fresh, Access::kCreate); }
  // SQLite's file format: user_version at byte 60, application_id at 68, WAL when bytes 18 and 19 are 2.
  const std::string bytes = read_file(fresh);
  ASSERT_GE(bytes.size(), 100u);
  EXPECT_EQ(bytes.substr(0, 16), std::string("SQLite format 3\0", 16));
  EXPECT_EQ(bytes.substr(60, 4), std::string("\0\0\0\3", 4));
  EXPECT_EQ(bytes.substr(68, 4), "LkSt");
  EXPECT_EQ(bytes[18], 2);
  EXPECT_EQ(bytes[19], 2);
  EXPECT_EQ(query_int(fresh, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
                             "('environments', 'runs', 'results', 'sequences', 'sequence_calls', 'metric_samples', 'timelines',"
                             " 'sample_series')"),
            8);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"cli.stderr", "cli.stdout", "empty.db", "fresh.db", "s"}))
      << "no temporary or side file stays behind";
}

TEST_F(StoreTest, NewerSchemaIsRefusedWithoutAWrite) {
  const std::string file = path("future.db");
  exec_raw(file, "CREATE TABLE t(x); PRAGMA user_version = 99;");
  for (Access access : kAllAccess) {
    const FileState before = state_of(file);
    const std::string msg = input_error_of([&] { Store store(file, access); });
    expect_plain(msg, file);
    EXPECT_CONTAINS(msg, "schema version 99 is newer than this lockstep supports (3)");
    EXPECT_UNCHANGED(before, file);
  }
}

// ---------------------------------------------------------------------------------------------
// Damaged files

// How a test damages a pristine baseline. Offsets follow SQLite's file format: a 100-byte file
// header, then page 1's b-tree header; page n starts at (n - 1) * page_size.
enum class Damage { kTruncatedToHalf, kPageOneBtreeHeader, kIndexRootPage, kLastPage };

class StoreDamageTest : public StoreTest, public ::testing::WithParamInterface<Damage> {};

void damage(const std::string& file, Damage how) {
  const auto size = static_cast<std::int64_t>(fs::file_size(file));
  const std::int64_t page = query_int(file, "PRAGMA page_size");
  ASSERT_GT(page, 0);
  ASSERT_GT(size, 16 * page) << "the pristine baseline is big enough to damage a later page";
  if (how == Damage::kTruncatedToHalf) {
    fs::resize_file(file, static_cast<std::uintmax_t>(size / 2));
    return;
  }
  std::int64_t offset = 100;
  if (how == Damage::kIndexRootPage) {
    const std::int64_t root = query_int(file, "SELECT rootpage FROM sqlite_master WHERE name = 'results_scenario'");
    ASSERT_GT(root, 1);
    offset = (root - 1) * page;
  } else if (how == Damage::kLastPage) {
    offset = size - page;
  }
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(offset);
  const std::string garbage(64, '\xA5');
  f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
}

TEST_P(StoreDamageTest, IsRefusedOnOpenByEveryCommandBeforeAnythingRuns) {
  const std::string file = make_store("damaged.db", /*runs=*/20, /*scenarios=*/40);
  ASSERT_FALSE(fs::exists(file + "-wal"));
  damage(file, GetParam());
  for (Access access : kAllAccess) {
    const FileState before = state_of(file);
    const std::string msg = input_error_of([&] { Store store(file, access); });
    expect_plain(msg, file);
    EXPECT_CONTAINS(msg, "not a valid lockstep baseline database: the file is damaged");
    EXPECT_UNCHANGED(before, file);
  }
  write("s/small.toml", kScenario);
  const std::string s = quote(path("s"));
  const std::string damaged = "the file is damaged";
  expect_refused("run " + s + " --repeat 1 --env e", file, damaged);
  expect_refused("record " + s + " --repeat 1 --env e", file, damaged);
  for (const std::string& cmd : std::vector<std::string>{"report --out " + quote(path("rep")), "baseline export --out " + quote(path("x.json")),
                                 "compare --from e --to e", "baseline check"}) {
    const FileState before = state_of(file);
    const auto r = lockstep(cmd + " --baseline " + quote(file));
    EXPECT_EQ(r.code, 2) << cmd << "\n" << r.out << r.err;
    expect_plain(r.err, file);
    EXPECT_CONTAINS(r.err, damaged);
    EXPECT_UNCHANGED(before, file);
  }
  EXPECT_FALSE(fs::exists(path("rep/index.html")));
  EXPECT_FALSE(fs::exists(path("x.json")));
}

INSTANTIATE_TEST_SUITE_P(Corruptions, StoreDamageTest,
                         ::testing::Values(Damage::kTruncatedToHalf, Damage::kPageOneBtreeHeader,
                                           Damage::kIndexRootPage, Damage::kLastPage),
                         [](const ::testing::TestParamInfo<Damage>& info) {
                           switch (info.param) {
                             case Damage::kTruncatedToHalf: return std::string("TruncatedToHalf");
                             case Damage::kPageOneBtreeHeader: return std::string("PageOneBtreeHeader");
                             case Damage::kIndexRootPage: return std::string("IndexRootPage");
                             case Damage::kLastPage: return std::string("LastPage");
                           }
                           return std::string("Unknown");
                         });

// ---------------------------------------------------------------------------------------------
// Read-only files and directories, full disks

// A write through a read-only connection maps SQLITE_READONLY to a plain InputError (this is
// the path a read-only file takes; it works as root, where file modes do not stop writes).
TEST_F(StoreTest, WriteThroughAReadOnlyConnectionIsAnInputError) {
  const std::string file = make_store("b.db");
  const FileState before = state_of(file);
  {
    Db db(file, Db::Mode::kReadOnly);
    EXPECT_TRUE(db.read_only());
    const std::string msg = input_error_of([&] {
      Transaction tx(db);
      db.exec("INSERT INTO environments(name, torch, torch_line, cuda, nccl, compiler, cpu, gpu, driver, lockstep_rev)"
              " VALUES('x', '', '', '', '', '', '', '', '', '')");
    });
    expect_plain(msg, file);
    EXPECT_CONTAINS(msg, "read-only");
  }
  // A read-only connection to a WAL file cannot remove its -wal and -shm; only bytes count here.
  EXPECT_TRUE(read_file(file) == before.bytes);
}

TEST_F(StoreTest, ReadOnlyFileIsRefusedForWritingAndStillRead) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes through file modes; RecordAndImportRefuseReadOnlyFilesAndDirectories covers this as nobody";
  const std::string file = make_store("b.db");
  fs::permissions(file, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  for (Access access : {Access::kWrite, Access::kCreate}) {
    const FileState before = state_of(file);
    const std::string msg = input_error_of([&] { Store store(file, access); });
    expect_plain(msg, file);
    EXPECT_CONTAINS(msg, "read-only");
    EXPECT_UNCHANGED(before, file);
  }
  Store store(file, Access::kRead);
  EXPECT_EQ(store.runs().size(), 2u);
}

// `record` and `import` against a read-only file, or a file in a read-only directory (where WAL
// cannot create its -wal and -shm), exit 2 before running anything. Run as an unprivileged
// user: as root through setpriv (root ignores file modes).
TEST_F(StoreTest, RecordAndImportRefuseReadOnlyFilesAndDirectories) {
  std::string prefix;
  if (::geteuid() == 0) {
    prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
    if (std::system((prefix + "test -x " + quote(LOCKSTEP_BINARY) + " 2>/dev/null").c_str()) != 0)
      GTEST_SKIP() << "running as root, and setpriv cannot run " << LOCKSTEP_BINARY << " as nobody (65534)";
    // As nobody the binary must load the same LibTorch it was built against: one inside a
    // private home (the wheel line's ~/.cache under /root) is unreadable, and the dynamic
    // linker then finds another (Debian's) and complains on stderr.
    const std::string err = path("probe.stderr");
    const int rc = std::system((prefix + quote(LOCKSTEP_BINARY) + " --version >/dev/null 2>" + quote(err)).c_str());
    if (rc != 0 || !read_file(err).empty())
      GTEST_SKIP() << "running as root, and " << LOCKSTEP_BINARY << " does not run cleanly as nobody (65534): "
                   << read_file(err);
  }
  using fs::perms;
  const perms rx = perms::owner_read | perms::owner_exec | perms::group_read | perms::group_exec | perms::others_read |
                   perms::others_exec;
  fs::permissions(dir_, rx | perms::owner_write);
  fs::create_directories(path("out"));
  fs::permissions(path("out"), perms::all);
  write("s/small.toml", kScenario);
  fs::permissions(path("s"), rx | perms::owner_write);
  // The export of another baseline, to import.
  {
    Store other(path("other.db"), Access::kCreate);
    other.record(test_env("other"), summary(3), dir_, 0);
    write("out/other.json", other.export_text());
  }
  // A read-only file in a directory anyone may write.
  fs::create_directories(path("rofile"));
  const std::string ro_file = make_store("rofile/b.db");
  fs::permissions(path("rofile"), perms::all);
  fs::permissions(ro_file, perms::owner_read | perms::group_read | perms::others_read);
  // A file anyone may write in a directory nobody but its owner (root, or us with 0555) may.
  fs::create_directories(path("rodir"));
  const std::string ro_dir = make_store("rodir/b.db");
  fs::permissions(ro_dir, perms::owner_read | perms::owner_write | perms::group_read | perms::group_write |
                              perms::others_read | perms::others_write);
  fs::permissions(path("rodir"), rx);

  const std::string s = quote(path("s"));
  expect_refused("record " + s + " --repeat 1 --env fresh", ro_file, "read-only", prefix);
  expect_refused("record " + s + " --repeat 1 --env fresh", ro_dir, "is not writable", prefix);
  for (const std::string& file : {ro_file, ro_dir}) {
    const FileState before = state_of(file);
    const auto r = lockstep("baseline import --baseline " + quote(file) + " " + quote(path("out/other.json")), prefix);
    EXPECT_EQ(r.code, 2) << r.out << r.err;
    expect_plain(r.err, file);
    EXPECT_UNCHANGED(before, file);
  }
  // Reading a read-only baseline still works.
  const auto r = lockstep("report --baseline " + quote(ro_file) + " --out " + quote(path("out/rep")), prefix);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  fs::permissions(path("rodir"), perms::all);  // lets TempDir remove it when not root
}

TEST_F(StoreTest, FullDiskIsAnInputErrorAndRollsTheWriteBack) {
  const std::string file = make_store("b.db", /*runs=*/1);
  const FileState before = state_of(file);
  {
    Store store(file, Access::kWrite);
    // SQLite reports SQLITE_FULL when the file would outgrow max_page_count: a full disk.
    const std::int64_t pages = query_int(file, "PRAGMA page_count");
    ASSERT_GT(pages, 0);
    store.db().exec("PRAGMA max_page_count = " + std::to_string(pages));
    const std::string msg = input_error_of([&] { store.record(test_env("e2"), summary(400), dir_, 0); });
    expect_plain(msg, file);
    EXPECT_CONTAINS(msg, "disk is full");
    EXPECT_FALSE(store.environment("e2")) << "the environment row was rolled back with the run";
    EXPECT_EQ(store.runs().size(), 1u);
  }
  EXPECT_UNCHANGED(before, file);
}

// ---------------------------------------------------------------------------------------------
// Side files left by another user, and a nearly full disk (issue 32, item 3)

// A writer other than the owner of the side files: as root, nobody (65534) through setpriv, the
// side files staying root's; as another user, this user, the side files made read-only. Returns
// the skip reason, or "" with `prefix` set.
std::string other_writer(const std::string& binary, const std::string& scratch, std::string* prefix) {
  prefix->clear();
  if (::geteuid() != 0) return "";
  *prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
  const std::string err = scratch + "/probe.stderr";
  const int rc = std::system((*prefix + quote(binary) + " --version >/dev/null 2>" + quote(err)).c_str());
  if (rc != 0 || !read_file(err).empty())
    return "running as root, and " + binary + " does not run cleanly as nobody (65534) through setpriv: " + read_file(err);
  return "";
}

// The bytes of `file`, or "" when it is missing.
std::string bytes_of(const std::string& file) { return fs::exists(file) ? read_file(file) : std::string(); }

void put_bytes(const std::string& file, const std::string& bytes, fs::perms mode) {
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  fs::permissions(file, mode);
}

class SideFilesTest : public StoreTest {
 protected:
  // A baseline anyone may write in a folder anyone may write (no sticky bit), an export to
  // import, and the writer.
  std::string setup(std::string* skip) {
    *skip = other_writer(LOCKSTEP_BINARY, dir_, &prefix_);
    if (!skip->empty()) return "";
    using fs::perms;
    fs::permissions(dir_, perms::owner_all | perms::group_read | perms::group_exec | perms::others_read | perms::others_exec);
    fs::create_directories(path("shared"));
    fs::permissions(path("shared"), perms::all);
    const std::string file = make_store("shared/b.db");
    fs::permissions(file, perms::owner_read | perms::owner_write | perms::group_read | perms::group_write |
                              perms::others_read | perms::others_write);
    {
      Store other(path("other.db"), Access::kCreate);
      other.record(test_env("other"), summary(3), dir_, 0);
      write("other.json", other.export_text());
    }
    return file;
  }
  // The mode the side files get: as root they stay root's (0644); otherwise read-only.
  fs::perms side_mode() const {
    using fs::perms;
    return ::geteuid() == 0 ? perms::owner_read | perms::owner_write | perms::group_read | perms::others_read
                            : perms::owner_read | perms::group_read | perms::others_read;
  }
  CliResult import_into(const std::string& file) {
    return lockstep("baseline import --baseline " + quote(file) + " " + quote(path("other.json")), prefix_);
  }
  std::string prefix_;
};

// What the stale files hold is kept: a commit that is only in the -wal survives the recovery.
TEST_F(SideFilesTest, StaleShmAndWalOfAnotherUserAreReplacedAndTheWriteSucceeds) {
  std::string skip;
  const std::string file = setup(&skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  // Another user's session: a commit left in the -wal, and the -shm that indexes it, both theirs
  // and not writable by the writer; the database file as it was before any checkpoint.
  std::string db, wal, shm;
  {
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(file.c_str(), &h), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(h, "PRAGMA wal_autocheckpoint = 0; INSERT INTO environments(name, torch, torch_line, cuda, nccl, compiler, cpu, gpu, driver, lockstep_rev)"
                              " VALUES('only_in_the_wal', '', '', '', '', '', '', '', '', '')", nullptr, nullptr, nullptr), SQLITE_OK);
    db = read_file(file);
    wal = bytes_of(file + "-wal");
    shm = bytes_of(file + "-shm");
    sqlite3_close(h);
  }
  ASSERT_GT(wal.size(), 0u);
  ASSERT_GT(shm.size(), 0u);
  put_bytes(file, db, fs::status(file).permissions());
  put_bytes(file + "-wal", wal, side_mode());
  put_bytes(file + "-shm", shm, side_mode());

  const auto r = import_into(file);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(query_int(file, "SELECT count(*) FROM environments WHERE name = 'only_in_the_wal'"), 1) << "the -wal's commit was lost";
  EXPECT_EQ(query_int(file, "SELECT count(*) FROM runs"), 3) << "2 recorded + 1 imported";
}

TEST_F(SideFilesTest, StaleShmOfAnotherUserIsRemovedWhenNothingHasTheDatabaseOpen) {
  std::string skip;
  const std::string file = setup(&skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  std::string shm;
  {
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(file.c_str(), &h), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(h, "SELECT count(*) FROM runs", nullptr, nullptr, nullptr), SQLITE_OK);
    shm = bytes_of(file + "-shm");
    sqlite3_close(h);
  }
  ASSERT_GT(shm.size(), 0u);
  put_bytes(file + "-shm", shm, side_mode());
  const auto r = import_into(file);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.err.find("read-only"), std::string::npos) << r.err;
  EXPECT_EQ(query_int(file, "SELECT count(*) FROM runs"), 3);
}

// While another process has the database open, its -shm is in use: the writer is refused with a
// message naming the file, its owner and why, and nothing is removed.
TEST_F(SideFilesTest, UnwritableShmInUseByAnotherProcessIsNamedNotRemoved) {
  std::string skip;
  const std::string file = setup(&skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &h), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(h, "SELECT count(*) FROM runs", nullptr, nullptr, nullptr), SQLITE_OK);
  ASSERT_TRUE(fs::exists(file + "-shm"));
  fs::permissions(file + "-shm", side_mode());
  const auto r = import_into(file);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  expect_plain(r.err, file);
  EXPECT_CONTAINS(r.err, file + "-shm (owned by ");
  EXPECT_CONTAINS(r.err, "is not writable by this user");
  EXPECT_CONTAINS(r.err, "open in another process");
  EXPECT_TRUE(fs::exists(file + "-shm"));
  sqlite3_close(h);
  EXPECT_EQ(query_int(file, "SELECT count(*) FROM runs"), 2) << "nothing was imported";
}

// A small tmpfs, filled to `leave` bytes free (root only: mount).
class FullDiskTest : public StoreTest {
 protected:
  std::string mount_small(std::string* skip) {
    if (::geteuid() != 0) {
      *skip = "mounting a small tmpfs needs root";
      return "";
    }
    mnt_ = path("small");
    fs::create_directories(mnt_);
    if (::mount("tmpfs", mnt_.c_str(), "tmpfs", 0, "size=256k") != 0) {
      *skip = std::string("cannot mount a tmpfs here: ") + std::strerror(errno);
      mnt_.clear();
      return "";
    }
    return mnt_;
  }
  // Fills the filesystem of `dir` until at most `leave` bytes are free; returns what is free.
  static long long fill(const std::string& dir, long long leave) {
    std::ofstream f(dir + "/filler", std::ios::binary);
    const std::string page(4096, 'x');
    auto avail = [&] {
      struct statvfs v {};
      ::statvfs(dir.c_str(), &v);
      return static_cast<long long>(v.f_bavail) * static_cast<long long>(v.f_frsize);
    };
    while (avail() > leave && f.write(page.data(), static_cast<std::streamsize>(page.size()))) f.flush();
    return avail();
  }
  ~FullDiskTest() override {
    if (!mnt_.empty()) ::umount2(mnt_.c_str(), MNT_DETACH);
  }
  std::string mnt_;
};

TEST_F(FullDiskTest, UnderSixteenKibFreeIsTheDiskIsFullNotAnIoError) {
  std::string skip;
  const std::string dir = mount_small(&skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  const std::string file = make_store("small/b.db", /*runs=*/1, /*scenarios=*/3);
  const long long left = fill(dir, 12 * 1024);
  ASSERT_LT(left, 16 * 1024);
  const std::string before = read_file(file);
  const std::string msg = input_error_of([&] {
    Store store(file, Access::kWrite);
    store.record(test_env("e2"), summary(200), dir_, 0);
  });
  expect_plain(msg, file);
  EXPECT_CONTAINS(msg, "the disk is full (");
  EXPECT_CONTAINS(msg, " bytes free on " + dir + ")");
  EXPECT_EQ(msg.find("I/O error"), std::string::npos) << msg;
  EXPECT_TRUE(read_file(file) == before) << "the database changed";
}

TEST_F(FullDiskTest, NoSpaceAtAllIsTheDiskIsFullNamingZeroBytes) {
  std::string skip;
  const std::string dir = mount_small(&skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  const std::string file = make_store("small/b.db", /*runs=*/1, /*scenarios=*/3);
  ASSERT_EQ(fill(dir, 0), 0);
  const std::string msg = input_error_of([&] {
    Store store(file, Access::kWrite);
    store.record(test_env("e2"), summary(200), dir_, 0);
  });
  expect_plain(msg, file);
  EXPECT_CONTAINS(msg, "the disk is full (0 bytes free on " + dir + ")");
}

// ---------------------------------------------------------------------------------------------
// Imports are all or nothing

TEST_F(StoreTest, FailedImportLeavesTheDatabaseByteIdentical) {
  const std::string file = make_store("b.db", /*runs=*/1);
  // good.json: another environment and its run.
  {
    Store other(path("other.db"), Access::kCreate);
    other.record(test_env("e2"), summary(3), dir_, 0);
    write("good.json", other.export_text());
  }
  // conflict.json: a new environment, then "e" bound to another LibTorch than the database has.
  {
    Store other(path("conflict.db"), Access::kCreate);
    other.record(test_env("a_new"), summary(2), dir_, 0);
    other.record(test_env("e", /*torch=*/"1.0.0"), summary(2), dir_, 1);
    write("conflict.json", other.export_text());
  }
  // malformed.json: a valid environment, then a result without its digest.
  write("malformed.json", R"({"format": "lockstep-baseline", "schema_version": 2,
"environments": [{"name": "m", "torch": "1", "torch_line": "t", "cuda": "none", "nccl": "none", "compiler": "c",
                  "cpu": "c", "gpu": "none", "driver": "none", "lockstep_rev": "r"}],
"sequences": [],
"runs": [{"uid": "u-malformed", "environment": "m", "started_at": "2026-01-01T00:00:00Z", "kind": "record", "repeat": 0,
          "lockstep_rev": "r", "host": "h", "results": [{"scenario": "x", "name": "x", "file": "x.toml", "variant": "",
          "status": "pass", "expected": "pass", "diagnosis": "", "duration_s": 1, "world_size": 2, "sequence": "",
          "metrics": {}}]}]}
)");
  const FileState before = state_of(file);
  {
    Store store(file, Access::kWrite);
    const std::string msg = input_error_of([&] { store.import_text(read_file(path("conflict.json")), "conflict.json"); });
    EXPECT_CONTAINS(msg, "conflict.json: environment 'e' was recorded with LibTorch 9.9.9");
    EXPECT_FALSE(store.environment("a_new"));
    EXPECT_EQ(input_error_of([&] { store.import_text(read_file(path("malformed.json")), "malformed.json"); })
                  .rfind("malformed.json: malformed baseline export", 0),
              0u);
    EXPECT_FALSE(store.environment("m"));
  }
  EXPECT_UNCHANGED(before, file);
  // Through the CLI, several files are one import: good.json is not kept when another fails.
  for (const char* bad : {"conflict.json", "malformed.json"}) {
    const auto r = lockstep("baseline import --baseline " + quote(file) + " " + quote(path("good.json")) + " " +
                            quote(path(bad)));
    EXPECT_EQ(r.code, 2) << r.out << r.err;
    EXPECT_CONTAINS(r.err, bad);
    EXPECT_EQ(r.out.find("run(s) added"), std::string::npos) << r.out;
    EXPECT_UNCHANGED(before, file);
  }
  // A malformed export never creates the database it was to go into.
  const auto r = lockstep("baseline import --baseline " + quote(path("new.db")) + " " + quote(path("malformed.json")));
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_FALSE(fs::exists(path("new.db")));
  // And the good one alone goes in.
  const auto ok = lockstep("baseline import --baseline " + quote(file) + " " + quote(path("good.json")));
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_CONTAINS(ok.out, "good.json: 1 run(s) added");
}

}  // namespace
}  // namespace lockstep::baseline
