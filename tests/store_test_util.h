#pragma once
// The fixture and helpers of the baseline store's tests (store_test.cpp: foreign, empty, newer
// and damaged files, all-or-nothing imports; store_filesystem_test.cpp: read-only files, other
// users' side files, full disks): what a refused open must leave unchanged, plain messages, a
// baseline made for the test, and `lockstep` run on it.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>

#include "harness/baseline/store.h"
#include "harness/core/error.h"
#include "tests/test_util.h"

namespace lockstep::baseline::store_test {

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

inline FileState state_of(const std::string& file) {
  return FileState{read_file(file), fs::exists(file + "-wal"), fs::exists(file + "-shm"), fs::exists(file + "-journal")};
}

#define EXPECT_UNCHANGED(before, file)                                                                           \
  do {                                                                                                           \
    const ::lockstep::baseline::store_test::FileState after_ = ::lockstep::baseline::store_test::state_of(file); \
    EXPECT_TRUE(after_.bytes == (before).bytes) << (file) << ": bytes changed";                                  \
    EXPECT_FALSE(after_.wal && !(before).wal) << (file) << ": -wal left behind";                                 \
    EXPECT_FALSE(after_.shm && !(before).shm) << (file) << ": -shm left behind";                                 \
    EXPECT_FALSE(after_.journal && !(before).journal) << (file) << ": -journal left behind";                     \
  } while (0)

// A message for the user: one line, naming `file`, without SQL or source locations.
inline void expect_plain(const std::string& message, const std::string& file) {
  EXPECT_CONTAINS(message, file);
  std::string text = message;
  if (!text.empty() && text.back() == '\n') text.pop_back();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 0) << text;
  for (const char* raw : {"SELECT", "INSERT", "PRAGMA", "CREATE", "BEGIN", "sqlite3_", ".cpp:"})
    EXPECT_EQ(text.find(raw), std::string::npos) << "raw '" << raw << "' in: " << text;
}

// The InputError message of `open` (fails the test when it does not throw one).
template <typename F>
inline std::string input_error_of(F&& open) {
  return test::message_of<InputError>(std::forward<F>(open));
}

// The first column of the first row of `sql` on `file`, through SQLite directly. Read-write (it
// only reads) so that closing removes the -wal and -shm files of a WAL file.
inline std::int64_t query_int(const std::string& file, const std::string& sql) {
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

inline Environment test_env(const std::string& name, const std::string& torch = "9.9.9") {
  return Environment{name, torch, "test", "none", "none", "GNU test", "test cpu", "none", "none", "abc123", /*counters=*/""};
}

inline report::RunSummary summary(int scenarios) {
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
inline constexpr const char* kScenario = R"(name = "store.small"
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

}  // namespace lockstep::baseline::store_test
