// Tests of the baseline store (harness/baseline/): schema migration, concurrent writers,
// damaged and newer databases (through the CLI binary: exit 2 and a clear message), the text
// export round trip, the sequence and digest checks of `lockstep run --baseline` end to end, and
// the report. The throughput rule itself: throughput_rule_test.cpp.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/baseline/check.h"
#include "harness/baseline/report.h"
#include "harness/rules/stats.h"
#include "harness/baseline/store.h"
#include "harness/core/error.h"
#include "tests/test_util.h"

namespace lockstep::baseline {
namespace {

namespace fs = std::filesystem;

using lockstep::test::CliResult;
using lockstep::test::quote;

class BaselineTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return tmp_ / name; }
  std::string write(const std::string& name, const std::string& text) { return tmp_.write(name, text); }
  CliResult lockstep(const std::string& args) { return lockstep::test::run_cli(LOCKSTEP_BINARY, args, dir_); }
  lockstep::test::TempDir tmp_{"lockstep_baseline"};
  const std::string dir_ = tmp_.path();
};

Environment test_env(const std::string& name) {
  return Environment{name, "9.9.9", "test", "none", "none", "GNU test", "test cpu", "none", "none", "abc123", ""};
}

// A hand-written two-rank trace: step s issues an all_reduce of `dtype` and a barrier.
void write_trace(const std::string& dir, const std::string& rank1_dtype_at_step1 = "f32") {
  fs::create_directories(dir);
  for (int r = 0; r < 2; ++r) {
    std::ofstream out(dir + "/rank" + std::to_string(r) + ".trace.jsonl");
    int seq = 0;
    for (int step = 0; step < 3; ++step) {
      const std::string dtype = (r == 1 && step == 1) ? rank1_dtype_at_step1 : "f32";
      out << "{\"rank\":" << r << ",\"seq\":" << seq++ << ",\"kind\":\"collective\",\"op\":\"all_reduce\",\"dtype\":\""
          << dtype << "\",\"count\":64,\"device\":\"cpu\",\"bytes\":256,\"reduce\":\"sum\",\"phase\":\"train\",\"step\":"
          << step << ",\"index\":0,\"t_start_us\":" << 1000 * step << ",\"t_end_us\":" << 1000 * step + 400 << "}\n";
      out << "{\"rank\":" << r << ",\"seq\":" << seq++
          << ",\"kind\":\"collective\",\"op\":\"barrier\",\"bytes\":0,\"phase\":\"train\",\"step\":" << step
          << ",\"index\":1,\"t_start_us\":" << 1000 * step + 500 << ",\"t_end_us\":" << 1000 * step + 600 << "}\n";
    }
  }
}

report::RunSummary summary(int scenarios, double metric_scale, const std::string& artifacts = "") {
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
    r.digest = "d" + std::to_string(i);
    r.duration_s = 0.1 * (i + 1);
    r.metrics = {{"items_per_s", 1e6 * metric_scale}, {"steps", 3}, {"odd", 0.1 + 1e-17 * i}};
    r.artifacts = i == 0 ? artifacts : "";
    run.results.push_back(r);
  }
  return run;
}

// ---------------------------------------------------------------------------------------------
// Schema and store

// The version-1 schema as it shipped, written here independently of the code under test.
constexpr const char* kV1 = R"sql(
CREATE TABLE environments(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, torch TEXT NOT NULL,
  torch_line TEXT NOT NULL, cuda TEXT NOT NULL, nccl TEXT NOT NULL, compiler TEXT NOT NULL, cpu TEXT NOT NULL,
  gpu TEXT NOT NULL, driver TEXT NOT NULL, lockstep_rev TEXT NOT NULL);
CREATE TABLE runs(id INTEGER PRIMARY KEY, uid TEXT NOT NULL UNIQUE, env_id INTEGER NOT NULL REFERENCES environments(id),
  started_at TEXT NOT NULL, kind TEXT NOT NULL, repeat INTEGER NOT NULL, lockstep_rev TEXT NOT NULL);
