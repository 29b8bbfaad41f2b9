#include "harness/launch/contain.h"

#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

#include "harness/core/env.h"
#include "harness/core/error.h"

namespace lockstep::launch {
namespace {

report::Containment g_state{false, {}, "this process did not set up containment (lockstep's run, record, catalog and torchrun do)"};
pid_t g_host_pid = 0;

// One message from the holder or init to the command's process; small enough that a write is atomic.
struct Message {
  char kind = 0;     // 'S' the worker started, 'E' set-up failed (text), 'X' the worker ended (status)
  int status = 0;
  char text[240] = {};
};

void send(int fd, char kind, int status = 0, const std::string& text = "") {
  Message m;
  m.kind = kind;
  m.status = status;
  std::snprintf(m.text, sizeof m.text, "%s", text.c_str());
  ssize_t ignored = write(fd, &m, sizeof m);
  (void)ignored;
}

bool receive(int fd, Message& m) {
  std::size_t got = 0;
  while (got < sizeof m) {
    const ssize_t n = read(fd, reinterpret_cast<char*>(&m) + got, sizeof m - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<std::size_t>(n);
  }
  return true;
}

std::string errno_text(const std::string& what, int err) { return what + ": " + std::strerror(err); }

bool write_file(const char* path, const std::string& text) {
  const int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok;
}

// The number of threads of this process (1 when it cannot be read).
int thread_count() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  return 1;
}

// Brings the loopback interface of this network namespace up (127.0.0.1 comes with it); "" or why not.
std::string loopback_up() {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno_text("socket", errno);
  ifreq ifr{};
  std::snprintf(ifr.ifr_name, IFNAMSIZ, "lo");
  std::string why;
  if (ioctl(fd, SIOCGIFFLAGS, &ifr) != 0) {
    why = errno_text("SIOCGIFFLAGS lo", errno);
  } else {
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(fd, SIOCSIFFLAGS, &ifr) != 0) why = errno_text("SIOCSIFFLAGS lo", errno);
  }
  close(fd);
  return why;
}

// The signals relayed to the worker: SIGINT and SIGTERM (which lockstep handles even when it
// was started with them ignored, as a background job of a non-interactive shell is).
struct Relay {
  sigset_t forward;  // signals forwarded
  sigset_t waited;   // forward + SIGCHLD: blocked in the relays, taken with sigwaitinfo
  sigset_t old_mask;
  struct sigaction old_chld {};
};

// Waits for `child`, forwarding the relayed signals to it; as pid 1 (`reap_all`), also reaps every
// orphan that ends. Returns the child's wait status. The relayed signals and SIGCHLD are blocked.
int relay_until_exit(const Relay& relay, pid_t child, bool reap_all) {
  for (;;) {
    for (;;) {
      int st = 0;
      const pid_t p = waitpid(reap_all ? -1 : child, &st, WNOHANG);
      if (p == child) return st;
      if (p <= 0) break;
    }
    siginfo_t info{};
    const int sig = sigwaitinfo(&relay.waited, &info);
    if (sig > 0 && sig != SIGCHLD && sigismember(&relay.forward, sig)) kill(child, sig);
  }
}

// How the child ended, as an exit code of this process: its code, or 128 + the signal.
int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// Ends the command's process as the worker ended: with its exit code, or by its signal (those
// that dump core end with 128 + the signal instead: the core would be this process's).
[[noreturn]] void exit_like(int status) {
  if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
  const int sig = WTERMSIG(status);
  switch (sig) {
    case SIGINT: case SIGTERM: case SIGKILL: case SIGHUP: case SIGPIPE: case SIGALRM: case SIGUSR1: case SIGUSR2: {
      signal(sig, SIG_DFL);
      sigset_t one;
      sigemptyset(&one);
      sigaddset(&one, sig);
      sigprocmask(SIG_UNBLOCK, &one, nullptr);
      raise(sig);
      break;
    }
    default: break;
  }
  _exit(128 + sig);
}

// Pid 1 of the run's PID namespace: mounts /proc, starts the worker, reaps, relays, and tells the
// command's process how the worker ended. Returns only in the worker.
void run_init(const Relay& relay, int report_fd, int holder_alive_fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The holder may have died before PR_SET_PDEATHSIG: its end of the pipe is then closed.
  pollfd p{holder_alive_fd, POLLIN, 0};
  if (poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLIN))) _exit(1);
  // Every descendant sees this namespace's pids under /proc (the launcher reads /proc/<pid>).
  if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    send(report_fd, 'E', 0, errno_text("mount a fresh /proc in the new PID namespace", errno));
    _exit(1);
  }
  const pid_t worker = fork();
  if (worker < 0) {
    send(report_fd, 'E', 0, errno_text("fork in the new PID namespace", errno));
    _exit(1);
  }
  if (worker == 0) {
    close(report_fd);
    close(holder_alive_fd);
    return;
  }
  send(report_fd, 'S');
  const int st = relay_until_exit(relay, worker, /*reap_all=*/true);
  send(report_fd, 'X', st);
  _exit(0);  // the kernel kills whatever is left in the namespace
}

