#include "harness/launch/python.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "harness/core/env.h"
#include "harness/core/error.h"
#include "harness/launch/contain.h"
#include "harness/launch/processes.h"
#include "harness/launch/watch.h"
#include "harness/rank/runtime.h"
#include "harness/rank/status.h"
#include "lockstep/config.h"

namespace lockstep::launch {
namespace {

namespace fs = std::filesystem;

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

}  // namespace

std::vector<std::string> system_base_env() {
  std::vector<std::string> env = inherited_env({"PYTHONPATH", env::kSutInputs, env::kSutOutputs});
  const char* pp = std::getenv("PYTHONPATH");
  env.push_back(std::string("PYTHONPATH=") + LOCKSTEP_SOURCE_DIR + "/harness/sut/python" + (pp && *pp ? std::string(":") + pp : ""));
  env.push_back("PYTHONUNBUFFERED=1");
  return env;
}

// Runs argv to completion (or kills it after timeout_s); returns its exit code (-1 when
// killed or signalled) and the last line of its output (and, with `output`, all of it).
int run_quietly(const std::vector<std::string>& argv, double timeout_s, std::string& last, const std::vector<std::string>& extra_env = {},
                std::string* output = nullptr) {
  char log[] = "/tmp/lockstep-probe-XXXXXX";
  const int fd = mkstemp(log);
  if (fd >= 0) close(fd);
  int code = -1;
  {
    RankProcesses p;
    std::vector<std::string> env = system_base_env();
    for (const auto& kv : extra_env) set_env(env, kv);
    p.spawn(argv, env, log);
    Watchdog::Limits limits;
    limits.startup_s = limits.timeout_s = limits.deadline_s = timeout_s;
    Watchdog dog(1, limits, Clock::now());
    watch(p, *exit_source(), dog);
    p.kill_all();
    const int st = p.children()[0].status;
    if (WIFEXITED(st)) code = WEXITSTATUS(st);
  }
  last = log_last_line(log);
  if (output) {
    std::ifstream in(log);
    output->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::remove(log);
  return code;
}

std::string python_interpreter() {
  return env::str(env::kPython, "python3");
}

bool uses_python(const scenario::Scenario& s) { return s.program.has_value() || s.system.has_value(); }

void require_interpreter(const std::string& python, const std::string& source) {
  std::string path;
  try {
    path = resolve_program(python);
  } catch (const InputError&) {
    throw InputError(source + ": the interpreter '" + python + "' is not on PATH");
  }
  std::error_code ec;
  if (!fs::exists(path, ec)) throw InputError(source + ": the interpreter '" + python + "' does not exist");
  if (fs::is_directory(path, ec) || access(path.c_str(), X_OK) != 0) {
    throw InputError(source + ": the interpreter '" + python + "' is not an executable file");
  }
  std::string last;
  const int code = run_quietly({path, "-c", "pass"}, 60, last);
  if (code != 0) {
    throw InputError(source + ": the interpreter '" + python + "' does not start (`" + python + " -c pass` exited " +
                     (code < 0 ? std::string("on a signal or timed out") : "with " + std::to_string(code)) +
                     (last.empty() ? "" : ": " + last) + ")");
  }
}

namespace {

// ---- the probes' cache on disk ------------------------------------------------------------
// A probe that imported its modules is remembered across runs (a failed one is not: it is probed
// again, so that installing the missing module takes effect at once). An entry is keyed by the
// interpreter (its path, its real path, size and mtime), the modules, the probe's extra
// environment and PYTHONPATH/PYTHONHOME, and is valid while every file it recorded is unchanged:
// each module's __file__ and each directory on the interpreter's sys.path (a package installed
// or removed there changes the directory's mtime; an in-place upgrade rewrites the module file).

constexpr const char* kFilesMarker = "lockstep-probe-files:";

// "size mtime_ns" of `path`, or "missing".
std::string stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "missing";
  return std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec);
}

// $XDG_CACHE_HOME/lockstep/python-probes, else ~/.cache/lockstep/python-probes; "" without either.
fs::path probe_cache_dir() {
  if (const std::string xdg = env::str("XDG_CACHE_HOME"); !xdg.empty()) return fs::path(xdg) / "lockstep" / "python-probes";
  if (const std::string home = env::str("HOME"); !home.empty()) return fs::path(home) / ".cache" / "lockstep" / "python-probes";
  return {};
}

// The cache key of probing `modules` with `python` (already found on PATH).
std::string probe_key(const std::string& python, const std::string& list, const std::vector<std::string>& extra_env) {
  std::error_code ec;
  const fs::path real = fs::canonical(python, ec);
  std::string key = "python=" + fs::absolute(python).string() + "\nreal=" + (ec ? std::string("?") : real.string()) + " " +
                    stamp(python) + "\nmodules=" + list + "\nPYTHONPATH=" + env::str("PYTHONPATH") +
                    "\nPYTHONHOME=" + env::str("PYTHONHOME") + "\n";
  for (const auto& e : extra_env) key += "env=" + e + "\n";
  return key;
}

// FNV-1a, 64 bits, hex: the entry's file name (the key itself is inside, and compared).
std::string key_name(const std::string& key) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : key) h = (h ^ c) * 1099511628211ULL;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// Whether the cache holds a successful probe for `key` whose recorded files are unchanged.
bool cached_success(const std::string& key) {
  const fs::path dir = probe_cache_dir();
  if (dir.empty()) return false;
  std::ifstream in(dir / key_name(key));
  if (!in) return false;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.compare(0, key.size(), key) != 0) return false;
  std::istringstream files(text.substr(key.size()));
  int checked = 0;
  for (std::string line; std::getline(files, line);) {
    const auto tab = line.find('\t');
    if (tab == std::string::npos) return false;
    if (stamp(line.substr(tab + 1)) != line.substr(0, tab)) return false;
    ++checked;
  }
  return checked > 0;
}