CREATE TABLE sequences(id INTEGER PRIMARY KEY, hash TEXT NOT NULL UNIQUE, ranks INTEGER NOT NULL);
CREATE TABLE sequence_calls(sequence_id INTEGER NOT NULL REFERENCES sequences(id), rank INTEGER NOT NULL,
  pos INTEGER NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, op TEXT NOT NULL, dtype TEXT NOT NULL,
  count INTEGER NOT NULL, device TEXT NOT NULL, reduce TEXT NOT NULL, root INTEGER NOT NULL, peer INTEGER NOT NULL,
  tag INTEGER NOT NULL, send_counts TEXT NOT NULL, recv_counts TEXT NOT NULL, phase TEXT NOT NULL,
  step INTEGER NOT NULL, call_index INTEGER NOT NULL, wire TEXT NOT NULL, PRIMARY KEY(sequence_id, rank, pos)) WITHOUT ROWID;
CREATE TABLE results(id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id), scenario TEXT NOT NULL,
  name TEXT NOT NULL, file TEXT NOT NULL, variant TEXT NOT NULL, status TEXT NOT NULL, expected TEXT NOT NULL,
  diagnosis TEXT NOT NULL, digest TEXT NOT NULL, duration_s REAL NOT NULL, world_size INTEGER NOT NULL,
  sequence_id INTEGER REFERENCES sequences(id), UNIQUE(run_id, scenario));
CREATE TABLE metric_samples(result_id INTEGER NOT NULL REFERENCES results(id), name TEXT NOT NULL,
  value REAL NOT NULL, PRIMARY KEY(result_id, name)) WITHOUT ROWID;
INSERT INTO environments VALUES(1, 'old', '1.13.1', 'debian', 'none', 'none', 'GNU 12', 'cpu', 'none', 'none', 'r1');
INSERT INTO runs VALUES(1, 'u1', 1, '2025-01-01T00:00:00Z', 'record', 0, 'r1');
INSERT INTO results VALUES(1, 1, 'x.a', 'x.a', 'x.toml', '', 'pass', 'pass', '', 'abc', 1.5, 2, NULL);
INSERT INTO metric_samples VALUES(1, 'us_per_op', 12.25);
PRAGMA user_version = 1;
)sql";

void exec_raw(const std::string& file, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

TEST_F(BaselineTest, MigratesAVersionOneDatabaseKeepingItsData) {
  const std::string file = path("v1.db");
  exec_raw(file, kV1);
  {
    Store store(file, Access::kWrite);
    EXPECT_EQ(store.schema_version(), 6);
    EXPECT_TRUE(store.integrity_problems().empty());
    const auto runs = store.runs();
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].uid, "u1");
    EXPECT_EQ(runs[0].host, "") << "the column added in version 2 defaults to empty";
    ASSERT_EQ(runs[0].results.size(), 1u);
    EXPECT_EQ(runs[0].results[0].digest, "abc");
    EXPECT_EQ(runs[0].results[0].metrics.at("us_per_op"), 12.25);
    EXPECT_EQ(runs[0].results[0].verdict, "") << "the column added in version 3 defaults to empty";
    // Version-2 and version-3 tables work on the migrated file.
    write_trace(path("r/x"));
    auto run = summary(1, 1.0, "x");
    run.results[0].id = "x.a";
    run.results[0].samples["train/rank1/main_cpu_s"] = {0.25, 0.5, 0.125};
    store.record(test_env("new"), run, path("r"), 0);
    const auto stored = store.runs("new").at(0).results.at(0);
    EXPECT_FALSE(stored.timeline.empty());
    EXPECT_EQ(stored.samples.at("train/rank1/main_cpu_s"), (std::vector<double>{0.25, 0.5, 0.125}));
  }
  // The CLI agrees.
  const auto r = lockstep("baseline check --baseline " + quote(file));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "schema version 6");
}

TEST_F(BaselineTest, NewerSchemaIsRefusedWithExitTwo) {
  const std::string file = path("future.db");
  exec_raw(file, "CREATE TABLE t(x); PRAGMA user_version = 99;");
  EXPECT_THROW(Store(file, Access::kRead), InputError);
  for (const std::string& cmd : std::vector<std::string>{"baseline check", "report --out " + quote(path("rep")), "baseline export"}) {
    const auto r = lockstep(cmd + " --baseline " + quote(file));
    EXPECT_EQ(r.code, 2) << cmd << ": " << r.err;
    EXPECT_CONTAINS(r.err, "schema version 99 is newer than this lockstep supports (6)");
  }
}

