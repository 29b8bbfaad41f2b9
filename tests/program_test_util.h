#pragma once
// What the tests of users' programs under lockstep share: which interpreters to run them with
// (Debian's torch 1.13, ci/setup's torch 2.x venv), and reading a run's one result.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <unistd.h>

#include <nlohmann/json.hpp>

namespace lockstep::test {

// ci/setup's torch 2.x interpreter, "" when it has none.
inline std::string venv_python() {
  std::string out;
  if (FILE* p = ::popen(LOCKSTEP_SOURCE_DIR "/ci/setup --program-python", "r")) {
    char buf[512];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    ::pclose(p);
  }
  return out.substr(0, out.find_last_not_of("\n") + 1);
}

// The interpreter of a system's venv that `ci/systems NAME` makes (e.g. "torchrec-1.9.2"), under
// $LOCKSTEP_DEPS (default ~/.cache/lockstep); it may not exist (ci/systems is run on purpose).
inline std::string systems_python(const std::string& name) {
  const char* deps = std::getenv("LOCKSTEP_DEPS");
  const char* home = std::getenv("HOME");
  const std::string root = deps && *deps ? deps : std::string(home ? home : "") + "/.cache/lockstep";
  return root + "/systems/" + name + "/bin/python";
}

// "debian": Debian's python3 (torch 1.13); anything else: the venv's.
inline std::string python_for(const std::string& which) { return which == "debian" ? "/usr/bin/python3" : venv_python(); }

// Whether `python` exists and imports `module`.
inline bool imports(const std::string& python, const std::string& module = "torch") {
  return !python.empty() && std::filesystem::exists(python) &&
         std::system(("'" + python + "' -c 'import " + module + "' >/dev/null 2>&1").c_str()) == 0;
}

// The first line of a file ("" when it has none).
inline std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The one scenario result of REPORT/results.json; null when there is none.
inline nlohmann::json only_result(const std::string& report) {
  std::ifstream in(report + "/results.json");
  if (!in) return nullptr;
  return nlohmann::json::parse(in).at("scenarios").at(0);
}

// torch 2.15.0 now and then aborts a process at interpreter exit, after the program's work is
// done, natively too: "terminate called without an active exception" (a thread of its own left
// joinable). Whether the run reported in REPORT (results.json) ended that way: a rank_failure
// whose rank log holds torch's line.
constexpr const char* kTorchExitAbortLine = "terminate called without an active exception";

inline bool torch_exit_aborted(const std::string& report) {
  const nlohmann::json s = only_result(report);
  if (s.is_null() || !s.contains("diagnosis") || s.at("diagnosis").is_null()) return false;
  if (s.at("diagnosis").value("kind", "") != "rank_failure") return false;
  const std::string dir = report + "/" + s.value("artifacts", "");
  for (int r = 0; r < 64; ++r) {
    std::ifstream in(dir + "/rank" + std::to_string(r) + ".log");
    if (!in) break;
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.find(kTorchExitAbortLine) != std::string::npos) return true;
  }
  return false;
}

// How many times a run that torch's exit abort ended is run in all (it is torch's, after the work
// lockstep checks, and happens natively too; under a loaded CI machine two in a row were seen).
constexpr int kTorchExitAbortRuns = 3;

// Runs `run` (a lockstep run writing REPORT) again while torch's exit abort ends it, up to
// kTorchExitAbortRuns in all.
template <class Run>
auto again_on_torch_exit_abort(Run run, const std::string& report) {
  auto r = run();
  for (int n = 1; n < kTorchExitAbortRuns && r.code != 0 && torch_exit_aborted(report); ++n) {
    std::filesystem::remove_all(report);
    r = run();
  }
  return r;
}

// A native run: its exit status (0 when every rank exited 0) and what its ranks printed.
struct NativeRun {
  int rc = -1;
  std::string log;
};

// `script_args` (a program and its arguments) run natively over `world_size` ranks on one host,
// torchrun's variables set by hand, each rank a process under `timeout 300`, every rank's output
// in `log`. Run again (on another port) while torch's exit abort ends it, up to kTorchExitAbortRuns
// in all; `output` (the file the program writes, its digest) is removed before each run, and an
// earlier run's log kept as `log`.1, .2.
inline NativeRun run_native(const std::string& python, const std::string& script_args, int world_size, const std::string& log,
                            const std::string& output) {
  NativeRun out;
  for (int attempt = 0; attempt < kTorchExitAbortRuns; ++attempt) {
    if (attempt > 0) std::filesystem::rename(log, log + "." + std::to_string(attempt));
    std::filesystem::remove(log);
    std::filesystem::remove(output);
    const int port = 20000 + static_cast<int>((::getpid() + 7919 * attempt) % 20000);
    const std::string script = log + ".sh";
    std::ofstream(script) << "pids=\nfor r in $(seq 0 " << world_size - 1 << "); do\n  MASTER_ADDR=127.0.0.1 MASTER_PORT=" << port
                          << " RANK=$r LOCAL_RANK=$r WORLD_SIZE=" << world_size << " LOCAL_WORLD_SIZE=" << world_size << " timeout 300 '"
                          << python << "' " << script_args << " >>'" << log << "' 2>&1 &\n  pids=\"$pids $!\"\ndone\n"
                          << "rc=0\nfor p in $pids; do wait $p || rc=1; done\nexit $rc\n";
    out.rc = std::system(("bash '" + script + "'").c_str());
    std::ifstream in(log);
    out.log.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (out.rc == 0 || out.log.find(kTorchExitAbortLine) == std::string::npos) break;
  }
  return out;
}

}  // namespace lockstep::test
