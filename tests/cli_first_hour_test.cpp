// What a newcomer meets in the first hour (issue 42): exit codes that never hide a run that
// checked nothing, every error at once, results in the words pytest users know, the everyday
// controls (list/catalog --filter, -x, --last-failed), a report.md for every run, and help with
// examples. Each test runs the real CLI binary.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace {

using lockstep::test::CliResult;
using lockstep::test::quote;
using lockstep::test::read_file;
namespace fs = std::filesystem;

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "missing: " << (needle) << "\nin:\n" << (haystack)
#define EXPECT_LACKS(haystack, needle) \
  EXPECT_EQ(std::string(haystack).find(needle), std::string::npos) << "unexpected: " << (needle) << "\nin:\n" << (haystack)

class FirstHourTest : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) { return tmp_.write(name, text); }
  CliResult lockstep(const std::string& args) { return lockstep::test::run_cli(LOCKSTEP_BINARY, args, dir_); }
  // `lockstep ARGS` with one more environment variable ("NAME=value").
  CliResult lockstep_env(const std::string& assignment, const std::string& args) {
    return lockstep::test::run_cli("env", quote(assignment) + " " + quote(LOCKSTEP_BINARY) + " " + args, dir_);
  }
  nlohmann::json results(const std::string& report) {
    return nlohmann::json::parse(read_file(report + "/results.json"), nullptr, false);
  }

  lockstep::test::TempDir tmp_{"lockstep_first_hour"};
  const std::string dir_ = tmp_.path();
};

// Two ranks, one all_reduce: passes.
std::string small(const std::string& name) {
  return "name = \"" + name + "\"\n[run]\nworld_size = 2\n[workload]\nkind = \"collectives\"\nsteps = 1\ncount = 8\nops = [\"all_reduce\"]\n";
}
// The same clean run claiming a mismatch: fails.
std::string unmet(const std::string& name) { return small(name) + "[expect]\noutcome = \"collective_mismatch\"\n"; }
// An injected dtype mismatch that must be found: passes with the expected diagnosis.
std::string injected(const std::string& name) {
  return "name = \"" + name + "\"\n[run]\nworld_size = 2\n[workload]\nkind = \"collectives\"\nsteps = 2\ncount = 8\nops = [\"all_reduce\"]\n"
         "[[inject]]\nkind = \"dtype_mismatch\"\nrank = 1\nstep = 1\nop = \"all_reduce\"\ndtype = \"f64\"\n"
         "[expect]\noutcome = \"collective_mismatch\"\nrank = 1\n";
}
// A program scenario: {python} runs a script that exists.
std::string program(const std::string& name) {
  return "name = \"" + name + "\"\n[run]\nworld_size = 1\n[workload]\nkind = \"program\"\ncommand = [\"{python}\", \"{dir}/p.py\"]\n";
}

// A filter that selects nothing is exit 5 (pytest's "no tests collected"), for run and list, with
// a message; list --filter shows exactly what run --filter would run.
TEST_F(FirstHourTest, NothingSelectedIsExitFiveAndListFiltersAsRunDoes) {
  write("s/a.toml", small("fh.alpha"));
  write("s/b.toml", small("fh.beta"));
  const auto none = lockstep("run " + quote(dir_ + "/s") + " --filter nomatch --report-dir " + quote(dir_ + "/r"));
  EXPECT_EQ(none.code, 5) << none.out << none.err;
  EXPECT_CONTAINS(none.out, "no scenario selected");
  const auto list_none = lockstep("list " + quote(dir_ + "/s") + " --filter nomatch");
  EXPECT_EQ(list_none.code, 5) << list_none.out << list_none.err;
  EXPECT_CONTAINS(list_none.err, "no scenario selected by --filter 'nomatch'");
  const auto list_beta = lockstep("list " + quote(dir_ + "/s") + " --filter beta");
  EXPECT_EQ(list_beta.code, 0) << list_beta.err;
  EXPECT_CONTAINS(list_beta.out, "fh.beta");
  EXPECT_LACKS(list_beta.out, "fh.alpha");
}