// Records a successful probe: `output` holds the probe's line of files (kFilesMarker, then paths
// separated by tabs). Best effort: a cache that cannot be written is no error.
void remember_success(const std::string& key, const std::string& output) {
  const fs::path dir = probe_cache_dir();
  const auto at = output.rfind(kFilesMarker);
  if (dir.empty() || at == std::string::npos) return;
  std::string line = output.substr(at + std::strlen(kFilesMarker));
  line = line.substr(0, line.find('\n'));
  std::ostringstream entry;
  entry << key;
  std::istringstream paths(line);
  int n = 0;
  for (std::string p; std::getline(paths, p, '\t');) {
    if (p.empty()) continue;
    if (fs::path(p).is_relative()) p = (fs::current_path() / p).string();
    entry << stamp(p) << '\t' << p << '\n';
    ++n;
  }
  if (n == 0) return;
  std::error_code ec;
  fs::create_directories(dir, ec);
  const fs::path tmp = dir / (key_name(key) + ".tmp-" + std::to_string(host_pid()));
  {
    std::ofstream out(tmp);
    out << entry.str();
    if (!out.flush()) {
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, dir / key_name(key), ec);  // atomic: a reader sees the old entry or the new
  if (ec) fs::remove(tmp, ec);
}

// Why the interpreter cannot import `modules` ("" when it can); cached in this process, and on
// disk when it can (probe_imports). `extra_env` is added to the probe's environment (a PYTHONPATH).
std::string import_skip_reason(const std::vector<std::string>& modules, const std::string& hint,
                               const std::vector<std::string>& extra_env = {}) {
  if (modules.empty()) return "";
  static std::mutex mu;
  static std::map<std::string, std::string> cache;
  const std::string python = python_interpreter();
  std::lock_guard<std::mutex> lock(mu);
  std::string key = python;
  for (const auto& m : modules) key += "|" + m;
  for (const auto& e : extra_env) key += "|" + e;
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  return cache[key] = probe_imports(python, modules, hint, extra_env);
}

// build/python beside this lockstep binary: where liblockstep_program.so was built.
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

std::string program_library() { return (fs::path(backend_module_dir()) / "liblockstep_program.so").string(); }

}  // namespace