TEST_F(BaselineTest, CorruptDatabaseGivesAClearErrorAndExitTwo) {
  // Not a database at all.
  const std::string junk = write("junk.db", std::string(8192, 'x'));
  auto r = lockstep("baseline check --baseline " + quote(junk));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_CONTAINS(r.err, "not a valid lockstep baseline database");
  // A real database with damaged pages.
  const std::string file = path("damaged.db");
  {
    Store store(file, Access::kCreate);
    for (int i = 0; i < 20; ++i) store.record(test_env("e"), summary(40, 1.0), dir_, i);
    store.db().exec("PRAGMA wal_checkpoint(TRUNCATE)");
  }
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0, std::ios::end);
    const auto size = static_cast<long>(f.tellp());
    ASSERT_GT(size, 8 * 4096);
    for (long off = 2 * 4096; off + 4096 <= size; off += 3 * 4096) {
      f.seekp(off + 7);
      const std::string garbage(300, '\xA5');
      f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
    }
  }
  r = lockstep("baseline check --baseline " + quote(file));
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_TRUE(r.err.find("damaged") != std::string::npos || r.err.find("not a valid") != std::string::npos) << r.err;
  // A missing file is bad input too.
  r = lockstep("baseline check --baseline " + quote(path("missing.db")));
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "no such baseline database");
}

TEST_F(BaselineTest, FourConcurrentWritersLoseNothing) {
  const std::string file = path("shared.db");
  constexpr int kWriters = 4, kRunsEach = 15, kScenarios = 25;
  std::vector<pid_t> pids;
  for (int w = 0; w < kWriters; ++w) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      try {
        Store store(file, Access::kCreate);  // every writer may be the one creating the schema
        for (int i = 0; i < kRunsEach; ++i) store.record(test_env("env" + std::to_string(w % 2)), summary(kScenarios, w + 1), dir_, i);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "writer %d: %s\n", w, e.what());
        code = 1;
      }
      _exit(code);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a writer failed";
  }
  Store store(file, Access::kRead);
  EXPECT_TRUE(store.integrity_problems().empty());
  const auto runs = store.runs();
  ASSERT_EQ(runs.size(), static_cast<std::size_t>(kWriters * kRunsEach));
  std::map<double, int> per_writer;
  for (const auto& r : runs) {
    ASSERT_EQ(r.results.size(), static_cast<std::size_t>(kScenarios));
    for (const auto& x : r.results) ASSERT_EQ(x.metrics.size(), 3u);
    ++per_writer[r.results[0].metrics.at("items_per_s")];
  }
  for (int w = 0; w < kWriters; ++w) EXPECT_EQ(per_writer[1e6 * (w + 1)], kRunsEach) << "writer " << w;
}

TEST_F(BaselineTest, EnvironmentNameIsBoundToOneStack) {
  Store store(path("b.db"), Access::kCreate);
  store.put_environment(test_env("e"));
  auto other = test_env("e");
  other.torch = "2.11.0";
  EXPECT_THROW(store.put_environment(other), InputError);
  other.torch = "9.9.9";
  other.lockstep_rev = "newer";  // the revision may move on
  EXPECT_NO_THROW(store.put_environment(other));
}

// An environment is named by what ran: a program recorded on torch 1.13.0 under environment "e"
// cannot be recorded there again on torch 2.15.0 (the run whose interpreter was another), and
// the refused run leaves the store as it was.
TEST_F(BaselineTest, ARunOnAnotherTorchIsNotFiledUnderTheSameEnvironment) {
  Store store(path("b.db"), Access::kCreate);
  auto run = summary(2, 1.0);
  run.results[0].system = "torch 1.13.0";
  store.record(test_env("e"), run, dir_, 0);
  EXPECT_NO_THROW(store.record(test_env("e"), run, dir_, 1));  // the same torch again
  run.results[0].system = "torch 2.15.0";
  EXPECT_EQ(test::message_of<InputError>([&] { store.record(test_env("e"), run, dir_, 2); }),
            "environment 'e' recorded t.s0 running on torch 1.13.0, this run ran it on torch 2.15.0 (torch 1.13.0 -> 2.15.0): record it "
            "under an environment of its own (--env NAME); nothing of this run was recorded");
  EXPECT_EQ(store.runs("e").size(), 2u);
  EXPECT_EQ(store.runs("e").at(0).results.at(0).system, "torch 1.13.0");
  EXPECT_EQ(store.runs("e").at(0).results.at(1).system, "") << "lockstep's own workloads report none";
  EXPECT_NO_THROW(store.record(test_env("e2"), run, dir_, 0));  // under a name of its own
}

