#include "harness/launch/system_run.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <mutex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "harness/core/error.h"
#include "harness/launch/cancel.h"
#include "harness/launch/processes.h"
#include "harness/launch/watchdog.h"
#include "harness/rank/rank_main.h"
#include "harness/sut/capability.h"
#include "harness/sut/io.h"
#include "reference/io/npy.h"
#include "lockstep/config.h"

namespace lockstep::launch {
namespace {

namespace fs = std::filesystem;

constexpr auto kSettle = std::chrono::milliseconds(400);
constexpr auto kPoll = std::chrono::milliseconds(5);
constexpr auto kProgressPoll = std::chrono::milliseconds(100);
constexpr double kImportTimeoutS = 120;

// `name` as execve takes it: unchanged when it has a '/', else found on $PATH.
std::string resolve_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string d; std::getline(dirs, d, ':');) {
    const fs::path candidate = fs::path(d.empty() ? "." : d) / name;
    if (access(candidate.c_str(), X_OK) == 0 && !fs::is_directory(candidate)) return candidate.string();
  }
  throw InputError("system command '" + name + "' is not on PATH");
}

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read it, close).
int free_loopback_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  LOCKSTEP_CHECK(fd >= 0, "socket: ", std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int err = errno;
  close(fd);
  LOCKSTEP_CHECK(ok, "cannot find a free loopback port: ", std::strerror(err));
  return ntohs(addr.sin_port);
}

// The line of a rank's log that says why it ended: the exception line of the last Python
// traceback when there is one, else the last line that is not a warning.
std::string last_line(const std::string& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(line);
  }
  std::string pick;
  std::size_t tb = lines.size();
  for (std::size_t i = lines.size(); i-- > 0;) {
    if (lines[i].rfind("Traceback (most recent call last):", 0) == 0) {
      tb = i;
      break;
    }
  }
  if (tb < lines.size()) {
    for (std::size_t i = tb + 1; i < lines.size(); ++i) {
      if (lines[i][0] != ' ') {
        pick = lines[i];
        break;
      }
    }
  }
  for (std::size_t i = lines.size(); pick.empty() && i-- > 0;) {
    if (lines[i].find("Warning:") == std::string::npos && lines[i][0] != ' ') pick = lines[i];
  }
  if (pick.size() > 300) pick = pick.substr(0, 300) + "...";
  return pick;
}


std::vector<std::string> base_env() {
  std::vector<std::string> env = inherited_env({"PYTHONPATH", "LOCKSTEP_SUT_INPUTS", "LOCKSTEP_SUT_OUTPUTS"});
  const char* pp = std::getenv("PYTHONPATH");
  env.push_back(std::string("PYTHONPATH=") + LOCKSTEP_SOURCE_DIR + "/harness/sut/python" + (pp && *pp ? std::string(":") + pp : ""));
  env.push_back("PYTHONUNBUFFERED=1");
  return env;
}

