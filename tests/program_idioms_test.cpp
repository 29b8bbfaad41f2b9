// Training idioms in a user's program, unchanged under lockstep (scenarios/programs/ddp_idioms):
// an LR scheduler (which needs the optimizer's step to stay a bound method), autocast, gradient
// accumulation with no_sync(), clipping, two optimizers. The expected digest comes from the same
// program run natively (torchrun's variables, no lockstep), never from lockstep's output; the
// expected step count is the program's iteration count.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

constexpr const char* kTrain = LOCKSTEP_SOURCE_DIR "/scenarios/programs/ddp_idioms/train.py";

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The interpreters to try: Debian's torch 1.13, and ci/setup's torch 2.x venv.
std::string venv_python() {
  std::string out;
  if (FILE* p = ::popen(LOCKSTEP_SOURCE_DIR "/ci/setup --program-python", "r")) {
    char buf[512];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    ::pclose(p);
  }
  return out.substr(0, out.find_last_not_of("\n") + 1);
}

std::string python_for(const std::string& which) { return which == "debian" ? "/usr/bin/python3" : venv_python(); }

bool has_torch(const std::string& python) {
  return !python.empty() && fs::exists(python) &&
         std::system(("'" + python + "' -c 'import torch' >/dev/null 2>&1").c_str()) == 0;
}

// `args` run natively over 2 ranks (torchrun's variables, each rank a process); rank 0 writes the
// replicas' digest to `digest_file`. Returns the shell's exit status.
int run_native(const std::string& python, const std::string& args, const std::string& digest_file, const std::string& log) {
  const int port = 20000 + static_cast<int>(::getpid() % 20000);
  const std::string script = digest_file + ".sh";
  std::ofstream(script) << "pids=\nfor r in 0 1; do\n  MASTER_ADDR=127.0.0.1 MASTER_PORT=" << port
                        << " RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 timeout 300 '" << python << "' " << kTrain << ' '
                        << args << " --digest-out '" << digest_file << "' >>'" << log << "' 2>&1 &\n  pids=\"$pids $!\"\ndone\n"
                        << "rc=0\nfor p in $pids; do wait $p || rc=1; done\nexit $rc\n";
  return std::system(("bash '" + script + "'").c_str());
}

class ProgramIdiomsTest : public ::testing::TestWithParam<std::string> {};

// StepLR, bf16 autocast (with GradScaler where the torch has one for the CPU), accumulation over 2
// micro-batches with no_sync, clipping, a logging all-reduce after the optimizer's step: under
// lockstep the program passes with the digest it has natively, and 12 iterations are 12 steps.
// Two optimizers built before init_process_group and OneCycleLR: one step per iteration, not two.
TEST_P(ProgramIdiomsTest, SchedulersAmpAndAccumulationRunUnchangedWithTheirNativeDigest) {
  const std::string python = python_for(GetParam());
  if (!has_torch(python)) GTEST_SKIP() << "no interpreter with torch for '" << GetParam() << "' (ci/setup makes both)";
  test::TempDir tmp("lockstep_idioms");
  struct Case {
    std::string name, args;
    int steps;
  };
  for (const Case& c : {Case{"steplr", "--steps 12 --amp --scheduler steplr", 12},
                        Case{"onecycle2", "--steps 8 --scheduler onecycle --optimizers 2 --early", 8}}) {
    const std::string native = tmp.path() + "/native-" + c.name, under = tmp.path() + "/under-" + c.name;
    ASSERT_EQ(run_native(python, c.args, native, tmp.path() + "/native.log"), 0) << c.name << ": " << read_all(tmp.path() + "/native.log");
    const std::string expected = first_line(native);
    ASSERT_FALSE(expected.empty()) << c.name << ": the native run wrote no digest";
    std::ostringstream hex;
    hex << std::hex << std::stoull(expected);
    const std::string report = tmp.path() + "/r-" + c.name;
    const auto r = test::run_cli(LOCKSTEP_BINARY,
                                 "torchrun --nproc-per-node 2 --python '" + python + "' --report-dir '" + report + "' " + kTrain + ' ' +
                                     c.args + " --digest-out '" + under + "'",
                                 tmp.path());
    EXPECT_EQ(r.code, 0) << c.name << ": " << r.out << r.err;
    std::ifstream in(report + "/results.json");
    ASSERT_TRUE(in) << r.out << r.err;
    const auto s = nlohmann::json::parse(in).at("scenarios").at(0);
    EXPECT_EQ(s.at("status"), "pass") << s.dump();
    EXPECT_FALSE(s.contains("diagnosis") && !s.at("diagnosis").is_null()) << s.dump();
    EXPECT_EQ(s.value("digest", ""), hex.str()) << c.name << ": lockstep's digest is not the native run's";
    EXPECT_EQ(first_line(under), expected) << c.name << ": the program's own digest changed under lockstep";
    EXPECT_EQ(s.at("metrics").at("program_steps").get<double>(), c.steps) << s.dump();
  }
}