// A program's identity names its torch, CUDA, NCCL, Python and the GNN packages it imported: a
// run that differs in any component both runs name is refused, naming each difference; a record
// made before identities had components ("torch <version>" alone) still accepts the same torch,
// and a package only one of the runs imported is not a difference.
TEST_F(BaselineTest, ARunIsRefusedNamingEveryComponentItRanOnThatDiffers) {
  Store store(path("b.db"), Access::kCreate);
  auto run = summary(2, 1.0);
  run.results[0].system = "torch 2.15.0";
  store.record(test_env("e"), run, dir_, 0);
  run.results[0].system = "torch 2.15.0, cuda 13.2, nccl 2.28.9, python 3.11.2, numpy 2.4.6";
  EXPECT_NO_THROW(store.record(test_env("e"), run, dir_, 1)) << "the old record names the same torch";
  run.results[0].system = "torch 2.15.0, cuda 13.2, nccl 2.28.9, python 3.11.2, numpy 2.4.6, torch_geometric 2.8.1";
  EXPECT_NO_THROW(store.record(test_env("e"), run, dir_, 2)) << "a package the last record did not import";
  run.results[0].system = "torch 2.15.0, cuda 13.2, nccl 2.30.7, python 3.11.2, numpy 2.4.6, torch_geometric 2.9.0";
  EXPECT_EQ(test::message_of<InputError>([&] { store.record(test_env("e"), run, dir_, 3); }),
            "environment 'e' recorded t.s0 running on torch 2.15.0, cuda 13.2, nccl 2.28.9, python 3.11.2, numpy 2.4.6, "
            "torch_geometric 2.8.1, this run ran it on torch 2.15.0, cuda 13.2, nccl 2.30.7, python 3.11.2, numpy 2.4.6, "
            "torch_geometric 2.9.0 (nccl 2.28.9 -> 2.30.7, torch_geometric 2.8.1 -> 2.9.0): record it under an environment of its "
            "own (--env NAME); nothing of this run was recorded");
  EXPECT_EQ(store.runs("e").size(), 3u);
  // A system under test's identity, "NAME (package version, ...)", by the same rule.
  auto sut = summary(2, 1.0);
  sut.results[0].system = "pyg (torch 2.14.1, torch_geometric 2.8.1)";
  store.record(test_env("s"), sut, dir_, 0);
  sut.results[0].system = "pyg (torch 2.14.1, torch_geometric 2.8.1, numpy 2.4.6)";
  EXPECT_NO_THROW(store.record(test_env("s"), sut, dir_, 1)) << "a package the last record did not name";
  sut.results[0].system = "pyg (torch 2.15.0, torch_geometric 2.8.1, numpy 2.4.6)";
  EXPECT_NE(test::message_of<InputError>([&] { store.record(test_env("s"), sut, dir_, 2); }).find("(torch 2.14.1 -> 2.15.0)"), std::string::npos);
}

TEST_F(BaselineTest, ExportImportRoundTripsByteForByte) {
  write_trace(path("r/a"));
  const std::string a = path("a.db");
  {
    Store store(a, Access::kCreate);
    auto run = summary(3, 1.0, "a");
    run.results[1].status = report::Status::kFail;
    run.results[1].diagnosis = Diagnosis{DiagnosisKind::kTimeout, "m", 1, 2};
    run.results[2].metrics["weird \"name\"\n<x>"] = -1.0 / 3.0;
    store.record(test_env("e1"), run, path("r"), 0);
    store.record(test_env("e2"), summary(2, 0.5), path("r"), 1);
  }
  auto r = lockstep("baseline export --baseline " + quote(a) + " --out " + quote(path("one.json")));
  ASSERT_EQ(r.code, 0) << r.err;
  r = lockstep("baseline import --baseline " + quote(path("b.db")) + " " + quote(path("one.json")));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "2 run(s) added");
  r = lockstep("baseline export --baseline " + quote(path("b.db")) + " --out " + quote(path("two.json")));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string one = lockstep::test::read_file(path("one.json")), two = lockstep::test::read_file(path("two.json"));
  EXPECT_GT(one.size(), 1000u);
  EXPECT_EQ(one, two);
  EXPECT_CONTAINS(one, "\"op\":\"barrier\"");
  // Importing again adds nothing.
  r = lockstep("baseline import --baseline " + quote(path("b.db")) + " " + quote(path("one.json")));
  EXPECT_CONTAINS(r.out, "0 run(s) added");
  // One environment only.
  Store b(path("b.db"), Access::kRead);
  const std::string e2 = b.export_text("e2");
  EXPECT_EQ(e2.find("\"e1\""), std::string::npos);
  EXPECT_NE(e2.find("\"e2\""), std::string::npos);
  // A malformed export is bad input.
  write("bad.json", "{\"format\": \"lockstep-baseline\", \"schema_version\": 2, \"runs\": 3}");
  r = lockstep("baseline import --baseline " + quote(path("b.db")) + " " + quote(path("bad.json")));
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "bad.json");
}