std::string probe_imports(const std::string& python, const std::vector<std::string>& modules, const std::string& hint,
                          const std::vector<std::string>& extra_env) {
  std::string list;
  for (const auto& m : modules) list += (list.empty() ? "" : ", ") + m;
  try {
    const std::string program = resolve_program(python);
    const std::string disk_key = probe_key(program, list, extra_env);
    if (cached_success(disk_key)) return "";
    // The probe also prints the files its success depends on: each module's __file__ and
    // sys.path's directories.
    std::string names;
    for (const auto& m : modules) names += (names.empty() ? "'" : ", '") + m + "'";
    const std::string code_text = "import " + list + "\nimport sys\nprint('" + kFilesMarker +
                                  "' + '\\t'.join([getattr(sys.modules[m], '__file__', None) or '' for m in [" + names +
                                  "]] + [p for p in sys.path if p]))";
    std::string last, output;
    const int code = run_quietly({program, "-c", code_text}, kImportTimeoutS, last, extra_env, &output);
    if (code != 0) {
      return "requires python modules " + list + ": " + python + " cannot import them (" +
             (last.empty() ? "exit " + std::to_string(code) : last) + "); " + hint;
    }
    remember_success(disk_key, output);
    return "";
  } catch (const InputError& e) {
    return std::string("requires python modules ") + list + ": " + e.what() + "; pass --python PATH (or set LOCKSTEP_PYTHON)";
  }
}

std::string system_skip_reason(const scenario::Scenario& s) {
  if (!s.system) return "";
  return import_skip_reason(s.system->python_modules, "pass --python PATH (or set LOCKSTEP_PYTHON) naming an interpreter that has them (ci/systems builds them)");
}

std::string program_skip_reason(const scenario::Scenario& s) {
  if (!s.program) return "";
  if (std::string why = import_skip_reason(s.program->python_modules, "pass --python PATH (or set LOCKSTEP_PYTHON) naming an interpreter that has them"); !why.empty()) {
    return why;
  }
  if (s.program->wrap == "none") return "";
  // The wrapper needs torch (any version from 1.13) and lockstep's program runtime, built beside
  // this binary.
  if (std::string why = import_skip_reason({"torch"}, "pass --python PATH (or set LOCKSTEP_PYTHON) naming an interpreter that has PyTorch, e.g. the venv ci/setup makes"); !why.empty()) return why;
  if (std::error_code ec; !fs::exists(program_library(), ec)) {
    return "this build of lockstep has no program runtime (" + program_library() + " is missing; build the target lockstep_program)";
  }
  return "";
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

std::vector<std::string> program_env(const scenario::Scenario& s, int rank, int port, const std::string& dir, const std::string& plan,
                                     const std::string& addr) {
  std::vector<std::string> env = inherited_env({"PYTHONPATH"});
  for (auto& kv : torchrun_env(rank, s.world_size, s.ranks_per_node, port, addr)) env.push_back(std::move(kv));
  env.push_back(backend_pythonpath());
  env.push_back("PYTHONUNBUFFERED=1");
  env.push_back(env::assign(env::kC10d, "1"));
  env.push_back(env::assign(env::kProgramLib, program_library()));
  env.push_back(env::assign(env::kC10dWrap, s.program->wrap));
  env.push_back(env::assign(env::kPlan, fs::absolute(plan).string()));
  // A program on NCCL (a GPU program) is seen by lockstep's NCCL profiler plugin, built beside
  // this binary: its traces go to <artifacts>/nccl/comm-<hash>/ (harness/nccl_profiler/README.md).
  const fs::path plugin = fs::path(backend_module_dir()).parent_path() / "lib" / "libnccl-profiler-lockstep.so";
  if (std::error_code ec; fs::exists(plugin, ec)) {
    env.push_back("NCCL_PROFILER_PLUGIN=" + plugin.string());
    env.push_back(env::assign(env::kNcclTraceDir, fs::absolute(dir + "/nccl").string()));
  }
  for (const auto& kv : s.program->env) set_env(env, kv);  // the scenario's env overrides what lockstep set
  return env;
}

int loopback_port() { return free_loopback_port(); }

}  // namespace lockstep::launch
