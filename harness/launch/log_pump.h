#pragma once
// The ranks' output on its way to their logs. Each rank's stdout and stderr come through one pipe
// into its log file, which keeps at most the cap (LOCKSTEP_LOG_CAP_MB, default 8 MiB): the first
// half as written, then the last half, with a line between them saying how many bytes were cut,
// so a rank that prints gigabytes leaves a bounded log (and lockstep keeps at most half the cap of
// it in memory per rank). A rank's lines can also be echoed live to the launcher's stdout after a
// label ("[rank1]:"), as torchrun prints them.
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace lockstep::launch {

// The line of a rank's log that says why it ended: the exception line of the last Python
// traceback when there is one, else the last line that is not a warning (nor starts with
// `skip_prefix`, when given: lockstep's own words in a program's output).
std::string log_last_line(const std::string& file, const std::string& skip_prefix = "");

// The cap in bytes of every rank log: LOCKSTEP_LOG_CAP_MB (a whole number of MiB, at least 1),
// else 8 MiB. InputError naming the variable when it is not a positive integer.
std::size_t log_cap_bytes();

// Movable? No: it owns a thread and file descriptors; one per RankProcesses.
class LogPump {
 public:
  explicit LogPump(std::size_t cap = log_cap_bytes());
  LogPump(const LogPump&) = delete;
  LogPump& operator=(const LogPump&) = delete;
  ~LogPump();  // stop()

  // Takes `read_fd` (the read end of a rank's output pipe; closed here) and creates (truncates)
  // the log at `path`. With a non-empty `label`, each complete line is also written to stdout
  // after it. Throws lockstep::Error when the log cannot be created.
  void add(int read_fd, const std::string& path, const std::string& label);
  // Reads whatever the writers of every pipe have written so far, without blocking, and brings
  // each log file up to date (its cut tail included): after it, a log holds everything its rank
  // wrote before exiting.
  void drain();
  // drain(), then closes every pipe and ends the thread. Idempotent.
  void stop();

 private:
  struct Sink;
  void loop();
  void pump(Sink& s, bool until_empty);
  void flush(Sink& s, bool final);

  std::size_t head_cap_, tail_cap_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Sink>> sinks_;
  int wake_[2] = {-1, -1};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace lockstep::launch