TEST_F(BaselineTest, AlteredTraceIsASequenceChangeNamingRankIndexAndBothRecords) {
  write_trace(path("r/a"));
  write_trace(path("obs/a"), /*rank1_dtype_at_step1=*/"bf16");
  Store store(path("b.db"), Access::kCreate);
  store.record(test_env("e"), summary(1, 1.0, "a"), path("r"), 0);
  const auto base = load_baseline(store, "e");
  Observation obs;
  obs.scenario = "t.s0";
  obs.clean = true;
  obs.digests = {"d0"};
  obs.sequences = {read_sequence(path("obs/a"), 2)};
  const auto d = check_exact(store, base.at("t.s0"), obs);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kSequenceChanged);
  EXPECT_EQ(d->rank, 1);
  EXPECT_EQ(d->seq, 2);
  EXPECT_CONTAINS(d->message, "rank 1, call 2: recorded #2 all_reduce f32[64] sum (train step 1 call 0), observed #2 all_reduce bf16[64] sum (train step 1 call 0)");
  // The same trace is no change; a different digest is result_mismatch, checked first.
  obs.sequences = {read_sequence(path("r/a"), 2)};
  EXPECT_FALSE(check_exact(store, base.at("t.s0"), obs).has_value());
  obs.digests = {"other"};
  const auto m = check_exact(store, base.at("t.s0"), obs);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->kind, DiagnosisKind::kResultMismatch);
}

// ---------------------------------------------------------------------------------------------
// End to end through the CLI: record, run --baseline, compare, report.

constexpr const char* kCollectives = R"(name = "b.mix"
[run]
world_size = 2
[workload]
kind = "collectives"
steps = 2
count = 16
ops = ["all_reduce", "broadcast"]
dtypes = ["DTYPE"]
[expect]
outcome = "pass"
)";

constexpr const char* kSplit = R"(name = "b.split"
[run]
world_size = 2
[workload]
kind = "split"
num_ids = NUM
batch_size = 32
[expect]
outcome = "pass"
)";

std::string with(std::string text, const std::string& key, const std::string& value) {
  text.replace(text.find(key), key.size(), value);
  return text;
}