// The holder: a child of the command's process that makes the namespaces and holds pid 1. Returns
// only in the worker; `namespaces` gets the namespaces made.
void run_holder(const Relay& relay, pid_t command, int report_fd, std::vector<std::string>& namespaces) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != command) _exit(1);
  // A process group of its own: a terminal's Ctrl-C reaches the command's process only, which
  // forwards it once.
  setpgid(0, 0);
  const int kFlags = CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID;
  namespaces = {"network", "pid", "mount"};
  std::string root_error;
  if (geteuid() != 0 || unshare(kFlags) != 0) {
    if (geteuid() == 0) root_error = errno_text("unshare(network, pid, mount) as root", errno) + "; ";
    const uid_t uid = geteuid();
    const gid_t gid = getegid();
    if (unshare(kFlags | CLONE_NEWUSER) != 0) {
      const int err = errno;
      std::string why = root_error + errno_text("unshare(user, network, pid, mount)", err);
      if (err == EPERM || err == ENOSPC || err == EINVAL) why += " (unprivileged user namespaces are disabled here, or a sandbox forbids them)";
      send(report_fd, 'E', 0, why);
      _exit(1);
    }
    // Only this uid and gid, mapped to themselves: files keep their owners.
    if (!write_file("/proc/self/setgroups", "deny") ||
        !write_file("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1\n") ||
        !write_file("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1\n")) {
      send(report_fd, 'E', 0, errno_text("map this uid and gid into the new user namespace", errno));
      _exit(1);
    }
    namespaces.push_back("user");
  }
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    send(report_fd, 'E', 0, errno_text("make the mounts of the new mount namespace private", errno));
    _exit(1);
  }
  if (const std::string why = loopback_up(); !why.empty()) {
    send(report_fd, 'E', 0, "bring up loopback in the new network namespace: " + why);
    _exit(1);
  }
  int alive[2];
  if (pipe2(alive, O_CLOEXEC) != 0) {
    send(report_fd, 'E', 0, errno_text("pipe", errno));
    _exit(1);
  }
  const pid_t init = fork();
  if (init < 0) {
    send(report_fd, 'E', 0, errno_text("fork pid 1 of the new PID namespace", errno));
    _exit(1);
  }
  if (init == 0) {
    close(alive[1]);
    run_init(relay, report_fd, alive[0]);
    return;  // the worker
  }
  close(alive[0]);
  const int st = relay_until_exit(relay, init, /*reap_all=*/false);
  _exit(exit_code_of(st));
}

// Contains the run (contain.h). Returns "" in the worker, or why not in the command's process.
std::string try_contain(std::vector<std::string>& namespaces) {
  if (const int n = thread_count(); n > 1) return "this process already runs " + std::to_string(n) + " threads";
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  Relay relay;
  sigemptyset(&relay.forward);
  sigaddset(&relay.forward, SIGINT);
  sigaddset(&relay.forward, SIGTERM);
  relay.waited = relay.forward;
  sigaddset(&relay.waited, SIGCHLD);
  // SIGCHLD must not be ignored (children would be reaped by the kernel, out of waitpid's reach).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGCHLD, &dfl, &relay.old_chld);
  sigprocmask(SIG_BLOCK, &relay.waited, &relay.old_mask);
  auto restore = [&] {
    sigaction(SIGCHLD, &relay.old_chld, nullptr);
    sigprocmask(SIG_SETMASK, &relay.old_mask, nullptr);
  };

  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    restore();
    return errno_text("pipe", errno);
  }
  const pid_t command = getpid();
  const pid_t holder = fork();
  if (holder < 0) {
    const int err = errno;
    close(report[0]);
    close(report[1]);
    restore();
    return errno_text("fork", err);
  }
  if (holder == 0) {
    close(report[0]);
    run_holder(relay, command, report[1], namespaces);
    // The worker: the command's signal mask and dispositions, and it writes to a terminal it
    // shares from a process group in the background.
    restore();
    signal(SIGTTOU, SIG_IGN);
    return "";
  }
  close(report[1]);
  Message m;
  if (!receive(report[0], m) || m.kind != 'S') {
    const std::string why = m.kind == 'E' ? std::string(m.text) : "the set-up process ended before the run started";
    int st = 0;
    while (waitpid(holder, &st, 0) < 0 && errno == EINTR) {
    }
    close(report[0]);
    restore();
    return why;
  }
  const int holder_status = relay_until_exit(relay, holder, /*reap_all=*/false);
  Message end;
  const bool told = receive(report[0], end) && end.kind == 'X';
  exit_like(told ? end.status : holder_status);
}

}  // namespace

void contain_run(const ContainRequest& request) {
  g_host_pid = getpid();
  const std::string mode = env::str(env::kContain, "auto");
  if (mode != "auto" && mode != "off" && mode != "require") {
    throw InputError(std::string("environment variable ") + env::kContain + " must be auto, off or require, got '" + mode + "'");
  }
  auto not_contained = [&](const std::string& why, bool tell) {
    g_state = report::Containment{false, {}, why};
    if (tell) {
      std::cerr << "lockstep: note: this run is not contained (" << why
                << "); its ranks share this machine's network and process namespaces (scenarios/README.md, \"Contained runs\")\n";
    }
  };
  if (request.opted_out) return not_contained("--no-contain", false);
  if (mode == "off") return not_contained(std::string(env::kContain) + "=off", false);
  if (!request.not_local.empty()) return not_contained(request.not_local, false);
  std::vector<std::string> namespaces;
  const std::string why = try_contain(namespaces);
  if (!why.empty() && mode == "require") {
    throw InputError(std::string(env::kContain) + "=require, but this run cannot be contained: namespaces unavailable: " + why);
  }
  if (!why.empty()) return not_contained("namespaces unavailable: " + why, true);
  g_state = report::Containment{true, namespaces, ""};
}

const report::Containment& containment() { return g_state; }

pid_t host_pid() { return g_host_pid ? g_host_pid : getpid(); }

}  // namespace lockstep::launch