// Runs argv to completion (or kills it after timeout_s); returns its exit code (-1 when
// killed or signalled) and the last line of its output.
int run_quietly(const std::vector<std::string>& argv, double timeout_s, std::string& last, const std::vector<std::string>& extra_env = {}) {
  char log[] = "/tmp/lockstep-probe-XXXXXX";
  const int fd = mkstemp(log);
  if (fd >= 0) close(fd);
  int code = -1;
  {
    RankProcesses p;
    std::vector<std::string> env = base_env();
    for (const auto& kv : extra_env) {
      const std::string key = kv.substr(0, kv.find('=') + 1);
      std::erase_if(env, [&](const std::string& x) { return x.rfind(key, 0) == 0; });
      env.push_back(kv);
    }
    p.spawn(argv, env, log);
    const auto t0 = Clock::now();
    while (!p.reap() && Clock::now() - t0 < std::chrono::duration<double>(timeout_s)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    p.kill_all();
    const int st = p.children()[0].status;
    if (WIFEXITED(st)) code = WEXITSTATUS(st);
  }
  last = last_line(log);
  std::remove(log);
  return code;
}

// Starts the system's command once per rank (run `run`), watches the ranks and returns the
// diagnosis of a crash, an exit without outputs or a hang, or nullopt when every rank finished.
std::optional<Diagnosis> launch_once(const scenario::Scenario& s, const std::vector<std::string>& argv, const std::string& dir,
                                     const std::string& outputs, int run, double& run_s) {
  const auto& sys = *s.system;
  const int ws = s.world_size;
  std::optional<Diagnosis> d;
  const std::string log_suffix = run ? ".run" + std::to_string(run) : "";
  const std::string inputs = dir + "/sut/inputs";
  // A free loopback port for MASTER_PORT: rank 0 of a torch.distributed system hosts the store
  // there, as under torchrun --standalone (hosting it here would tie every system to the
  // TCPStore protocol of lockstep's own LibTorch).
  const int port = free_loopback_port();
  RankProcesses procs;
  const auto t0 = Clock::now();
  for (int r = 0; r < ws; ++r) {
    const std::string rank_out = outputs + "/rank" + std::to_string(r);
    fs::create_directories(rank_out);
    std::vector<std::string> env = base_env();
    for (auto& kv : torchrun_env(r, ws, s.ranks_per_node, port)) env.push_back(std::move(kv));
    env.push_back("LOCKSTEP_SUT_INPUTS=" + fs::absolute(inputs).string());
    env.push_back("LOCKSTEP_SUT_OUTPUTS=" + fs::absolute(rank_out).string());
    for (const auto& kv : sys.env) {  // [system] env overrides what lockstep set
      const std::string key = kv.substr(0, kv.find('=') + 1);
      std::erase_if(env, [&](const std::string& e) { return e.rfind(key, 0) == 0; });
      env.push_back(kv);
    }
    procs.spawn(argv, env, rank::log_path(dir, r) + log_suffix);
  }

  // Watch: progress is an exit or a change of a rank's progress.json.
  auto done_file = [&](int r) { return outputs + "/rank" + std::to_string(r) + "/done.json"; };
  auto progress_of = [&](int r) {
    std::ifstream in(outputs + "/rank" + std::to_string(r) + "/progress.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return text;
  };
  std::vector<std::string> progress(static_cast<std::size_t>(ws));
  std::vector<std::int64_t> moves(static_cast<std::size_t>(ws), 0);
  // Watch (watchdog.h): a rank has started once it reported progress (lockstep_sut.start()
  // does, after the adapter's imports), or exited.
  Watchdog dog(ws, watchdog_limits(s), t0);
  Watchdog::Verdict verdict = Watchdog::Verdict::kWatch;
  std::vector<Watchdog::Rank> seen(static_cast<std::size_t>(ws));
  auto last_progress_poll = Clock::now() - kProgressPoll;
  while (verdict == Watchdog::Verdict::kWatch && !cancelled()) {
    procs.reap();
    const bool poll_files = Clock::now() - last_progress_poll >= kProgressPoll;
    if (poll_files) last_progress_poll = Clock::now();
    for (int r = 0; r < ws; ++r) {
      const auto i = static_cast<std::size_t>(r);
      const auto& c = procs.children()[i];
      if (poll_files) {
        std::string p = progress_of(r);
        if (p != progress[i]) {
          progress[i] = std::move(p);
          ++moves[i];
        }
      }
      auto& k = seen[i];
      k.exited = c.exited;
      k.bad_exit = c.exited && !(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0 && fs::exists(done_file(r)));
      k.started = moves[i] > 0;
      k.progress = moves[i];
    }
    verdict = dog.observe(seen, Clock::now());
    if (verdict == Watchdog::Verdict::kWatch) std::this_thread::sleep_for(kPoll);
  }
  if (verdict == Watchdog::Verdict::kWatch) throw Error("cancelled by " + cancel_signal_name());
  const bool timed_out = verdict == Watchdog::Verdict::kTimeout;
  int exits = 0;
  for (const auto& c : procs.children()) exits += c.exited;
  procs.reap();
  run_s = std::chrono::duration<double>(Clock::now() - t0).count();
  auto& kids = procs.children();
  auto what_of = [&](int r) {
    try {
      auto j = nlohmann::json::parse(progress[static_cast<std::size_t>(r)]);
      return j.value("what", std::string());
    } catch (...) {
      return std::string();
    }
  };

  // 1. The earliest rank that crashed or exited with an error.
  int first_rank = -1;
  for (int r = 0; r < ws; ++r) {
    const auto& c = kids[static_cast<std::size_t>(r)];
    if (!c.exited || (WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0)) continue;
    if (first_rank < 0 || c.exit_time < kids[static_cast<std::size_t>(first_rank)].exit_time) first_rank = r;
  }
  if (first_rank >= 0) {
    const auto& c = kids[static_cast<std::size_t>(first_rank)];
    std::ostringstream os;
    os << "rank " << first_rank << " (system " << sys.name << ") ";
    if (WIFSIGNALED(c.status)) os << "was killed by " << signal_name(WTERMSIG(c.status));
    else os << "exited with code " << WEXITSTATUS(c.status);
    if (const std::string w = what_of(first_rank); !w.empty()) os << " while " << w;
    if (const std::string l = last_line(rank::log_path(dir, first_rank) + log_suffix); !l.empty()) os << ": " << l;
    d = Diagnosis{DiagnosisKind::kRankFailure, os.str(), first_rank, -1};
  }
  // 2. A rank that exited cleanly without its outputs.
  for (int r = 0; r < ws && !d; ++r) {
    const auto& c = kids[static_cast<std::size_t>(r)];
    if (c.exited && WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0 && !fs::exists(done_file(r))) {
      d = Diagnosis{DiagnosisKind::kMissingParticipant,
                                "rank " + std::to_string(r) + " (system " + sys.name +
                                    ") exited (code 0) without finishing its outputs: no done.json (the adapter never called "
                                    "Outputs.finish())",
                                r, -1};
    }
  }
  // 3. Start-up past its bound: the ranks that never got to lockstep_sut.start().
  if (!d && verdict == Watchdog::Verdict::kStartupTimeout) {
    const auto& starting = dog.starting();
    std::ostringstream os;
    os << "start-up took longer than " << s.startup_timeout_s << " s (run.startup_timeout_s): ";
    for (std::size_t i = 0; i < starting.size(); ++i) os << (i ? "," : (starting.size() == 1 ? "rank " : "ranks ")) << starting[i];
    os << " (system " << sys.name << ") never reached lockstep_sut.start() (its imports or set-up are still running)";
    const bool some_started = static_cast<int>(starting.size()) < ws - exits;
    if (some_started) os << "; the other ranks started";
    d = Diagnosis{DiagnosisKind::kTimeout, os.str(), some_started ? starting.front() : -1, -1};
  }
  if (!d && verdict == Watchdog::Verdict::kDeadline) {
    std::ostringstream os;
    os << "the run did not end within run.deadline_s = " << s.deadline_s << " s (its last progress was " << std::fixed
       << std::setprecision(1) << dog.idle_seconds() << " s before)";
    for (int r = 0; r < ws; ++r) {
      if (const std::string w = what_of(r); !w.empty()) os << "; rank " << r << " last reported: " << w;
    }
    d = Diagnosis{DiagnosisKind::kTimeout, os.str(), -1, -1};
  }
  // 5. No progress for timeout_s.
  if (!d && timed_out) {
    std::vector<int> running;
    for (int r = 0; r < ws; ++r) {
      if (!kids[static_cast<std::size_t>(r)].exited) running.push_back(r);
    }
    std::ostringstream os;
    os << "no progress for " << s.timeout_s << " s: ";
    for (std::size_t i = 0; i < running.size(); ++i) {
      const std::string w = what_of(running[i]);
      os << (i ? "; " : "") << "rank " << running[i] << " still running" << (w.empty() ? " (it reported no progress)" : " (last reported: " + w + ")");
    }
    if (exits > 0) os << "; " << exits << " of " << ws << " ranks finished";
    // Blame the stuck ranks when others finished; with none finished, nobody is singled out.
    const int blamed = exits > 0 && !running.empty() ? running.front() : -1;
    d = Diagnosis{DiagnosisKind::kTimeout, os.str(), blamed, -1};
  }
  procs.kill_all();

  if (d && run) d->message = "run " + std::to_string(run) + ": " + d->message;
  return d;
}

// The first output that differs between two runs' rank folders, described; "" when none.
std::string first_difference(const std::string& a, const std::string& b, int rank) {
  nlohmann::json da, db;
  try {
    da = nlohmann::json::parse(std::ifstream(a + "/done.json"));
    db = nlohmann::json::parse(std::ifstream(b + "/done.json"));
  } catch (...) {
    return "";
  }
  const auto rej_a = da.value("rejected", nlohmann::json::object()), rej_b = db.value("rejected", nlohmann::json::object());
  if (rej_a != rej_b) return "rank " + std::to_string(rank) + ": the calls the system rejected differ: " + rej_a.dump() + " vs " + rej_b.dump();
  const auto arr_a = da.value("arrays", nlohmann::json::object());
  for (auto it = arr_a.begin(); it != arr_a.end(); ++it) {
    const std::string file = it.value().value("file", it.key() + ".npy");
    io::NpyArray x, y;
    try {
      x = io::read_npy(a + "/" + file);
      y = io::read_npy(b + "/" + file);
    } catch (const std::exception& e) {
      return "rank " + std::to_string(rank) + ": output '" + it.key() + "' is missing in one run";
    }
    if (x.descr == y.descr && x.shape == y.shape && x.data == y.data) continue;
    std::ostringstream os;
    os << "rank " << rank << ": output '" << it.key() << "'";
    if (x.shape != y.shape || x.descr != y.descr) {
      os << " has shape/dtype " << nlohmann::json(x.shape).dump() << " " << x.descr << " in one run and " << nlohmann::json(y.shape).dump() << " " << y.descr
         << " in the other";
      return os.str();
    }
    const std::size_t item = io::npy_item_size(x.descr);
    std::size_t i = 0;
    while (i < x.data.size() && x.data[i] == y.data[i]) ++i;
    const std::size_t elem = i / item;
    os << " differs first at element " << elem;
    if (x.descr == "<i8") {
      const std::size_t row_len = x.shape.size() == 2 ? static_cast<std::size_t>(x.shape[1]) : 1;
      const std::size_t row = elem / row_len;
      auto row_of = [&](const io::NpyArray& arr) {
        std::vector<std::int64_t> v(row_len);
        std::memcpy(v.data(), arr.data.data() + row * row_len * 8, row_len * 8);
        return nlohmann::json(v).dump();
      };
      os << " (row " << row << ": " << row_of(x) << " vs " << row_of(y) << ")";
    }
    return os.str();
  }
  return "";
}

}  // namespace

std::string python_interpreter() {
  const char* p = std::getenv("LOCKSTEP_PYTHON");
  return p && *p ? p : "python3";
}

namespace {

// Why the interpreter cannot import `modules` ("" when it can); cached. `extra_env` is added to
// the probe's environment (a PYTHONPATH).
std::string import_skip_reason(const std::vector<std::string>& modules, const std::string& hint,
                               const std::vector<std::string>& extra_env = {}) {
  if (modules.empty()) return "";
  static std::mutex mu;
  static std::map<std::string, std::string> cache;
  std::string list;
  for (const auto& m : modules) list += (list.empty() ? "" : ", ") + m;
  const std::string python = python_interpreter();
  std::lock_guard<std::mutex> lock(mu);
  std::string key = python + "|" + list;
  for (const auto& e : extra_env) key += "|" + e;
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  std::string reason;
  try {
    std::string last;
    const int code = run_quietly({resolve_program(python), "-c", "import " + list}, kImportTimeoutS, last, extra_env);
    if (code != 0) {
      reason = "requires python modules " + list + ": " + python + " cannot import them (" + (last.empty() ? "exit " + std::to_string(code) : last) +
               "); " + hint;
    }
  } catch (const InputError& e) {
    reason = std::string("requires python modules ") + list + ": " + e.what() + "; set LOCKSTEP_PYTHON";
  }
  cache[key] = reason;
  return reason;
}

// build/python beside this lockstep binary: where _lockstep_c10d was built.
std::string backend_module_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("python") : (exe.parent_path() / "python").string();
}

std::string backend_pythonpath() {
  const char* pp = std::getenv("PYTHONPATH");
  return std::string("PYTHONPATH=") + LOCKSTEP_SOURCE_DIR + "/harness/pytorch/python:" + backend_module_dir() +
         (pp && *pp ? std::string(":") + pp : "");
}

}  // namespace

