#pragma once
// The launcher's child processes: forked and exec'd with PR_SET_PDEATHSIG, their output through a
// pipe into a capped log file (log_pump.h), killed and reaped by the destructor whatever happens.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "harness/core/env.h"
#include "harness/core/error.h"
#include "harness/launch/log_pump.h"

namespace lockstep::launch {

using Clock = std::chrono::steady_clock;

// "SIGSEGV", or "signal N" when the signal has no name.
inline std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? "SIG" + std::string(abbrev) : "signal " + std::to_string(sig);
}

// The nanoseconds the main thread of `pid` has run on a CPU plus waited in a run queue
// (/proc/PID/schedstat); -1 when it cannot be read (the process is gone, no schedstats). It moves
// while the process works or wants to, not while it sleeps in a blocking call.
inline std::int64_t scheduled_ns(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/schedstat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "re");
  if (!f) return -1;
  long long run = 0, wait = 0;
  const int n = std::fscanf(f, "%lld %lld", &run, &wait);
  std::fclose(f);
  return n == 2 ? static_cast<std::int64_t>(run + wait) : -1;
}

// This process's environment without the variables a launcher sets per rank (the torchrun-style
// ones, and `also`), so that each rank gets its own.
inline std::vector<std::string> inherited_env(const std::vector<std::string>& also = {}) {
  static const char* kRankVars[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                                    "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RESTART_COUNT", env::kStoreFile};
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
    if (std::find(std::begin(kRankVars), std::end(kRankVars), key) != std::end(kRankVars)) continue;
    if (std::find(also.begin(), also.end(), key) != also.end()) continue;
    env.push_back(kv);
  }
  return env;
}

// Sets `kv` ("NAME=value") in `env`, replacing any value NAME had there.
inline void set_env(std::vector<std::string>& env, const std::string& kv) {
  const std::string key = kv.substr(0, kv.find('=') + 1);
  std::erase_if(env, [&](const std::string& e) { return e.rfind(key, 0) == 0; });
  env.push_back(kv);
}

// The torchrun-style variables of rank r of ws on addr:port (127.0.0.1 by default), with ranks_per_node
// consecutive ranks per node (the last node may be smaller): RANK, LOCAL_RANK, WORLD_SIZE,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; and, as torchrun does when a node runs more than
// one rank and the environment does not say, OMP_NUM_THREADS=1 (the ranks share the node's
// cores; it also keeps each rank's work on the thread whose CPU time is measured).
inline std::vector<std::string> torchrun_env(int r, int ws, int ranks_per_node, int port, const std::string& addr = "127.0.0.1") {
  const int per_node = std::max(1, std::min(ranks_per_node, ws));
  std::vector<std::string> env{"RANK=" + std::to_string(r),
                               "LOCAL_RANK=" + std::to_string(r % per_node),
                               "WORLD_SIZE=" + std::to_string(ws),
                               "LOCAL_WORLD_SIZE=" + std::to_string(std::min(per_node, ws - r / per_node * per_node)),
                               "MASTER_ADDR=" + addr,
                               "MASTER_PORT=" + std::to_string(port)};
  if (per_node > 1 && !std::getenv("OMP_NUM_THREADS")) env.push_back("OMP_NUM_THREADS=1");
  return env;
}

// The processes of these process groups that are still alive: not yet exited, or exiting but
// not yet a zombie (SIGKILL takes effect when the process next runs, which on a loaded machine
// can be a while). Read from /proc/<pid>/stat (pgrp, state).
inline std::vector<pid_t> live_members(const std::vector<pid_t>& groups) {
  std::vector<pid_t> live;
  DIR* proc = opendir("/proc");
  if (!proc) return live;
  while (const dirent* e = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[512];
    const ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) continue;
    buf[n] = '\0';
    // "pid (comm) S ppid pgrp ...": comm may hold spaces and parentheses, so read after the last ')'.
    const char* close_paren = std::strrchr(buf, ')');
    char state = 0;
    long ppid = 0, pgrp = 0;
    if (!close_paren || std::sscanf(close_paren + 1, " %c %ld %ld", &state, &ppid, &pgrp) != 3) continue;
    if (state == 'Z' || state == 'X') continue;
    if (std::find(groups.begin(), groups.end(), static_cast<pid_t>(pgrp)) != groups.end()) live.push_back(static_cast<pid_t>(pid));
  }
  closedir(proc);
  return live;
}