TEST_F(BaselineTest, RunAgainstBaselineReportsSequenceAndDigestChanges) {
  const std::string db = quote(path("b.db"));
  write("s/mix.toml", with(kCollectives, "DTYPE", "f32"));
  write("s/split.toml", with(kSplit, "NUM", "200"));
  auto r = lockstep("record " + quote(path("s")) + " --baseline " + db + " --repeat 1 --env e --report-dir " + quote(path("rec")));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_CONTAINS(r.out, "recorded run ");
  // Unchanged: passes.
  r = lockstep("run " + quote(path("s")) + " --baseline " + db + " --env e --repeat 1 --report-dir " + quote(path("ok")));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_CONTAINS(r.out, "0 scenario(s) failed a baseline check");
  // The program changes: another dtype (sequence) and other ids (digest).
  write("s/mix.toml", with(kCollectives, "DTYPE", "f16"));
  write("s/split.toml", with(kSplit, "NUM", "201"));
  r = lockstep("run " + quote(path("s")) + " --baseline " + db + " --env e --repeat 1 --report-dir " + quote(path("bad")));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_CONTAINS(r.out, "sequence_changed");
  EXPECT_CONTAINS(r.out, "rank 0, call 0: recorded #0 all_reduce f32[16] sum");
  EXPECT_CONTAINS(r.out, "observed #0 all_reduce f16[16] sum");
  EXPECT_CONTAINS(r.out, "result_mismatch");
  const std::string results = lockstep::test::read_file(path("bad/results.json"));
  EXPECT_CONTAINS(results, "\"kind\": \"sequence_changed\"");
  EXPECT_CONTAINS(results, "\"kind\": \"result_mismatch\"");
  // Unknown environment: bad input.
  r = lockstep("run " + quote(path("s")) + " --baseline " + db + " --env nope --repeat 1 --report-dir " + quote(path("x")));
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "no environment named 'nope'");

  // Record the changed program as another environment, compare, report.
  r = lockstep("record " + quote(path("s")) + " --baseline " + db + " --repeat 1 --env e2 --report-dir " + quote(path("rec2")));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  r = lockstep("compare --baseline " + db + " --from e --to e2 --json");
  EXPECT_EQ(r.code, 1) << "something changed: " << r.err;
  const auto j = nlohmann::json::parse(r.out);
  std::map<std::string, std::string> verdict;
  for (const auto& s : j.at("scenarios")) verdict[s.at("scenario")] = s.at("verdict");
  EXPECT_EQ(verdict["b.mix"], "sequence_changed");
  EXPECT_EQ(verdict["b.split"], "results_changed");
  r = lockstep("compare --baseline " + db + " --from e --to e");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  r = lockstep("report --baseline " + db + " --out " + quote(path("report")));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string html = lockstep::test::read_file(path("report/index.html"));
  EXPECT_CONTAINS(html, "b.mix");
  EXPECT_CONTAINS(html, "<svg class=\"chart\"");
  EXPECT_EQ(html.find("<script"), std::string::npos) << "self-contained and static";
  // The summary opens the report: the two environments' comparison, with its changes.
  EXPECT_LT(html.find("<h2>Summary</h2>"), html.find("<h2>Environments</h2>"));
  EXPECT_CONTAINS(html, "Comparison: e (");
  EXPECT_CONTAINS(html, "1 sequence_changed");
  const std::string md = lockstep::test::read_file(path("report/report.md"));
  EXPECT_LT(md.find("## Summary"), md.find("## History"));
}

