#pragma once
// What the tests of contained runs share (contain_test.cpp, contain_prober_test.cpp): whether
// this machine can make namespaces, starting the real binary (optionally under a seccomp filter
// that forbids unshare(2)), waiting, and reading a run's namespaces and results.
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <grp.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/config.h"
#include "tests/test_util.h"

namespace lockstep::contain_test {

namespace fs = std::filesystem;
using lockstep::test::read_file;
using Clock = std::chrono::steady_clock;

// "" when this process can make network, PID and mount namespaces (as root, or through an
// unprivileged user namespace), else why not. Tried in a child, which leaves this process as it was.
inline std::string namespaces_unavailable() {
  const pid_t pid = fork();
  if (pid == 0) {
    const int flags = CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWNS;
    if (geteuid() == 0 && unshare(flags) == 0) _exit(0);
    _exit(unshare(flags | CLONE_NEWUSER) == 0 ? 0 : 1);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "" : "this machine allows neither root's nor an unprivileged user's namespaces";
}

#define SKIP_WITHOUT_NAMESPACES()                                                                 \
  do {                                                                                            \
    if (const std::string why = ::lockstep::contain_test::namespaces_unavailable(); !why.empty()) \
      GTEST_SKIP() << "requires namespaces: " << why;                                             \
  } while (0)

// Waits up to `seconds` for `done()`.
template <class F>
inline bool wait_for(F done, double seconds) {
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

inline std::string ns_of(const std::string& pid, const char* ns) {
  std::error_code ec;
  return fs::read_symlink("/proc/" + pid + "/ns/" + ns, ec).string();
}

// Starts `lockstep ARGS...` with stdout and stderr in DIR/out and DIR/err; with `no_unshare`,
// under a seccomp filter that fails unshare(2) with EPERM (a sandbox without namespaces).
// With `as_nobody` (from root), as uid and gid 65534; it exits 125 when that user cannot run the
// binary or read the LibTorch it links (the wheel line's, under root's home here).
inline pid_t start_lockstep(const std::string& dir, const std::vector<std::string>& args, bool no_unshare = false,
                            const std::vector<std::string>& env = {}, bool as_nobody = false) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  freopen((dir + "/out").c_str(), "w", stdout);
  freopen((dir + "/err").c_str(), "w", stderr);
  for (const auto& kv : env) putenv(const_cast<char*>(kv.c_str()));
  if (as_nobody && (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0 || access(LOCKSTEP_BINARY, X_OK) != 0 ||
                   access(LOCKSTEP_TORCH_LIBDIR, R_OK | X_OK) != 0)) _exit(125);
  if (no_unshare) {
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_unshare, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) _exit(126);
  }
  std::vector<char*> argv{const_cast<char*>(LOCKSTEP_BINARY)};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv(LOCKSTEP_BINARY, argv.data());
  _exit(127);
}

inline nlohmann::json results(const std::string& report) { return nlohmann::json::parse(read_file(report + "/results.json")); }

}  // namespace lockstep::contain_test
