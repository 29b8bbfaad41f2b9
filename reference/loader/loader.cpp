#include "reference/loader/loader.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

namespace lockstep::ref {

namespace {


[[noreturn]] void throw_errno(const std::string& what) {
  throw std::runtime_error("NeighborLoader: " + what + ": " + std::strerror(errno));
}

void append(std::vector<std::int64_t>& out, const std::vector<std::int64_t>& v) {
  out.push_back(static_cast<std::int64_t>(v.size()));
  out.insert(out.end(), v.begin(), v.end());
}

// Reads one size-prefixed array from words[pos...], advancing pos.
std::vector<std::int64_t> take(const std::vector<std::int64_t>& words, std::size_t& pos) {
  if (pos >= words.size()) throw std::runtime_error("deserialise: truncated stream");
  const std::int64_t n = words[pos++];
  if (n < 0 || static_cast<std::uint64_t>(n) > words.size() - pos) {
    throw std::runtime_error("deserialise: bad array size " + std::to_string(n));
  }
  std::vector<std::int64_t> v(words.begin() + static_cast<std::ptrdiff_t>(pos),
                              words.begin() + static_cast<std::ptrdiff_t>(pos + n));
  pos += static_cast<std::size_t>(n);
  return v;
}

// Writes all of buf, retrying on EINTR; false when the peer is gone. Never raises SIGPIPE.
bool send_all(int fd, const void* buf, std::size_t len) {
  const char* p = static_cast<const char*>(buf);
  while (len > 0) {
    const ssize_t k = ::send(fd, p, len, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    len -= static_cast<std::size_t>(k);
  }
  return true;
}

// Reads exactly len bytes; false on EOF or error.
bool recv_all(int fd, void* buf, std::size_t len) {
  char* p = static_cast<char*>(buf);
  while (len > 0) {
    const ssize_t k = ::recv(fd, p, len, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    len -= static_cast<std::size_t>(k);
  }
  return true;
}

}  // namespace

void (*loader_worker_start_hook)(int parent_pid) = nullptr;


std::vector<std::int64_t> serialise(const SampledBlocks& sampled) {
  std::vector<std::int64_t> out;
  append(out, sampled.seeds);
  append(out, sampled.seed_to_output);
  out.push_back(static_cast<std::int64_t>(sampled.blocks.size()));
  for (const Block& b : sampled.blocks) {
    append(out, b.dst_nodes);
    append(out, b.src_nodes);
    append(out, b.edge_src);
    append(out, b.edge_dst);
    append(out, b.edge_ids);
  }
  return out;
}

SampledBlocks deserialise(const std::vector<std::int64_t>& words) {
  SampledBlocks s;
  std::size_t pos = 0;
  s.seeds = take(words, pos);
  s.seed_to_output = take(words, pos);
  if (pos >= words.size()) throw std::runtime_error("deserialise: truncated stream");
  const std::int64_t num_blocks = words[pos++];
  // Each block takes at least 5 words.
  if (num_blocks < 0 || static_cast<std::uint64_t>(num_blocks) > (words.size() - pos) / 5) {
    throw std::runtime_error("deserialise: bad block count " + std::to_string(num_blocks));
  }
  s.blocks.resize(static_cast<std::size_t>(num_blocks));
  for (Block& b : s.blocks) {
    b.dst_nodes = take(words, pos);
    b.src_nodes = take(words, pos);
    b.edge_src = take(words, pos);
    b.edge_dst = take(words, pos);
    b.edge_ids = take(words, pos);
  }
  if (pos != words.size()) throw std::runtime_error("deserialise: trailing words");
  return s;
}

// A frame on a worker socket is one int64 header h, then: h >= 0: h int64 words of
// serialise(); h < 0: -h bytes of the exception message of that batch. The parent answers
// each frame with one credit byte; a child samples only while it holds credits.
struct NeighborLoader::State {
  const CsrGraph& rows;
  std::vector<std::vector<std::int64_t>> batches;
  SampleOptions options;  // with the per-worker num_threads when num_workers > 0
  SampleKey base;
  LoaderOptions loader;
  std::int64_t next_deliver = 0;

  // kThreads
  struct Slot {
    std::optional<SampledBlocks> value;
    std::exception_ptr error;
  };
  std::mutex mu;
  std::condition_variable ready_cv;  // a slot was added
  std::condition_variable space_cv;  // a batch was delivered, or stop
  std::int64_t next_claim = 0;
  bool stop = false;
  std::map<std::int64_t, Slot> ready;  // reorder buffer
  std::vector<std::thread> threads;

  // kProcesses: per worker, the child's pid (-1 once reaped) and the parent's socket end.
  std::vector<pid_t> pids;
  std::vector<int> fds;

  State(const CsrGraph& r, std::vector<std::vector<std::int64_t>> b, SampleOptions o,
        SampleKey k, LoaderOptions l)
      : rows(r), batches(std::move(b)), options(std::move(o)), base(k), loader(l) {}

  std::int64_t num_batches() const { return static_cast<std::int64_t>(batches.size()); }

  SampledBlocks sample(std::int64_t b) const {
    SampleKey key = base;
    key.batch = b;
    key.hop = 0;
    return sample_neighbors(rows, batches[static_cast<std::size_t>(b)], options, key);
  }

  void thread_loop() {
    const std::int64_t window =
        static_cast<std::int64_t>(loader.num_workers) * loader.prefetch;
    for (;;) {
      std::int64_t b = 0;
      {
        std::unique_lock lk(mu);
        space_cv.wait(lk, [&] {
          return stop || next_claim >= num_batches() || next_claim < next_deliver + window;
        });
        if (stop || next_claim >= num_batches()) return;
        b = next_claim++;
      }
      Slot slot;
      try {
        slot.value = sample(b);
      } catch (...) {
        slot.error = std::current_exception();
      }
      {
        std::lock_guard lk(mu);
        ready.emplace(b, std::move(slot));
      }
      ready_cv.notify_all();
    }
  }

  void stop_threads() noexcept {
    {
      std::lock_guard lk(mu);
      stop = true;
    }
    space_cv.notify_all();
    for (std::thread& t : threads) {
      if (t.joinable()) t.join();
    }
    threads.clear();
  }

  // Runs in the forked child of worker w; never returns.
  [[noreturn]] void child_main(int w, int fd, pid_t parent) noexcept {
    if (loader_worker_start_hook) loader_worker_start_hook(parent);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(3);  // the parent died before prctl
    // Backstop: should anything here reach the CUDA runtime, it finds no device.
    ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
    int credits = loader.prefetch;
    for (std::int64_t b = w; b < num_batches(); b += loader.num_workers) {
      if (credits == 0) {
        char c = 0;
        if (!recv_all(fd, &c, 1)) ::_exit(0);  // the parent closed: stop quietly
        ++credits;
      }
      --credits;
      try {
        const std::vector<std::int64_t> words = serialise(sample(b));
        const std::int64_t header = static_cast<std::int64_t>(words.size());
        if (!send_all(fd, &header, sizeof header) ||
            !send_all(fd, words.data(), words.size() * sizeof(std::int64_t))) {
          ::_exit(0);
        }
      } catch (const std::exception& e) {
        const std::string msg = e.what();
        const std::int64_t header = -static_cast<std::int64_t>(std::max<std::size_t>(msg.size(), 1));
        const std::string body = msg.empty() ? std::string(" ") : msg;
        if (!send_all(fd, &header, sizeof header) || !send_all(fd, body.data(), body.size())) {
          ::_exit(0);
        }
      } catch (...) {
        ::_exit(4);
      }
    }
    ::_exit(0);
  }

  void start_processes() {
    const int n = loader.num_workers;
    std::vector<int> child_fds;
    try {
      for (int w = 0; w < n; ++w) {
        int sv[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
          throw_errno("socketpair");
        }
        fds.push_back(sv[0]);
        child_fds.push_back(sv[1]);
      }
      const pid_t parent = ::getpid();
      for (int w = 0; w < n; ++w) {
        const pid_t pid = ::fork();
        if (pid < 0) throw_errno("fork");
        if (pid == 0) {
          for (int i = 0; i < n; ++i) {
            ::close(fds[static_cast<std::size_t>(i)]);
            if (i != w) ::close(child_fds[static_cast<std::size_t>(i)]);
          }
          child_main(w, child_fds[static_cast<std::size_t>(w)], parent);
        }
        pids.push_back(pid);
      }
    } catch (...) {
      for (int fd : child_fds) ::close(fd);
      kill_processes();
      throw;
    }
    for (int fd : child_fds) ::close(fd);
  }

  void kill_processes() noexcept {
    for (pid_t& pid : pids) {
      if (pid > 0) ::kill(pid, SIGKILL);
    }
    for (pid_t& pid : pids) {
      if (pid <= 0) continue;
      while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
      pid = -1;
    }
    for (int& fd : fds) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
  }

  // Describes why worker w's socket ended early, reaping the child when it has exited.
  std::string describe_worker_death(int w, std::int64_t b) {
    pid_t& pid = pids[static_cast<std::size_t>(w)];
    std::string what = "NeighborLoader: worker process " + std::to_string(w) +
                       " ended before delivering batch " + std::to_string(b);
    if (pid <= 0) return what + " (already reaped)";
    what += " (pid " + std::to_string(pid) + ")";
    int status = 0;
    pid_t r = 0;
    while ((r = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
    }
    if (r == pid) {
      if (WIFSIGNALED(status)) what += " (killed by signal " + std::to_string(WTERMSIG(status)) + ")";
      if (WIFEXITED(status)) what += " (exit status " + std::to_string(WEXITSTATUS(status)) + ")";
      pid = -1;
    }
    return what;
  }

  SampledBlocks next_from_process(std::int64_t b) {
    const int w = static_cast<int>(b % loader.num_workers);
    const int fd = fds[static_cast<std::size_t>(w)];
    std::int64_t header = 0;
    if (!recv_all(fd, &header, sizeof header)) throw std::runtime_error(describe_worker_death(w, b));
    if (header < 0) {
      std::string msg(static_cast<std::size_t>(-header), '\0');
      if (!recv_all(fd, msg.data(), msg.size())) {
        throw std::runtime_error(describe_worker_death(w, b));
      }
      const char credit = 1;
      send_all(fd, &credit, 1);
      throw std::runtime_error("NeighborLoader: batch " + std::to_string(b) + ": " + msg);
    }
    std::vector<std::int64_t> words(static_cast<std::size_t>(header));
    if (!recv_all(fd, words.data(), words.size() * sizeof(std::int64_t))) {
      throw std::runtime_error(describe_worker_death(w, b));
    }
    const char credit = 1;
    send_all(fd, &credit, 1);  // a failure shows up as EOF on the next read
    return deserialise(words);
  }
};

NeighborLoader::NeighborLoader(const CsrGraph& rows, std::vector<std::vector<std::int64_t>> batches,
                               SampleOptions options, SampleKey base, LoaderOptions loader) {
  if (loader.num_workers < 0) {
    throw std::invalid_argument("NeighborLoader: num_workers must be >= 0, got " +
                                std::to_string(loader.num_workers));
  }
  if (loader.prefetch < 1) {
    throw std::invalid_argument("NeighborLoader: prefetch must be >= 1, got " +
                                std::to_string(loader.prefetch));
  }
  if (options.num_threads < 0) {
    throw std::invalid_argument("NeighborLoader: options.num_threads must be >= 0");
  }
  if (loader.num_workers > 0 && options.num_threads == 0) {
    const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    options.num_threads = std::max(1, hw / loader.num_workers);
  }
  const bool processes =
      loader.num_workers > 0 && loader.mode == LoaderOptions::Mode::kProcesses;
  if (processes && cuda_initialised()) {
    throw std::runtime_error(
        "NeighborLoader: refusing to fork worker processes after this process initialised "
        "CUDA (a forked child cannot use the parent's CUDA context); use Mode::kThreads or "
        "construct the loader before any CUDA call");
  }
  state_ = std::make_unique<State>(rows, std::move(batches), std::move(options), base, loader);
  if (loader.num_workers == 0) return;
  if (processes) {
    state_->start_processes();
    return;
  }
  try {
    for (int w = 0; w < loader.num_workers; ++w) {
      state_->threads.emplace_back([s = state_.get()] { s->thread_loop(); });
    }
  } catch (...) {
    state_->stop_threads();
    throw;
  }
}

NeighborLoader::~NeighborLoader() {
  state_->stop_threads();
  state_->kill_processes();
}

std::int64_t NeighborLoader::num_batches() const { return state_->num_batches(); }

std::optional<SampledBlocks> NeighborLoader::next() {
  State& s = *state_;
  if (s.next_deliver >= s.num_batches()) return std::nullopt;
  const std::int64_t b = s.next_deliver;
  if (s.loader.num_workers == 0) {
    ++s.next_deliver;
    return s.sample(b);
  }
  if (!s.pids.empty()) {
    // Advance first: an error for batch b still moves the epoch on to b + 1.
    ++s.next_deliver;
    return s.next_from_process(b);
  }
  State::Slot slot;
  {
    std::unique_lock lk(s.mu);
    s.ready_cv.wait(lk, [&] { return s.ready.count(b) > 0; });
    auto it = s.ready.find(b);
    slot = std::move(it->second);
    s.ready.erase(it);
    ++s.next_deliver;
  }
  s.space_cv.notify_all();
  if (slot.error) std::rethrow_exception(slot.error);
  return std::move(slot.value);
}

}  // namespace lockstep::ref