std::string system_skip_reason(const scenario::Scenario& s) {
  if (!s.system) return "";
  return import_skip_reason(s.system->python_modules, "set LOCKSTEP_PYTHON to an interpreter that has them (ci/systems builds them)");
}

std::string program_skip_reason(const scenario::Scenario& s) {
  if (!s.program) return "";
  if (std::string why = import_skip_reason(s.program->python_modules, "set LOCKSTEP_PYTHON to an interpreter that has them"); !why.empty()) {
    return why;
  }
  if (s.program->wrap == "none") return "";
  if (!LOCKSTEP_HAVE_PYTORCH_BACKEND) {
    return "this build of lockstep has no PyTorch backend (it needs the LibTorch line's libtorch_python and the Python headers; see README)";
  }
  // The backend must have been built against the torch this interpreter imports.
  std::string why = import_skip_reason({"torch", "_lockstep_c10d"},
                                       "the PyTorch backend is built against LibTorch " LOCKSTEP_TORCH_VERSION
                                       " (this build's line); set LOCKSTEP_PYTHON to an interpreter whose torch is that version",
                                       {backend_pythonpath()});
  return why;
}

std::vector<std::string> command_argv(const scenario::Scenario& s, const std::vector<std::string>& command) {
  std::vector<std::string> argv;
  const std::string scenario_dir = fs::path(s.file).parent_path().empty() ? "." : fs::path(s.file).parent_path().string();
  for (std::string arg : command) {
    for (const auto& [token, value] : {std::pair<std::string, std::string>{"{python}", python_interpreter()}, {"{dir}", scenario_dir}}) {
      for (auto at = arg.find(token); at != std::string::npos; at = arg.find(token, at + value.size())) arg.replace(at, token.size(), value);
    }
    argv.push_back(arg);
  }
  argv[0] = resolve_program(argv[0]);
  return argv;
}

