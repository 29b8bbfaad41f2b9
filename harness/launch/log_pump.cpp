#include "harness/launch/log_pump.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>
#include <vector>

#include "harness/core/env.h"
#include "harness/core/error.h"
#include "harness/core/fs.h"

namespace lockstep::launch {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kRewriteEvery = std::chrono::milliseconds(200);

void write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // a full disk loses log bytes, never the run
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

std::mutex& stdout_mutex() {
  static std::mutex mu;
  return mu;
}

}  // namespace

std::size_t log_cap_bytes() {
  const int mb = env::integer(env::kLogCapMb, 8);
  if (mb < 1) throw InputError(std::string(env::kLogCapMb) + ": must be a whole number of MiB >= 1, got " + std::to_string(mb));
  return static_cast<std::size_t>(mb) << 20;
}

struct LogPump::Sink {
  int fd = -1;        // the pipe's read end; -1 after EOF
  int log = -1;       // the log file
  std::string label;  // "" : not echoed
  std::size_t head = 0;  // bytes written as they came (at most head_cap_)
  std::string tail;      // the bytes after the head, the last tail_cap_ of them
  std::size_t cut = 0;   // bytes dropped between head and tail
  bool dirty = false;    // cut > 0 and the file's tail is stale
  Clock::time_point rewritten;
  std::string line;      // the echo's partial line
};

LogPump::LogPump(std::size_t cap) : head_cap_(cap / 2), tail_cap_(cap - cap / 2) {
  LOCKSTEP_CHECK(::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) == 0, "pipe2: ", std::strerror(errno));
  thread_ = std::thread([this] { loop(); });
}

LogPump::~LogPump() { stop(); }

void LogPump::add(int read_fd, const std::string& path, const std::string& label) {
  const int log = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log < 0) {
    ::close(read_fd);
    LOCKSTEP_CHECK(false, "cannot create the rank log ", path, ": ", std::strerror(errno));
  }
  ::fcntl(read_fd, F_SETFL, ::fcntl(read_fd, F_GETFL) | O_NONBLOCK);
  auto s = std::make_unique<Sink>();
  s->fd = read_fd;
  s->log = log;
  s->label = label;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sinks_.push_back(std::move(s));
  }
  const char c = 'a';
  (void)!::write(wake_[1], &c, 1);
}

void LogPump::pump(Sink& s, bool until_empty) {
  char buf[65536];
  for (;;) {
    if (s.fd < 0) return;
    const ssize_t n = ::read(s.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;  // EAGAIN: nothing more now
    if (n == 0) {       // every writer closed it
      ::close(s.fd);
      s.fd = -1;
      return;
    }
    std::size_t at = 0, len = static_cast<std::size_t>(n);
    if (s.head < head_cap_) {
      const std::size_t h = std::min(len, head_cap_ - s.head);
      write_all(s.log, buf, h);
      s.head += h;
      at = h;
    }
    if (at < len) {
      const std::size_t rest = len - at;
      if (s.cut == 0) write_all(s.log, buf + at, rest);  // still under the cap: the file is the whole output
      s.tail.append(buf + at, rest);
      if (s.tail.size() > tail_cap_) {
        const std::size_t drop = s.tail.size() - tail_cap_;
        s.tail.erase(0, drop);
        s.cut += drop;
        s.dirty = true;
      } else if (s.cut > 0) {
        s.dirty = true;
      }
    }
    if (!s.label.empty()) {
      s.line.append(buf, len);
      std::size_t start = 0;
      std::string out;
      for (std::size_t nl; (nl = s.line.find('\n', start)) != std::string::npos; start = nl + 1) {
        // A line the rank labelled itself (torch 2.x prefixes its tracebacks with "[rank0]:") is not labelled twice.
        if (s.line.compare(start, s.label.size(), s.label) != 0) out += s.label + ' ';
        out += s.line.substr(start, nl - start + 1);
      }
      s.line.erase(0, start);
      if (s.line.size() > 65536) {  // a line without end: echo what there is
        out += s.label + ' ' + s.line + '\n';
        s.line.clear();
      }
      if (!out.empty()) {
        std::lock_guard<std::mutex> lock(stdout_mutex());
        write_all(STDOUT_FILENO, out.data(), out.size());
      }
    }
    if (!until_empty && static_cast<std::size_t>(n) < sizeof buf) return;
  }
}

void LogPump::flush(Sink& s, bool final) {
  if (final && !s.label.empty() && !s.line.empty()) {
    const std::string out = s.label + ' ' + s.line + '\n';
    s.line.clear();
    std::lock_guard<std::mutex> lock(stdout_mutex());
    write_all(STDOUT_FILENO, out.data(), out.size());
  }
  if (!s.dirty || s.log < 0) return;
  if (!final && Clock::now() - s.rewritten < kRewriteEvery) return;
  // The file: the head, a line saying how much was cut, the tail.
  const std::string marker = "\n[lockstep: " + std::to_string(s.cut) + " bytes of this rank's output were cut here; the log keeps its first " +
                             std::to_string(head_cap_) + " and last " + std::to_string(tail_cap_) + " bytes (LOCKSTEP_LOG_CAP_MB)]\n";
  const std::string body = marker + s.tail;
  if (::pwrite(s.log, body.data(), body.size(), static_cast<off_t>(s.head)) == static_cast<ssize_t>(body.size())) {
    (void)!::ftruncate(s.log, static_cast<off_t>(s.head + body.size()));
  }
  ::lseek(s.log, 0, SEEK_END);
  s.dirty = false;
  s.rewritten = Clock::now();
}

void LogPump::drain() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& s : sinks_) {
    pump(*s, /*until_empty=*/true);
    flush(*s, /*final=*/s->fd < 0);
  }
}

void LogPump::loop() {
  std::vector<pollfd> fds;
  while (!stopping_) {
    fds.clear();
    fds.push_back(pollfd{wake_[0], POLLIN, 0});
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& s : sinks_) {
        if (s->fd >= 0) fds.push_back(pollfd{s->fd, POLLIN, 0});
      }
    }
    ::poll(fds.data(), fds.size(), 100);
    if (fds[0].revents & POLLIN) {
      char b[64];
      while (::read(wake_[0], b, sizeof b) > 0) {
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& s : sinks_) {
      pump(*s, /*until_empty=*/false);
      flush(*s, /*final=*/s->fd < 0);
    }
  }
}

void LogPump::stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  const char c = 's';
  (void)!::write(wake_[1], &c, 1);
  thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& s : sinks_) {
    pump(*s, /*until_empty=*/true);
    if (s->fd >= 0) {
      ::close(s->fd);  // a descendant that escaped the kill still holds the pipe: its output is not waited for
      s->fd = -1;
    }
    flush(*s, /*final=*/true);
    ::close(s->log);
    s->log = -1;
  }
  ::close(wake_[0]);
  ::close(wake_[1]);
}

std::string log_last_line(const std::string& file, const std::string& skip_prefix) {
  // Only the log's tail is read: a rank may print gigabytes.
  constexpr std::size_t kTail = 64u << 10;
  const std::string tail = read_tail(file, kTail);
  std::istringstream in(tail);
  std::vector<std::string> lines;
  std::string first;
  if (tail.size() == kTail) std::getline(in, first);  // the first line may be cut: skip it
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
    if (lines[i].find("Warning:") == std::string::npos && lines[i][0] != ' ' &&
        (skip_prefix.empty() || lines[i].rfind(skip_prefix, 0) != 0)) {
      pick = lines[i];
    }
  }
  if (pick.size() > 300) pick = pick.substr(0, 300) + "...";
  return pick;
}

}  // namespace lockstep::launch
