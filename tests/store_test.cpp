// Tests of how the baseline store (harness/baseline/store.h) opens a file: every failure of the
// file is an InputError (exit 2) with a plain one-line message naming it, raised before any
// scenario runs, and a refused file is left byte for byte as it was, with no -wal or -shm file
// next to it. Foreign, empty, damaged and newer files; all-or-nothing imports. Read-only files,
// other users' side files and full disks are tested in store_filesystem_test.cpp.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "harness/baseline/store.h"
#include "harness/core/error.h"
#include "tests/store_test_util.h"
#include "tests/test_util.h"

namespace lockstep::baseline {
namespace {

namespace fs = std::filesystem;

using lockstep::test::quote;
using lockstep::test::read_file;
using store_test::expect_plain;
using store_test::FileState;
using store_test::input_error_of;
using store_test::kScenario;
using store_test::query_int;
using store_test::state_of;
using store_test::StoreTest;
using store_test::summary;
using store_test::test_env;

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
  EXPECT_EQ(bytes.substr(60, 4), std::string("\0\0\0\6", 4));
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
    EXPECT_CONTAINS(msg, "schema version 99 is newer than this lockstep supports (6)");
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