struct Child {
  pid_t pid = -1;
  bool exited = false;
  int status = 0;  // from waitpid
  Clock::time_point exit_time;
};

// Owns the rank processes: whatever happens, the destructor kills and reaps every one.
class RankProcesses {
 public:
  RankProcesses() = default;
  RankProcesses(const RankProcesses&) = delete;
  RankProcesses& operator=(const RankProcesses&) = delete;
  ~RankProcesses() {
    kill_all();
    if (pump_) pump_->stop();
  }

  // Starts argv with env; its stdout and stderr go to `log` (capped, log_pump.h) and, with a
  // non-empty `label` ("[rank1]:"), each line also to this process's stdout after the label.
  void spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
             const std::string& log, const std::string& label = "") {
    std::vector<char*> args, envp;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    int out[2];
    LOCKSTEP_CHECK(pipe2(out, O_CLOEXEC) == 0, "pipe2 failed: ", std::strerror(errno));
    if (!pump_) pump_ = std::make_unique<LogPump>();
    try {
      pump_->add(out[0], log, label);  // creates the log; owns the read end from here
    } catch (...) {
      close(out[1]);
      throw;
    }
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) close(out[1]);
    LOCKSTEP_CHECK(pid >= 0, "fork failed: ", std::strerror(errno));
    if (pid == 0) {
      // Only async-signal-safe calls until exec. A rank never outlives the launcher.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      // Its own process group, so that kill_all() also reaches whatever it starts (a shell
      // script's children, a Python program's workers).
      setpgid(0, 0);
      if (getppid() != parent) _exit(127);
      dup2(out[1], 1);  // the copies lose O_CLOEXEC; the pipe's own ends close at exec
      dup2(out[1], 2);
      execve(args[0], args.data(), envp.data());
      _exit(127);
    }
    close(out[1]);
    Child child;
    child.pid = pid;
    children_.push_back(child);
    groups_gone_ = false;
  }

  // Reaps whatever has exited; returns true when every child has. A child reaped here has its
  // whole output in its log when this returns.
  bool reap() {
    bool all = true, some = false;
    for (auto& c : children_) {
      if (c.exited) continue;
      int st = 0;
      const pid_t r = waitpid(c.pid, &st, WNOHANG);
      if (r == c.pid) {
        c.exited = true;
        c.status = st;
        c.exit_time = Clock::now();
        some = true;
      } else {
        all = false;
      }
    }
    if (some && pump_) pump_->drain();
    return all;
  }

  // Kills every child's process group (its descendants too, even after the child exited),
  // reaps the children, and returns once no member of those groups is alive, so that nothing
  // of a finished scenario still runs (holding CPU, memory or ports) when the next one starts.
  // A member that is not gone after kGroupGrace is left (it is in uninterruptible sleep).
  void kill_all() {
    if (children_.empty() || groups_gone_) return;
    std::vector<pid_t> groups;
    for (auto& c : children_) {
      groups.push_back(c.pid);
      kill(-c.pid, SIGKILL);
      if (!c.exited) kill(c.pid, SIGKILL);
    }
    for (auto& c : children_) {
      if (c.exited) continue;
      int st = 0;
      waitpid(c.pid, &st, 0);
      c.exited = true;
      c.status = st;
      c.exit_time = Clock::now();
    }
    const auto until = Clock::now() + kGroupGrace;
    while (!live_members(groups).empty() && Clock::now() < until) {
      for (pid_t g : groups) kill(-g, SIGKILL);  // members started since the first signal
      usleep(5000);
    }
    groups_gone_ = true;
    if (pump_) pump_->drain();
  }

  std::vector<Child>& children() { return children_; }

 private:
  static constexpr std::chrono::seconds kGroupGrace{10};
  std::vector<Child> children_;
  bool groups_gone_ = false;
  std::unique_ptr<LogPump> pump_;  // the children's output into their logs; stopped in the destructor
};

}  // namespace lockstep::launch