std::vector<std::string> program_env(const scenario::Scenario& s, int rank, int port, const std::string& dir, const std::string& board) {
  std::vector<std::string> env = inherited_env({"PYTHONPATH"});
  for (auto& kv : torchrun_env(rank, s.world_size, s.ranks_per_node, port)) env.push_back(std::move(kv));
  env.push_back(backend_pythonpath());
  env.push_back("PYTHONUNBUFFERED=1");
  env.push_back("LOCKSTEP_C10D=1");
  env.push_back("LOCKSTEP_C10D_WRAP=" + s.program->wrap);
  env.push_back("LOCKSTEP_BOARD=" + fs::absolute(board).string());
  env.push_back("LOCKSTEP_STATUS=" + fs::absolute(rank::status_path(dir, rank)).string());
  env.push_back("LOCKSTEP_TRACE=" + fs::absolute(rank::trace_path(dir, rank)).string());
  env.push_back("LOCKSTEP_VERIFY=" + std::string(scenario::to_string(s.verify)));
  std::ostringstream t, e;
  t << s.timeout_s;
  e << engine_timeout_s(s);
  env.push_back("LOCKSTEP_TIMEOUT_S=" + t.str());
  env.push_back("LOCKSTEP_ENGINE_TIMEOUT_S=" + e.str());
  // A program on NCCL (a GPU program) is seen by lockstep's NCCL profiler plugin, built beside
  // this binary: its traces go to <artifacts>/nccl/comm-<hash>/ (harness/nccl_profiler/README.md).
  const fs::path plugin = fs::path(backend_module_dir()).parent_path() / "lib" / "libnccl-profiler-lockstep.so";
  if (std::error_code ec; fs::exists(plugin, ec)) {
    env.push_back("NCCL_PROFILER_PLUGIN=" + plugin.string());
    env.push_back("LOCKSTEP_NCCL_TRACE_DIR=" + fs::absolute(dir + "/nccl").string());
  }
  for (const auto& kv : s.program->env) {  // the scenario's env overrides what lockstep set
    const std::string key = kv.substr(0, kv.find('=') + 1);
    std::erase_if(env, [&](const std::string& x) { return x.rfind(key, 0) == 0; });
    env.push_back(kv);
  }
  return env;
}

