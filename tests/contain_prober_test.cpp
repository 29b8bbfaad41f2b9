// A prober outside a contained run (issue 32, item 1; harness/launch/contain.h) that knows the
// run's listening ports and writes garbage to each: contained, it reaches none of them and the
// run meets every expectation; uncontained, it reaches the system's store. Skips, naming why,
// where this machine cannot make namespaces.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/contain_test_util.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using contain_test::ns_of;
using contain_test::results;
using contain_test::start_lockstep;
using contain_test::wait_for;
using test::read_file;
using test::TempDir;

// A prober outside the run that knows the run's ports (read from /proc/<pid>/net/tcp of each of
// the run's processes, in whatever namespace they are) and, every 20 ms, connects to each one
// listening from this machine's namespace and writes garbage. A canary socket listening here
// proves that the prober reaches what is reachable.
class PortProber {
 public:
  explicit PortProber(pid_t root) : root_(root) {
    canary_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(canary_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(canary_, 64) != 0 ||
        ::getsockname(canary_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ::close(canary_);
      canary_ = -1;
      return;
    }
    canary_port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { loop(); });
  }
  ~PortProber() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (canary_ >= 0) ::close(canary_);
    canary_ = -1;
  }
  int canary_hits = 0;               // connections that reached the canary
  std::set<int> run_ports;           // listening ports seen in the run's processes' namespaces
  int attempts = 0, reached = 0;     // connections tried to those ports, and made

 private:
  // The LISTEN ports of a /proc/.../net directory's tcp and tcp6 tables, by socket inode.
  static std::map<std::string, int> listening(const std::string& net_dir) {
    std::map<std::string, int> ports;
    for (const char* table : {"tcp", "tcp6"}) {
      std::istringstream in(read_file(net_dir + "/" + table));
      std::string line;
      std::getline(in, line);
      while (std::getline(in, line)) {
        std::istringstream f(line);
        std::vector<std::string> cols;
        for (std::string c; f >> c;) cols.push_back(c);
        if (cols.size() <= 9 || cols[3] != "0A") continue;
        ports[cols[9]] = std::stoi(cols[1].substr(cols[1].rfind(':') + 1), nullptr, 16);
      }
    }
    return ports;
  }
  // `root` and every process below it (by parent pid), from one pass over /proc.
  std::vector<std::string> tree() const {
    std::multimap<pid_t, pid_t> children;
    for (const auto& e : fs::directory_iterator("/proc")) {
      const std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      const std::string stat = read_file("/proc/" + name + "/stat");
      const auto paren = stat.rfind(')');
      if (paren == std::string::npos) continue;
      std::istringstream f(stat.substr(paren + 2));
      std::string state;
      pid_t ppid = 0;
      if (f >> state >> ppid) children.emplace(ppid, std::stoi(name));
    }
    std::vector<std::string> out;
    std::vector<pid_t> todo{root_};
    while (!todo.empty()) {
      const pid_t p = todo.back();
      todo.pop_back();
      out.push_back(std::to_string(p));
      for (auto [b, e] = children.equal_range(p); b != e; ++b) todo.push_back(b->second);
    }
    return out;
  }
  // The inodes of the sockets process `pid` holds open.
  static std::set<std::string> socket_inodes(const std::string& pid) {
    std::set<std::string> inodes;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/proc/" + pid + "/fd", ec)) {
      const std::string target = fs::read_symlink(e.path(), ec).string();
      if (!ec && target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
    }
    return inodes;
  }
  // Connects to 127.0.0.1:port within 20 ms; on success writes garbage and closes.
  static bool poke(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    if (!ok && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof err;
      ok = ::poll(&p, 1, 20) == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
    }
    if (ok) {
      const char junk[] = "\xff\x00garbage\x7f\x01\x02 not a c10d or gloo message";
      (void)!::send(fd, junk, sizeof junk, MSG_NOSIGNAL);
    }
    ::close(fd);
    return ok;
  }
  void loop() {
    const std::string host_net = ns_of("self", "net");
    while (!stop_) {
      std::set<int> here;
      for (const auto& [inode, port] : listening("/proc/self/net")) here.insert(port);
      std::set<int> theirs;
      for (const auto& pid : tree()) {
        const std::string net = ns_of(pid, "net");
        if (net.empty()) continue;
        if (net == host_net) {
          // This machine's table lists everyone's sockets: only those the process holds are the run's.
          const auto held = socket_inodes(pid);
          for (const auto& [inode, port] : listening("/proc/" + pid + "/net"))
            if (held.count(inode)) theirs.insert(port);
        } else {
          // The run's own namespace; a port also open here belongs to someone else.
          for (const auto& [inode, port] : listening("/proc/" + pid + "/net"))
            if (!here.count(port)) theirs.insert(port);
        }
      }
      theirs.erase(canary_port_);
      for (int port : theirs) {
        run_ports.insert(port);
        ++attempts;
        if (poke(port)) ++reached;
      }
      if (poke(canary_port_)) ++canary_hits;
      while (true) {
        const int c = ::accept4(canary_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) break;
        ::close(c);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  pid_t root_;
  int canary_ = -1, canary_port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A clean suite under that prober meets every expectation, contained: the prober sees the run's
// listening ports (Gloo's while it sets up pairs; the TCPStore that the torch system's rank 0
// hosts on every interface for its whole life) but reaches none of them. Without containment the
// same prober reaches the system's store, so the check is known to see it.
TEST(ContainTest, AProberOutsideNeitherReachesNorDisturbsARun) {
  SKIP_WITHOUT_NAMESPACES();
  TempDir dir("contain");
  const std::string scenarios = std::string(LOCKSTEP_SOURCE_DIR) + "/scenarios";
  const std::string filter = "clean_mix\\[world_size=4\\]|comm\\.crash$|systems\\.torch\\.training\\[.*fp32.*world_size=3";
  for (int off = 0; off < 2; ++off) {
    const std::string report = dir / ("report" + std::to_string(off));
    std::vector<std::string> args{"run", scenarios + "/comm", scenarios + "/systems/torch", "--filter", off ? "systems\\.torch\\.training\\[.*fp32.*world_size=3" : filter, "--report-dir", report};
    if (off) args.push_back("--no-contain");
    const char* python = std::getenv("LOCKSTEP_PYTHON");
    const pid_t lockstep = start_lockstep(dir.path(), args, false, {std::string("LOCKSTEP_PYTHON=") + (python ? python : "/usr/bin/python3")});
    PortProber prober(lockstep);
    int st = 0;
    const bool ended = wait_for([&] { return waitpid(lockstep, &st, WNOHANG) == lockstep; }, 240);
    if (!ended) {
      kill(lockstep, SIGKILL);
      waitpid(lockstep, &st, 0);
    }
    prober.stop();
    ASSERT_TRUE(ended) << read_file(dir / "out");
    EXPECT_GT(prober.canary_hits, 0) << "the prober never reached its own canary";
    std::ostringstream ports;
    for (int p : prober.run_ports) ports << p << ' ';
    const std::string mode = off ? "not_contained" : "contained";
    ::testing::Test::RecordProperty(mode + "_ports_seen", static_cast<int>(prober.run_ports.size()));
    ::testing::Test::RecordProperty(mode + "_attempts", prober.attempts);
    ::testing::Test::RecordProperty(mode + "_reached", prober.reached);
    if (off == 0) {
      EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << read_file(dir / "out") << read_file(dir / "err");
      const auto j = results(report);
      EXPECT_EQ(j["containment"]["contained"], true);
      EXPECT_EQ(j["scenarios"].size(), 3u) << j["scenarios"].dump();
      for (const auto& s : j["scenarios"]) {
        if (s["status"] == "skip") GTEST_SKIP() << s["id"].get<std::string>() << " skipped: " << s["reason"].get<std::string>();
        EXPECT_EQ(s["status"], "pass") << s.dump();
      }
      EXPECT_GT(prober.attempts, 0) << "the prober saw no listening port of the run";
      EXPECT_EQ(prober.reached, 0) << "reached the run's ports from outside: " << ports.str();
    } else {
      EXPECT_GT(prober.reached, 0) << "without containment the prober was expected to reach the system's store; ports seen: " << ports.str();
    }
  }
}

}  // namespace
}  // namespace lockstep