// A dtype fault in the logging all-reduce that follows optimizer.step() at iteration 5 is step 5
// (the iteration it belongs to), on every torch.
TEST_P(ProgramIdiomsTest, ACallAfterTheOptimizerStepBelongsToItsIteration) {
  const std::string python = python_for(GetParam());
  if (!has_torch(python)) GTEST_SKIP() << "no interpreter with torch for '" << GetParam() << "' (ci/setup makes both)";
  test::TempDir tmp("lockstep_idioms_step");
  const std::string report = tmp.path() + "/r";
  const auto r = test::run_cli(LOCKSTEP_BINARY,
                               "torchrun --nproc-per-node 2 --python '" + python + "' --report-dir '" + report + "' " + kTrain +
                                   " --steps 12 --amp --bug log-f64 --bug-rank 1 --bug-step 5",
                               tmp.path());
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  std::ifstream in(report + "/results.json");
  ASSERT_TRUE(in) << r.out << r.err;
  const auto d = nlohmann::json::parse(in).at("scenarios").at(0).at("diagnosis");
  EXPECT_EQ(d.at("kind"), "collective_mismatch") << d.dump();
  EXPECT_EQ(d.at("rank"), 1) << d.dump();
  EXPECT_EQ(d.at("step"), 5) << d.dump();
}

// An uncaught exception is rank_failure with the program's step in the structured field, and the
// message quotes the exception and the program's line that raised it (train.py's `raise`).
TEST_P(ProgramIdiomsTest, AnExceptionIsQuotedWithItsLineAndStep) {
  const std::string python = python_for(GetParam());
  if (!has_torch(python)) GTEST_SKIP() << "no interpreter with torch for '" << GetParam() << "' (ci/setup makes both)";
  int raise_line = 0, n = 0;
  {
    std::ifstream src(kTrain);
    for (std::string line; std::getline(src, line);) {
      ++n;
      if (line.find("raise ValueError(") != std::string::npos) raise_line = n;
    }
  }
  ASSERT_GT(raise_line, 0);
  test::TempDir tmp("lockstep_idioms_raise");
  const std::string report = tmp.path() + "/r";
  const auto r = test::run_cli(LOCKSTEP_BINARY,
                               "torchrun --nproc-per-node 2 --python '" + python + "' --report-dir '" + report + "' " + kTrain +
                                   " --steps 12 --bug exit-early --bug-rank 1 --bug-step 5",
                               tmp.path());
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  std::ifstream in(report + "/results.json");
  ASSERT_TRUE(in) << r.out << r.err;
  const auto d = nlohmann::json::parse(in).at("scenarios").at(0).at("diagnosis");
  EXPECT_EQ(d.at("kind"), "rank_failure") << d.dump();
  EXPECT_EQ(d.at("rank"), 1) << d.dump();
  EXPECT_EQ(d.at("step"), 5) << d.dump();
  const std::string message = d.at("message");
  EXPECT_NE(message.find("ValueError: rank 1 found a bad batch at iteration 5"), std::string::npos) << message;
  EXPECT_NE(message.find("raised at train.py:" + std::to_string(raise_line)), std::string::npos) << message;
}

INSTANTIATE_TEST_SUITE_P(Torches, ProgramIdiomsTest, ::testing::Values("debian", "venv"));

}  // namespace
}  // namespace lockstep