TEST_F(BaselineTest, ReportEscapesUserSuppliedStrings) {
  Store store(path("b.db"), Access::kCreate);
  auto run = summary(1, 1.0);
  run.results[0].id = "<script>alert(1)</script>";
  run.results[0].metrics["x<img src=y>_per_s"] = 5;
  store.record(test_env("env\"&'<b>"), run, dir_, 0);
  write_report(store, path("rep"));
  const std::string html = lockstep::test::read_file(path("rep/index.html"));
  EXPECT_EQ(html.find("<script>alert"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_CONTAINS(html, "&lt;script&gt;alert(1)&lt;/script&gt;");
  EXPECT_CONTAINS(html, "env&quot;&amp;&#39;&lt;b&gt;");
  EXPECT_EQ(lockstep::test::read_file(path("rep/report.md")).find("<script>"), std::string::npos);
}

// Two ranks, `steps` steps of one all_reduce each, 1 ms apart: rank 1 arrives 400 µs after rank 0
// at every one; the call completes on both 100 µs after rank 1 arrives. Then a send/recv. Times
// from 1 s on the clock (a trace's clocks are never 0).
void write_late_rank_trace(const std::string& dir, int steps) {
  fs::create_directories(dir);
  const std::int64_t t0 = 1'000'000;
  for (int r = 0; r < 2; ++r) {
    std::ofstream out(dir + "/rank" + std::to_string(r) + ".trace.jsonl");
    for (int step = 0; step < steps; ++step) {
      out << "{\"rank\":" << r << ",\"seq\":" << step << ",\"kind\":\"collective\",\"op\":\"all_reduce\",\"dtype\":\"f32\","
          << "\"count\":64,\"device\":\"cpu\",\"bytes\":256,\"reduce\":\"sum\",\"phase\":\"train\",\"step\":" << step
          << ",\"index\":0,\"t_start_us\":" << t0 + 1000 * step + 400 * r << ",\"t_end_us\":" << t0 + 1000 * step + 500 << "}\n";
      // A send/recv pair after it: point-to-point calls have seqs of their own (the same
      // numbers) and are not lined up.
      out << "{\"rank\":" << r << ",\"seq\":" << step << ",\"kind\":\"p2p\",\"op\":\"" << (r == 0 ? "send" : "recv")
          << "\",\"dtype\":\"f32\",\"count\":4,\"device\":\"cpu\",\"bytes\":16,\"peer\":" << 1 - r
          << ",\"tag\":0,\"phase\":\"train\",\"step\":" << step << ",\"index\":1,\"t_start_us\":" << t0 + 1000 * step + 600
          << ",\"t_end_us\":" << t0 + 1000 * step + 700 << "}\n";
    }
  }
}

TEST_F(BaselineTest, ReportShowsTheLatestRecordsWaitsTimelineAndHeatmap) {
  write_late_rank_trace(path("r/a"), 9);
  Store store(path("b.db"), Access::kCreate);
  auto run = summary(1, 1.0, "a");
  run.results[0].samples["waits/rank0/wait_s"] = {300e-6, 300e-6, 300e-6, 300e-6, 300e-6, 300e-6};
  run.results[0].samples["waits/rank1/wait_s"] = {0, 0, 0, 0, 0, 0};
  store.record(test_env("e"), run, path("r"), 0);
  // The stored timeline carries seq, step and phase.
  const auto stored = store.runs("e").at(0).results.at(0).timeline;
  EXPECT_CONTAINS(stored, "[\"all_reduce\",400,500,0,0,\"train\",1]");
  EXPECT_CONTAINS(stored, "[\"recv\",600,700,0,0,\"train\",0]");  // not lined up
  write_report(store, path("rep"));
  const std::string html = lockstep::test::read_file(path("rep/index.html"));
  // Seq 0 (start-up) is dropped: 8 steps of 1 ms, in each rank 0 waits 400 µs for rank 1.
  EXPECT_CONTAINS(html, "Waits at collectives (latest record, e at abc123");
  EXPECT_CONTAINS(html, "rank 1 kept the others waiting in 8 of 8 steps (40% of the median step)");
  EXPECT_CONTAINS(html, "aria-label=\"per-rank timeline of step");
  EXPECT_CONTAINS(html, "aria-label=\"wait per rank and call\"");
  EXPECT_CONTAINS(html, "rank 0 waits 0.40 ms at #");
  EXPECT_CONTAINS(html, "Wait at collectives per step (the run&#39;s median)");
  EXPECT_CONTAINS(html, "class=\"lg\">e rank0</text>");  // the chart of the per-step waits
  const std::string md = lockstep::test::read_file(path("rep/report.md"));
  EXPECT_CONTAINS(md, "| waits/rank0/wait\\_s | e | 1 | 0.0003 |");
  EXPECT_CONTAINS(md, "straggler: rank 1 kept the others waiting in 8 of 8 steps");
}

TEST_F(BaselineTest, ReportLeavesOutWaitsOfATimelineWithoutSteps) {
  // An older lockstep's timeline: [op, start, end] only.
  Store store(path("b.db"), Access::kCreate);
  store.record(test_env("e"), summary(1, 1.0), dir_, 0);
  exec_raw(path("b.db"), "INSERT INTO timelines(result_id, spans) SELECT id, '{\"t0_us\":0,\"ranks\":[[[\"all_reduce\",0,10]],[[\"all_reduce\",5,10]]]}' FROM results;");
  write_report(store, path("rep"));
  const std::string html = lockstep::test::read_file(path("rep/index.html"));
  EXPECT_EQ(html.find("Waits at collectives"), std::string::npos);
  EXPECT_CONTAINS(html, "t.s0");
}

TEST_F(BaselineTest, ReportStacksStepTimeBreakdownsPerEnvironment) {
  Store store(path("b.db"), Access::kCreate);
  auto run = summary(1, 1.0);
  run.results[0].id = "train.gcn";
  run.results[0].metrics = {{"step_time_sampling_s", 0.25}, {"step_time_forward_s", 0.5}, {"step_time_backward_s", 0.25}};
  store.record(test_env("a"), run, dir_, 0);
  run.results[0].metrics["step_time_forward_s"] = 1.5;
  store.record(test_env("b"), run, dir_, 0);
  write_report(store, path("rep"));
  const std::string md = lockstep::test::read_file(path("rep/report.md"));
  // Shares within environment a: 0.25 / 1.0 and 0.5 / 1.0.
  EXPECT_CONTAINS(md, "| a | step\\_time\\_forward\\_s | 0.5 | 50% |");
  EXPECT_CONTAINS(md, "| a | step\\_time\\_sampling\\_s | 0.25 | 25% |");
  EXPECT_CONTAINS(md, "| b | step\\_time\\_forward\\_s | 1.5 | 75% |");
  const std::string html = lockstep::test::read_file(path("rep/index.html"));
  EXPECT_CONTAINS(html, "<title>step_time_forward_s: 1.5 s</title>");
}

}  // namespace
}  // namespace lockstep::baseline