// A misspelt interpreter is an input error naming it (exit 2) before anything runs, not a run of
// skips that exits 0 beside other scenarios; so is a LOCKSTEP_PYTHON that does not exist when a
// selected scenario needs Python. A comm-only run does not need one and is not refused.
TEST_F(FirstHourTest, AnInterpreterThatCannotStartIsAnInputError) {
  write("s/p.py", "print('hi')\n");
  write("s/prog.toml", program("fh.prog"));
  write("s/comm.toml", small("fh.comm"));
  const auto flag = lockstep("run " + quote(dir_ + "/s") + " --python /usr/bin/python9 --report-dir " + quote(dir_ + "/r1"));
  EXPECT_EQ(flag.code, 2) << flag.out << flag.err;
  EXPECT_CONTAINS(flag.err, "--python: the interpreter '/usr/bin/python9' does not exist");
  EXPECT_FALSE(fs::exists(dir_ + "/r1/results.json")) << "something ran";
  const auto not_python = lockstep("run " + quote(dir_ + "/s") + " --python /bin/false --report-dir " + quote(dir_ + "/r2"));
  EXPECT_EQ(not_python.code, 2) << not_python.out << not_python.err;
  EXPECT_CONTAINS(not_python.err, "'/bin/false' does not start");
  const auto env = lockstep_env("LOCKSTEP_PYTHON=/nowhere/python3", "run " + quote(dir_ + "/s") + " --report-dir " + quote(dir_ + "/r3"));
  EXPECT_EQ(env.code, 2) << env.out << env.err;
  EXPECT_CONTAINS(env.err, "LOCKSTEP_PYTHON: the interpreter '/nowhere/python3' does not exist");
  const auto comm_only =
      lockstep_env("LOCKSTEP_PYTHON=/nowhere/python3", "run " + quote(dir_ + "/s/comm.toml") + " --report-dir " + quote(dir_ + "/r4"));
  EXPECT_EQ(comm_only.code, 0) << comm_only.out << comm_only.err;
}

// A [system] command or a program's script that cannot be found is refused by validate and run
// alike (exit 2), naming file:line, the key and the path, instead of a rank_failure with exit
// code 127 and empty logs.
TEST_F(FirstHourTest, ACommandThatCannotBeFoundIsRefusedByValidateAndRun) {
  const std::string sys = write("s/sys.toml",
                                "name = \"fh.sys\"\n[workload]\nkind = \"lookup\"\n[system]\nname = \"mine\"\n"
                                "command = [\"{dir}/no_such_adapter.sh\", \"--flag\"]\n");
  for (const std::string cmd : {"validate", "run"}) {
    const auto r = lockstep(cmd + " " + quote(sys) + (cmd == "run" ? " --report-dir " + quote(dir_ + "/r") : ""));
    EXPECT_EQ(r.code, 2) << cmd << ": " << r.out << r.err;
    EXPECT_CONTAINS(r.err, sys + ":6:");
    EXPECT_CONTAINS(r.err, "system.command");
    EXPECT_CONTAINS(r.err, "no_such_adapter.sh) does not exist");
  }
  const std::string prog = write("p/prog.toml", program("fh.prog"));  // p/p.py is not there
  const auto r = lockstep("validate " + quote(prog));
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_CONTAINS(r.err, "the script '{dir}/p.py'");
}

// validate reports every broken file and every unknown key of a table, then exits 2; a misspelt
// workload kind gets a did-you-mean over every kind, program included.
TEST_F(FirstHourTest, ValidateReportsEveryErrorAtOnce) {
  const std::string a = write("d/a.toml", "name = \"fh.a\"\n[workload]\nkind = \"progam\"\n");
  const std::string b = write("d/b.toml", "name = \"fh.b\"\n[run]\nworld_sise = 2\nfoo = 1\n[workload]\nkind = \"collectives\"\n");
  write("d/c.toml", small("fh.c"));
  const auto r = lockstep("validate " + quote(dir_ + "/d"));
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_CONTAINS(r.err, "2 of 3 scenario files have errors");
  EXPECT_CONTAINS(r.err, a + ":3: workload.kind: unknown workload 'progam' (did you mean 'program'?)");
  EXPECT_CONTAINS(r.err, b + ":3: run.world_sise: unknown key (did you mean 'world_size'?)");
  EXPECT_CONTAINS(r.err, b + ":4: run.foo: unknown key");
}