int loopback_port() { return free_loopback_port(); }

std::string log_last_line(const std::string& file) { return last_line(file); }

SystemOutcome run_system(const scenario::Scenario& s, const LaunchOptions& options, const std::string& dir) {
  SystemOutcome out;
  const auto& sys = *s.system;
  const sut::Capability* cap = sut::find_capability(s.workload);
  LOCKSTEP_CHECK(cap, "no capability '", s.workload, "'");
  const std::string inputs = dir + "/sut/inputs", outputs = dir + "/sut/outputs";
  const int ws = s.world_size;
  try {
    sut::InputWriter writer(inputs, cap->name, s.id(), sys.name, ws, s.seed);
    cap->write_inputs(s, writer);
    writer.finish();
  } catch (const InputError& e) {
    out.error = e.what();
    return out;
  }
  std::vector<std::string> argv;
  try {
    argv = command_argv(s, sys.command);
  } catch (const InputError& e) {
    out.error = sys.where + ": system.command: " + e.what();
    return out;
  }

  double run_s = 0;
  out.diagnosis = launch_once(s, argv, dir, outputs, 0, run_s);

  // Judge the outputs of run 0, then run the system again in fresh processes while their
  // outputs keep the same digest (stopping at the first run that differs).
  if (!out.diagnosis) {
    try {
      const sut::SystemOutputs outs(outputs, ws);
      for (const auto& [k, v] : outs.metrics()) out.metrics[k] = v;
      out.notes = outs.notes();
      std::string ident;
      const auto system = outs.system();
      for (const auto& [k, v] : system) ident += (ident.empty() ? "" : ", ") + k + " " + v;
      out.system = ident;
      sut::CheckResult res = cap->check(s, outs);
      out.digest = res.digest;
      for (int run = 1; run < sys.runs; ++run) {
        const std::string other_dir = outputs + "/run" + std::to_string(run);
        double t = 0;
        if (auto d = launch_once(s, argv, dir, other_dir, run, t)) throw DiagnosisError(*d);
        run_s += t;
        sut::CheckResult other;
        try {
          other = cap->check(s, sut::SystemOutputs(other_dir, ws));
        } catch (DiagnosisError& e) {
          Diagnosis d = e.diagnosis();
          d.message = "run " + std::to_string(run) + " (a fresh process): " + d.message;
          throw DiagnosisError(d);
        }
        if (other.digest == res.digest) continue;
        std::string where;
        for (int r = 0; r < ws && where.empty(); ++r) {
          where = first_difference(outputs + "/rank" + std::to_string(r), other_dir + "/rank" + std::to_string(r), r);
        }
        int blamed = -1;
        if (where.rfind("rank ", 0) == 0) blamed = std::stoi(where.substr(5));
        throw DiagnosisError(Diagnosis{DiagnosisKind::kNondeterminism,
                                       "system " + sys.name + ": run 0 and run " + std::to_string(run) +
                                           " (fresh processes, the same inputs and seed) gave different outputs (digest " + res.digest +
                                           " vs " + other.digest + ")" + (where.empty() ? "" : ": " + where),
                                       blamed, -1});
      }
      for (const auto& [k, v] : res.metrics) out.metrics[k] = v;
      out.notes.insert(out.notes.begin(), res.notes.begin(), res.notes.end());
    } catch (const DiagnosisError& e) {
      out.diagnosis = e.diagnosis();
    } catch (const std::exception& e) {
      out.error = std::string("checking the outputs of system ") + sys.name + ": " + e.what();
    }
  }
  // A digest stands for outputs that passed; a diagnosed run has none (as lockstep's own ranks).
  if (out.diagnosis) out.digest.clear();
  out.metrics["system_run_s"] = run_s;
  if (options.dump) {
    const fs::path dump = fs::path(options.report_dir) / "dump" / s.slug();
    std::error_code ec;
    fs::remove_all(dump, ec);
    fs::create_directories(dump, ec);
    fs::copy(dir + "/sut", dump, fs::copy_options::recursive, ec);
    if (ec) out.notes.push_back("--dump: could not copy the inputs and outputs: " + ec.message());
    if (cap->write_expected) {
      try {
        sut::InputWriter w((dump / "expected").string(), cap->name, s.id(), sys.name, ws, s.seed);
        w.schema("lockstep.sut.expected");
        cap->write_expected(s, w);
        w.finish();
      } catch (const std::exception& e) {
        out.notes.push_back(std::string("--dump: could not write the expected outputs: ") + e.what());
      }
    }
  }
  return out;
}

}  // namespace lockstep::launch