// An injected bug that gave the expected diagnosis reads as XFAIL "... as expected" on the
// console and in report.md, while results.json and junit.xml still say pass (no <failure>).
TEST_F(FirstHourTest, AnExpectedDiagnosisReadsAsXfailAndReportMdIsWritten) {
  write("s/a.toml", injected("fh.injected"));
  write("s/b.toml", small("fh.clean"));
  const std::string report = dir_ + "/r";
  const auto r = lockstep("run " + quote(dir_ + "/s") + " --report-dir " + quote(report));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_CONTAINS(r.out, "XFAIL fh.injected");
  EXPECT_CONTAINS(r.out, "collective_mismatch as expected");
  EXPECT_CONTAINS(r.out, "PASS  fh.clean");
  EXPECT_CONTAINS(r.out, "2 passed, 0 failed");
  const auto j = results(report);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["scenarios"][0]["status"], "pass");
  const std::string junit = read_file(report + "/junit.xml");
  EXPECT_LACKS(junit, "<failure");
  const std::string md = read_file(report + "/report.md");
  EXPECT_CONTAINS(md, "| XFAIL | fh.injected | collective\\_mismatch | collective_mismatch |");
  EXPECT_CONTAINS(md, "| pass | fh.clean |");
}

// -x stops at the first scenario that does not meet its expectation: the rest are not run
// (status cancelled, the reason naming -x), exit 1. --last-failed then reruns only what did not
// pass in that report; with no earlier report it is an input error.
TEST_F(FirstHourTest, ExitFirstAndLastFailed) {
  write("s/a.toml", unmet("fh.a_unmet"));
  write("s/b.toml", small("fh.b_clean"));
  write("s/c.toml", small("fh.c_clean"));
  const std::string report = dir_ + "/r";
  const auto x = lockstep("run " + quote(dir_ + "/s") + " -x --report-dir " + quote(report));
  EXPECT_EQ(x.code, 1) << x.out << x.err;
  EXPECT_CONTAINS(x.out, "2 not run (-x)");
  auto j = results(report);
  ASSERT_TRUE(j.is_object());
  ASSERT_EQ(j["scenarios"].size(), 3u);
  EXPECT_EQ(j["scenarios"][0]["status"], "fail");
  EXPECT_EQ(j["scenarios"][1]["status"], "cancelled");
  EXPECT_CONTAINS(j["scenarios"][1].value("reason", ""), "-x/--exitfirst stopped the run after fh.a_unmet failed");

  const auto none = lockstep("run " + quote(dir_ + "/s") + " --last-failed --report-dir " + quote(dir_ + "/empty"));
  EXPECT_EQ(none.code, 2) << none.out << none.err;
  EXPECT_CONTAINS(none.err, "--last-failed: no earlier report");

  // The run with -x left a_unmet failed and b, c not run: all three are rerun. Then a full run
  // leaves only a_unmet failed, and --last-failed runs only it.
  const auto full = lockstep("run " + quote(dir_ + "/s") + " --report-dir " + quote(report));
  EXPECT_EQ(full.code, 1);
  const auto again = lockstep("run " + quote(dir_ + "/s") + " --last-failed --report-dir " + quote(report));
  EXPECT_EQ(again.code, 1) << again.out << again.err;
  j = results(report);
  ASSERT_TRUE(j.is_object());
  ASSERT_EQ(j["scenarios"].size(), 1u) << again.out;
  EXPECT_EQ(j["scenarios"][0]["id"], "fh.a_unmet");
}

// catalog from another folder names --catalog; catalog --filter that selects no class is exit 5.
TEST_F(FirstHourTest, CatalogSaysWhereItLooksAndFilters) {
  const auto elsewhere = lockstep("catalog --report-dir " + quote(dir_ + "/r"));
  EXPECT_EQ(elsewhere.code, 2) << elsewhere.out << elsewhere.err;
  EXPECT_CONTAINS(elsewhere.err, "pass --catalog PATH");
  const auto none = lockstep("catalog --catalog " + quote(std::string(LOCKSTEP_SOURCE_DIR) + "/scenarios/catalog.toml") +
                             " --filter no_class_is_called_this --report-dir " + quote(dir_ + "/r2"));
  EXPECT_EQ(none.code, 5) << none.out << none.err;
  EXPECT_CONTAINS(none.out, "no bug class selected");
}

// Every subcommand's help ends with examples; the containment paragraph is written once, in the
// top-level help, and each subcommand's --no-contain points at it.
TEST_F(FirstHourTest, HelpHasExamplesAndSharedTextOnce) {
  for (const std::string cmd : {"run", "list", "validate", "record", "catalog", "torchrun", "compare", "report", "baseline", "rank"}) {
    const auto r = lockstep(cmd + " --help");
    EXPECT_EQ(r.code, 0) << cmd;
    EXPECT_CONTAINS(r.out, "Examples:");
    EXPECT_LACKS(r.out, "PID namespace (everything it started dies with it");
  }
  const auto top = lockstep("--help");
  EXPECT_CONTAINS(top.out, "Containment:");
  EXPECT_CONTAINS(top.out, "5 no scenario was selected");
}

}  // namespace

namespace {

// Repeats print one summary line for the run, not one per repeat, and lay their folders out
// flat: REPORT_DIR/repeat-1, repeat-2 side by side, REPORT_DIR/results.json pointing into
// repeat-1 (its artifacts exist there).
TEST_F(FirstHourTest, RepeatsPrintOneSummaryAndLayTheirFoldersFlat) {
  write("s/a.toml", small("fh.rep"));
  const std::string db = dir_ + "/b.db";
  const auto rec = lockstep("record " + quote(dir_ + "/s") + " --baseline " + quote(db) + " --repeat 2 --report-dir " + quote(dir_ + "/rec"));
  EXPECT_EQ(rec.code, 0) << rec.out << rec.err;
  auto count = [](const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(rec.out, " passed, "), 1u) << rec.out;
  const std::string report = dir_ + "/chk";
  const auto chk = lockstep("run " + quote(dir_ + "/s") + " --baseline " + quote(db) + " --repeat 2 --report-dir " + quote(report));
  EXPECT_EQ(chk.code, 0) << chk.out << chk.err;
  EXPECT_EQ(count(chk.out, " passed, "), 1u) << chk.out;
  EXPECT_TRUE(fs::is_directory(report + "/repeat-1")) << chk.out;
  EXPECT_TRUE(fs::is_directory(report + "/repeat-2")) << chk.out;
  const auto j = results(report);
  ASSERT_TRUE(j.is_object());
  const std::string artifacts = j["scenarios"][0].value("artifacts", "");
  EXPECT_EQ(artifacts.rfind("repeat-1/", 0), 0u) << artifacts;
  EXPECT_TRUE(fs::exists(report + "/" + artifacts + "/rank0.log")) << artifacts;
  EXPECT_TRUE(fs::exists(report + "/report.md"));
  EXPECT_TRUE(fs::exists(report + "/baseline/index.html")) << "run --baseline writes the baseline's HTML report";
  EXPECT_CONTAINS(chk.out, "baseline report: " + report + "/baseline/index.html");
}

}  // namespace

namespace {

// A training script given to `run` (where a scenario file belongs) is refused with a pointer to
// `lockstep torchrun`, not a TOML parse error.
TEST_F(FirstHourTest, AScriptGivenToRunPointsToTorchrun) {
  const std::string script = write("train.py", "import torch\n");
  const auto r = lockstep("run " + quote(script) + " --report-dir " + quote(dir_ + "/r"));
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_CONTAINS(r.err, "a Python program, not a scenario file");
  EXPECT_CONTAINS(r.err, "lockstep torchrun");
}

}  // namespace
