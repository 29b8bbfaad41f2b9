#include "harness/launch/watch.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "harness/core/fs.h"
#include "harness/launch/cancel.h"
#include "harness/launch/group_wait.h"
#include "harness/rank/status.h"
#include "harness/sut/io.h"

namespace lockstep::launch {
namespace {

namespace fs = std::filesystem;

constexpr auto kPoll = std::chrono::milliseconds(5);
constexpr auto kProgressPoll = std::chrono::milliseconds(100);

bool clean_exit(const Child& c) { return c.exited && WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0; }
int exit_code(const Child& c) { return c.exited && WIFEXITED(c.status) ? WEXITSTATUS(c.status) : -1; }

std::string way_of_exit(const Child& c) {
  return WIFSIGNALED(c.status) ? signal_name(WTERMSIG(c.status)) : "exit " + std::to_string(exit_code(c));
}

// Rule 3's failure_way for an exit with `why` (a status message or a log line), its numbers read
// as any number (failure_words): the exception raised (raised_line), for an exit code or SIGABRT
// after it (a thread of the engine stopped while the interpreter finalized); else the signal (a
// SIGKILL or SIGSEGV is its own way, whatever the log said before it), or the exit code and why.
std::string way_of_exit(const Child& c, const std::string& why) {
  if (raised_line(why) && (!WIFSIGNALED(c.status) || WTERMSIG(c.status) == SIGABRT)) return "raised " + failure_words(why);
  if (WIFSIGNALED(c.status)) return way_of_exit(c);
  return way_of_exit(c) + ": " + failure_words(why);
}

// ---- lockstep's own ranks and programs: the board -------------------------------------------

class BoardSource final : public ProgressSource {
 public:
  BoardSource(const comm::Board& board, std::string dir, bool exit_finishes, int first, int count)
      : board_(board), dir_(std::move(dir)), exit_finishes_(exit_finishes), first_(first),
        end_(count < 0 ? board.world_size() : first + count) {}

  bool rank_contract() const override { return true; }
  int rank_of(int child) const override { return first_ + child; }

  void poll(int child, const Child& c, Watchdog::Rank& k) override {
    const int r = rank_of(child);
    const auto v = board_.view(r);
    // A rank that exited cleanly without finishing leaves the others waiting.
    k.bad_exit = c.exited && !(exit_code(c) == rank::kExitClean && (exit_finishes_ || v.state == comm::RankState::kFinished));
    k.started = exit_finishes_ || v.started();
    k.progress = v.issued + v.completed + v.p2p + v.group_issued + v.group_completed + static_cast<std::int64_t>(v.state);
    k.engine_timeout_s = static_cast<double>(v.engine_timeout_ms) / 1000.0;
    k.in_call = v.issued > v.completed || v.group_issued > v.group_completed;
  }

  bool finished(int child) const override { return exit_finishes_ || board_.view(rank_of(child)).state == comm::RankState::kFinished; }

  Diagnosis failure(int child, const Child& c, const std::vector<Child>&) const override {
    const int r = rank_of(child);
    const auto v = board_.view(r);
    std::ostringstream os;
    // This rank's receive from a send of another size, seen by its engine before the verifier
    // beside it: the pair.
    if (auto torn = torn_p2p_pair(board_, first_, end_, r)) {
      torn->message += " (rank " + std::to_string(r) + (WIFSIGNALED(c.status) ? " was killed by " : " ended with ") + way_of_exit(c) + ")";
      return *torn;
    }
    os << "rank " << r;
    // A program's uncaught exception is in its status (with where it was raised and its step),
    // even when the interpreter was then killed by a signal on its way out.
    const auto st = rank::read_status(rank::status_path(dir_, r));
    const bool raised = st && st->outcome == rank::Outcome::kError && !st->message.empty();
    if (raised) os << " failed: " << st->message << ";";
    if (WIFSIGNALED(c.status)) {
      os << (raised ? " then it was killed by " : " was killed by ") << signal_name(WTERMSIG(c.status));
    } else {
      os << (raised ? " it exited with code " : " exited with code ") << WEXITSTATUS(c.status);
      if (raised) {
      } else if (st && !st->message.empty()) {
        os << " (" << st->message << ")";
      } else if (const std::string l = log_last_line(rank::log_path(dir_, r)); !l.empty()) {
        os << " (" << l << ")";  // it wrote no status: a program that failed outside lockstep's backend
      }
    }
    os << " after completing " << v.last_completed();
    if (v.in_collective()) os << ", while in " << v.waiting_in();
    os << others_waiting(r);
    // The step: the program's own when it said, else that of the call it was in or last completed.
    const std::int64_t step = st && st->step >= 0 ? st->step : (v.in_collective() ? v.step : v.last_step);
    return Diagnosis{DiagnosisKind::kRankFailure, os.str(), r, v.completed - 1, step};
  }

  std::string failure_way(int child, const Child& c) const override {
    const int r = rank_of(child);
    if (auto st = rank::read_status(rank::status_path(dir_, r)); st && !st->message.empty()) return way_of_exit(c, st->message);
    return way_of_exit(c, log_last_line(rank::log_path(dir_, r)));
  }

  Diagnosis unfinished(int child, const std::vector<Child>&) const override {
    const int r = rank_of(child);
    const auto v = board_.view(r);
    std::ostringstream os;
    os << "rank " << r << " exited (code 0) without finishing its workload after completing " << v.last_completed()
       << others_waiting(r);
    return Diagnosis{DiagnosisKind::kMissingParticipant, os.str(), r, v.completed};
  }

  // Rule 5: only communication errors; their cause is outside the ranks.
  std::optional<Diagnosis> comm_lost(int child) const override {
    const int r = rank_of(child);
    const auto st = rank::read_status(rank::status_path(dir_, r));
    const auto v = board_.view(r);
    std::string msg = "rank " + std::to_string(r) + " lost communication in " +
                      (v.in_collective() ? v.waiting_in() : "no collective") + ": " + (st ? st->message : "");
    return Diagnosis{DiagnosisKind::kRankFailure, msg, r, v.issued - 1};
  }

  Diagnosis timeout(const std::vector<Child>&, double timeout_s) const override {
    if (end_ - first_ < board_.world_size()) return node_timeout(timeout_s);
    // A program's ranks that wait for each other in calls on different groups, or for a send that
    // went to another rank: the call issued wrong, not the time it took.
    if (auto crossed = stuck_waits(board_, first_, end_, /*same_site=*/false)) {
      std::ostringstream os;
      os << "no progress for " << timeout_s << " s: " << crossed->message << others_waiting(-1);
      return Diagnosis{crossed->kind, os.str(), crossed->rank, crossed->seq, crossed->step};
    }
    std::int64_t most = 0;
    for (int r = first_; r < end_; ++r) most = std::max(most, board_.view(r).issued);
    // Blame the ranks that are behind: not in a collective, or not yet at the furthest one.
    std::vector<int> behind;
    for (int r = first_; r < end_; ++r) {
      const auto v = board_.view(r);
      if (!v.in_collective() || v.issued < most) behind.push_back(r);
    }
    // The step: that of the call the furthest ranks wait in (the one the blamed rank has not issued).
    std::int64_t step = -1;
    for (int r = first_; r < end_ && step < 0; ++r) {
      const auto v = board_.view(r);
      if (v.in_collective() && v.issued == most) step = v.step;
    }
    std::ostringstream os;
    os << "no progress for " << timeout_s << " s";
    int blamed = -1;
    if (behind.empty()) {
      os << ": every rank is waiting in " << board_.view(first_).waiting_in();
    } else {
      blamed = behind.front();
      const auto v = board_.view(blamed);
      os << ": " << rank_list(behind) << (behind.size() == 1 ? " has" : " have") << " not issued collective #"
         << most - (most > 0 ? 1 : 0) << " (rank " << blamed << " last completed " << v.last_completed() << ")";
      os << others_waiting(blamed);
    }
    return Diagnosis{DiagnosisKind::kTimeout, os.str(), blamed, most - 1, step};
  }

  // A timeout seen by one node of several: only its own ranks' positions are known here. Its ranks
  // that are not in a collective are blamed; when all of them wait in one, the cause is on
  // another node, and nobody is blamed here.
  Diagnosis node_timeout(double timeout_s) const {
    std::ostringstream os;
    os << "no progress for " << timeout_s << " s on this node (ranks " << first_ << ".." << end_ - 1 << " of "
       << board_.world_size() << "; the other nodes' ranks are watched by their own lockstep)";
    int blamed = -1;
    std::int64_t seq = -1;
    for (int r = first_; r < end_; ++r) {
      const auto v = board_.view(r);
      os << "; rank " << r << (v.in_collective() ? " is waiting in " + v.waiting_in() : " is not in a collective (last completed " + v.last_completed() + ")");
      if (!v.in_collective() && blamed < 0) {
        blamed = r;
        seq = v.completed;
      }
    }
    if (blamed < 0) os << "; every rank here is waiting: the rank that holds them up is on another node";
    return Diagnosis{DiagnosisKind::kTimeout, os.str(), blamed, seq};
  }

  // Who is still starting and what they report doing, and where the ranks that did start are.
  // The ranks furthest behind are blamed; when every rank is at the same point, nobody is.
  Diagnosis startup(const Watchdog& dog, int) const override {
    const auto& starting = dog.starting();
    std::ostringstream os;
    os << "start-up took longer than " << dog.limits().startup_s << " s (run.startup_timeout_s)";
    std::vector<std::pair<std::string, std::vector<int>>> doing;
    int behind = 1 << 20;
    int ahead = -1;
    for (int child : starting) {
      const int r = rank_of(child);
      const std::string a = board_.view(r).activity;
      behind = std::min(behind, startup_stage(a));
      ahead = std::max(ahead, startup_stage(a));
      auto it = std::find_if(doing.begin(), doing.end(), [&](auto& g) { return g.first == a; });
      if (it == doing.end()) doing.push_back({a, {r}});
      else it->second.push_back(r);
    }
    std::sort(doing.begin(), doing.end(), [](auto& x, auto& y) { return startup_stage(x.first) < startup_stage(y.first); });
    for (const auto& [a, ranks] : doing) {
      os << ": " << rank_list(ranks) << (ranks.size() == 1 ? " is" : " are") << " still starting ("
         << (a.empty() ? "nothing reported yet: the process is starting or loading its libraries" : a) << ")";
    }
    std::vector<std::pair<std::string, std::vector<int>>> groups;
    std::vector<double> started_after(static_cast<std::size_t>(board_.world_size()));
    for (int r = first_; r < end_; ++r) {
      const auto t = dog.startup_seconds(r - first_);
      if (!t) continue;
      started_after[static_cast<std::size_t>(r)] = *t;
      const auto v = board_.view(r);
      const std::string what = v.in_collective() ? "waiting in " + v.waiting_in() : "last completed " + v.last_completed();
      auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g.first == what; });
      if (it == groups.end()) groups.push_back({what, {r}});
      else it->second.push_back(r);
    }
    for (const auto& [what, ranks] : groups) {
      os << "; " << rank_list(ranks) << " started (after ";
      for (std::size_t i = 0; i < ranks.size(); ++i) {
        os << (i ? ", " : "") << std::fixed << std::setprecision(1) << started_after[static_cast<std::size_t>(ranks[i])] << " s";
      }
      os << ") and " << (ranks.size() == 1 ? "is " : "are ") << what;
    }
    const bool someone_ahead = !groups.empty() || ahead > behind;
    return Diagnosis{DiagnosisKind::kTimeout, os.str(), someone_ahead ? doing.front().second.front() : -1, -1};
  }

  Diagnosis deadline(const Watchdog& dog) const override {
    std::ostringstream os;
    os << "the run did not end within run.deadline_s = " << dog.limits().deadline_s << " s (its last progress was "
       << std::fixed << std::setprecision(1) << dog.idle_seconds() << " s before)";
    for (int r = first_; r < end_; ++r) {
      const auto v = board_.view(r);
      os << "; rank " << r << ' ' << (v.in_collective() ? "in " + v.waiting_in() : "last completed " + v.last_completed());
    }
    return Diagnosis{DiagnosisKind::kTimeout, os.str(), -1, -1};
  }

 private:
  // "; ranks 0,2 were waiting in collective #13 all_reduce (mix step 3)" for the ranks other
  // than `except`, grouped by what they wait in (exited ranks show where they stopped).
  bool deadlocked() const override { return end_ - first_ == board_.world_size() && stuck_waits(board_, first_, end_).has_value(); }

  std::string others_waiting(int except) const {
    std::vector<std::pair<std::string, std::vector<int>>> groups;
    for (int r = first_; r < end_; ++r) {
      if (r == except) continue;
      const auto v = board_.view(r);
      const std::string what = wait_text(v);
      auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g.first == what; });
      if (it == groups.end()) groups.push_back({what, {r}});
      else it->second.push_back(r);
    }
    std::string s;
    for (const auto& [what, ranks] : groups) s += "; " + rank_list(ranks) + (ranks.size() == 1 ? " was " : " were ") + what;
    return s;
  }

  // How far a starting rank got, from the activity it published (rank_main.cpp, graph_spec.cpp);
  // an activity of lockstep's that this list does not know counts as the furthest.
  static int startup_stage(const std::string& activity) {
    static const char* kStages[] = {"", "connecting to the store", "creating process groups", "building the workload"};
    for (int i = 0; i < 4; ++i) {
      if (activity == kStages[i]) return i;
    }
    return 4;
  }

  const comm::Board& board_;
  std::string dir_;
  bool exit_finishes_;
  int first_, end_;  // the watched ranks: [first_, end_)
};

// ---- a system under test: progress.json and done.json ---------------------------------------

class FileSource final : public ProgressSource {
 public:
  FileSource(int ws, std::string outputs, std::string dir, std::string log_suffix, std::string who, double startup_s,
             double deadline_s)
      : ws_(ws), outputs_(std::move(outputs)), dir_(std::move(dir)), log_suffix_(std::move(log_suffix)), who_(std::move(who)),
        startup_s_(startup_s), deadline_s_(deadline_s), progress_(static_cast<std::size_t>(ws)),
        moves_(static_cast<std::size_t>(ws), 0), last_poll_(Clock::now() - kProgressPoll) {}

  bool rank_contract() const override { return false; }

  // Progress is a change of a rank's progress.json (read every kProgressPoll); a rank has started
  // once it reported progress (lockstep_sut.start() does, after the adapter's imports).
  void poll(int r, const Child& c, Watchdog::Rank& k) override {
    const auto i = static_cast<std::size_t>(r);
    if (r == 0) {
      poll_files_ = Clock::now() - last_poll_ >= kProgressPoll;
      if (poll_files_) last_poll_ = Clock::now();
    }
    if (poll_files_) read_progress(r);
    k.bad_exit = c.exited && !(clean_exit(c) && finished(r));
    k.started = moves_[i] > 0;
    k.progress = moves_[i];
  }

  // lstat: a done.json that is a symlink or a FIFO is there (and refused when the outputs are read).
  bool finished(int r) const override { return fs::exists(fs::symlink_status(rank_dir(r) + "/done.json")); }

  Diagnosis failure(int r, const Child& c, const std::vector<Child>&) const override {
    std::ostringstream os;
    os << "rank " << r << " (system " << who_ << ") ";
    if (WIFSIGNALED(c.status)) os << "was killed by " << signal_name(WTERMSIG(c.status));
    else os << "exited with code " << WEXITSTATUS(c.status);
    if (const std::string w = what_of(r); !w.empty()) os << " while " << w;
    if (const std::string l = log_last_line(rank::log_path(dir_, r) + log_suffix_); !l.empty()) os << ": " << l;
    return Diagnosis{DiagnosisKind::kRankFailure, os.str(), r, -1};
  }

  std::string failure_way(int r, const Child& c) const override {
    return way_of_exit(c, log_last_line(rank::log_path(dir_, r) + log_suffix_));
  }

  Diagnosis unfinished(int r, const std::vector<Child>&) const override {
    return Diagnosis{DiagnosisKind::kMissingParticipant,
                     "rank " + std::to_string(r) + " (system " + who_ +
                         ") exited (code 0) without finishing its outputs: no done.json (the adapter never called "
                         "Outputs.finish())",
                     r, -1};
  }

  // The ranks that never got to lockstep_sut.start(), blamed (the lowest of them) when any
  // other rank started, whether it is still running or has finished: by rule 6 every rank that
  // exited did so cleanly with its done.json (rules 3 and 4 take the others).
  Diagnosis startup(const Watchdog& dog, int exits) const override {
    const auto& starting = dog.starting();
    std::ostringstream os;
    os << "start-up took longer than " << startup_s_ << " s (run.startup_timeout_s): ";
    for (std::size_t i = 0; i < starting.size(); ++i) os << (i ? "," : (starting.size() == 1 ? "rank " : "ranks ")) << starting[i];
    os << " (system " << who_ << ") never reached lockstep_sut.start() (its imports or set-up are still running)";
    const int others = ws_ - static_cast<int>(starting.size());
    const bool some_started = !starting.empty() && others > 0;
    if (some_started) {
      const int running = others - exits;
      os << "; the other ranks started";
      if (exits > 0) os << " (" << exits << " of " << ws_ << " finished" << (running > 0 ? ", " + std::to_string(running) + " still running" : "") << ")";
    }
    return Diagnosis{DiagnosisKind::kTimeout, os.str(), some_started ? starting.front() : -1, -1};
  }

  Diagnosis deadline(const Watchdog& dog) const override {
    std::ostringstream os;
    os << "the run did not end within run.deadline_s = " << deadline_s_ << " s (its last progress was " << std::fixed
       << std::setprecision(1) << dog.idle_seconds() << " s before)";
    for (int r = 0; r < ws_; ++r) {
      if (const std::string w = what_of(r); !w.empty()) os << "; rank " << r << " last reported: " << w;
    }
    return Diagnosis{DiagnosisKind::kTimeout, os.str(), -1, -1};
  }

  Diagnosis timeout(const std::vector<Child>& kids, double timeout_s) const override {
    std::vector<int> running;
    int exits = 0;
    for (int r = 0; r < ws_; ++r) {
      if (!kids[static_cast<std::size_t>(r)].exited) running.push_back(r);
      else ++exits;
    }
    std::ostringstream os;
    os << "no progress for " << timeout_s << " s: ";
    for (std::size_t i = 0; i < running.size(); ++i) {
      const std::string w = what_of(running[i]);
      os << (i ? "; " : "") << "rank " << running[i] << " still running" << (w.empty() ? " (it reported no progress)" : " (last reported: " + w + ")");
    }
    if (exits > 0) os << "; " << exits << " of " << ws_ << " ranks finished";
    // Blame the stuck ranks when others finished; with none finished, nobody is singled out.
    const int blamed = exits > 0 && !running.empty() ? running.front() : -1;
    return Diagnosis{DiagnosisKind::kTimeout, os.str(), blamed, -1};
  }

 private:
  std::string rank_dir(int r) const { return outputs_ + "/rank" + std::to_string(r); }
  std::string what_of(int r) const {
    const auto i = static_cast<std::size_t>(r);
    if (!refused_[i].empty()) return "(its progress.json " + refused_[i] + ")";
    const auto j = sut_json(progress_[i]);
    std::string w = j.is_object() && j.contains("what") && j["what"].is_string() ? j["what"].get<std::string>() : std::string();
    if (w.size() > 300) w = w.substr(0, 300) + "...";
    return w;
  }
  static nlohmann::json sut_json(const std::string& text) {
    try {
      return sut::parse_untrusted_json(text);
    } catch (const std::exception&) {
      return nullptr;
    }
  }
  // Re-reads rank r's progress.json when its size or modification time changed; a change of
  // its text is progress. A progress.json that is not a regular file, or is larger than
  // sut::kMaxProgressBytes, is never read (what_of says why); its stat changes still count.
  void read_progress(int r) {
    const auto i = static_cast<std::size_t>(r);
    Fd f;
    try {
      f = open_regular(rank_dir(r), "progress.json");
    } catch (const std::exception& e) {
      refused_[i] = e.what();
      return;
    }
    if (!f) return;
    struct stat st {};
    if (::fstat(f.get(), &st) != 0) return;
    const auto stamp = std::make_pair(static_cast<long long>(st.st_size),
                                      static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec);
    if (stamp == stamp_[i]) return;
    stamp_[i] = stamp;
    if (static_cast<std::size_t>(st.st_size) > sut::kMaxProgressBytes) {
      refused_[i] = "holds " + std::to_string(st.st_size) + " bytes, more than the " + std::to_string(sut::kMaxProgressBytes) + " read";
      progress_[i].clear();
      ++moves_[i];
      return;
    }
    refused_[i].clear();
    std::string text(static_cast<std::size_t>(st.st_size), '\0');
    const ssize_t got = ::pread(f.get(), text.data(), text.size(), 0);
    text.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
    if (text != progress_[i]) {
      progress_[i] = std::move(text);
      ++moves_[i];
    }
  }

  int ws_;
  std::string outputs_, dir_, log_suffix_, who_;
  double startup_s_, deadline_s_;
  std::vector<std::string> progress_;
  std::vector<std::int64_t> moves_;
  std::vector<std::pair<long long, long long>> stamp_ = std::vector<std::pair<long long, long long>>(static_cast<std::size_t>(ws_));
  std::vector<std::string> refused_ = std::vector<std::string>(static_cast<std::size_t>(ws_));
  Clock::time_point last_poll_;
  bool poll_files_ = false;
};

// ---- a probe: only its exit ----------------------------------------------------------------

class ExitSource final : public ProgressSource {
 public:
  bool rank_contract() const override { return false; }
  void poll(int, const Child&, Watchdog::Rank& k) override { k.bad_exit = false; }
  bool finished(int) const override { return true; }
  Diagnosis failure(int r, const Child& c, const std::vector<Child>&) const override {
    return Diagnosis{DiagnosisKind::kRankFailure,
                     "process " + std::to_string(r) + (WIFSIGNALED(c.status) ? " was killed by " + signal_name(WTERMSIG(c.status))
                                                                           : " exited with code " + std::to_string(exit_code(c))),
                     r, -1};
  }
  Diagnosis unfinished(int r, const std::vector<Child>&) const override { return {DiagnosisKind::kMissingParticipant, "", r, -1}; }
  Diagnosis startup(const Watchdog& dog, int) const override {
    std::ostringstream os;
    os << "did not end within " << dog.limits().startup_s << " s";
    return Diagnosis{DiagnosisKind::kTimeout, os.str(), -1, -1};
  }
  Diagnosis deadline(const Watchdog& dog) const override { return startup(dog, 0); }
  Diagnosis timeout(const std::vector<Child>&, double) const override { return {DiagnosisKind::kTimeout, "", -1, -1}; }
};

}  // namespace

std::string ProgressSource::failure_way(int, const Child& c) const { return way_of_exit(c); }

std::unique_ptr<ProgressSource> exit_source() { return std::make_unique<ExitSource>(); }

std::unique_ptr<ProgressSource> board_source(const comm::Board& board, std::string dir, bool exit_finishes, int first_rank,
                                             int count) {
  return std::make_unique<BoardSource>(board, std::move(dir), exit_finishes, first_rank, count);
}

std::unique_ptr<ProgressSource> file_source(int world_size, std::string outputs, std::string dir, std::string log_suffix,
                                            std::string who, double startup_timeout_s, double deadline_s) {
  return std::make_unique<FileSource>(world_size, std::move(outputs), std::move(dir), std::move(log_suffix), std::move(who),
                                      startup_timeout_s, deadline_s);
}

WatchEnd watch(RankProcesses& procs, ProgressSource& source, Watchdog& dog) {
  const std::size_t ws = procs.children().size();
  std::vector<Watchdog::Rank> seen(ws);
  WatchEnd end;
  while (end.verdict == Watchdog::Verdict::kWatch && !cancelled()) {
    procs.reap();
    for (std::size_t r = 0; r < ws; ++r) {
      const Child& c = procs.children()[r];
      seen[r].exited = c.exited;
      source.poll(static_cast<int>(r), c, seen[r]);
      seen[r].cpu_ns = dog.settling() && !c.exited && !seen[r].in_call ? scheduled_ns(c.pid) : -1;
    }
    end.verdict = dog.observe(seen, Clock::now());
    if (end.verdict == Watchdog::Verdict::kWatch && dog.idle_seconds() >= kDeadlockAfterS && source.deadlocked()) {
      end.verdict = Watchdog::Verdict::kTimeout;
    }
    if (end.verdict == Watchdog::Verdict::kWatch) std::this_thread::sleep_for(kPoll);
  }
  if (end.cancelled()) procs.kill_all();
  else procs.reap();
  return end;
}

Judgement judge(const std::vector<Child>& kids, const ProgressSource& source, const Watchdog& dog, WatchEnd end,
                double timeout_s, const std::string& dir) {
  const int ws = static_cast<int>(kids.size());
  auto code_is = [&](int r, int code) { return exit_code(kids[static_cast<std::size_t>(r)]) == code; };
  const bool contract = source.rank_contract();
  if (contract) {
    // 1. A rank that reached a diagnosis itself (verifier, workload checks).
    for (int r = 0; r < ws; ++r) {
      if (!code_is(r, rank::kExitDiagnosed)) continue;
      if (auto st = rank::read_status(rank::status_path(dir, source.rank_of(r))); st && st->diagnosis) return {st->diagnosis, ""};
    }
    // 2. Input errors are the user's to fix, not a diagnosis.
    for (int r = 0; r < ws; ++r) {
      if (!code_is(r, rank::kExitInput)) continue;
      const int rank = source.rank_of(r);
      auto st = rank::read_status(rank::status_path(dir, rank));
      std::string why = "rank " + std::to_string(rank) + ": " + (st && !st->message.empty() ? st->message : "bad input");
      // A program that ended before init_process_group (argparse, SystemExit, a missing file)
      // said why in its own output: its last line is quoted.
      if (const std::string last = log_last_line(rank::log_path(dir, rank), "lockstep: "); st && st->program && !last.empty()) {
        why += "; its last output: " + last;
      }
      return {std::nullopt, why};
    }
    // A rank that could not write its status: the report folder's disk, not the rank.
    for (int r = 0; r < ws; ++r) {
      if (!code_is(r, rank::kExitNoStatus)) continue;
      const int rank = source.rank_of(r);
      return {std::nullopt, "rank " + std::to_string(rank) + " could not write its status file under " + dir +
                                " (is the report disk full or read-only?); see rank" + std::to_string(rank) + ".log"};
    }
  }
  // 3. The rank that failed on its own first; of those that failed alike within the settle window, the lowest.
  std::vector<int> failed;
  int first = -1;
  for (int r = 0; r < ws; ++r) {
    const Child& c = kids[static_cast<std::size_t>(r)];
    if (!c.exited) continue;
    const int code = exit_code(c);
    if (!(WIFSIGNALED(c.status) || (code != rank::kExitClean && !(contract && code == rank::kExitCommError)))) continue;
    failed.push_back(r);
    if (first < 0 || c.exit_time < kids[static_cast<std::size_t>(first)].exit_time) first = r;
  }
  if (first >= 0) {
    const Child& f = kids[static_cast<std::size_t>(first)];
    const std::string way = source.failure_way(first, f);
    const auto window = std::chrono::duration<double>(dog.limits().settle_s);
    const auto until = dog.settle_until();  // every rank reaped before it was seen inside the window
    int blamed = first;
    for (int r : failed) {  // ascending: the first that qualifies is the lowest
      if (r >= first) break;
      const Child& c = kids[static_cast<std::size_t>(r)];
      if ((c.exit_time - f.exit_time <= window || (until && c.exit_time <= *until)) && source.failure_way(r, c) == way) {
        blamed = r;
        break;
      }
    }
    return {source.failure(blamed, kids[static_cast<std::size_t>(blamed)], kids), ""};
  }
  // 4. A rank that ended cleanly without finishing (it returned early).
  for (int r = 0; r < ws; ++r) {
    if (clean_exit(kids[static_cast<std::size_t>(r)]) && !source.finished(r)) return {source.unfinished(r, kids), ""};
  }
  // 5. Only communication errors: name them (their cause is outside the ranks).
  if (contract) {
    for (int r = 0; r < ws; ++r) {
      if (code_is(r, rank::kExitCommError)) return {source.comm_lost(r), ""};
    }
  }
  // 6. The watchdog's verdict.
  int exits = 0;
  for (const auto& c : kids) exits += c.exited;
  switch (end.verdict) {
    case Watchdog::Verdict::kStartupTimeout: return {source.startup(dog, exits), ""};
    case Watchdog::Verdict::kDeadline: return {source.deadline(dog), ""};
    case Watchdog::Verdict::kTimeout: {
      // A program's shorter engine timeout brought the watchdog's forward: the message says so.
      Diagnosis d = source.timeout(kids, std::min(dog.timeout_s(), std::round(std::max(dog.idle_seconds(), kDeadlockAfterS) * 10) / 10));
      if (dog.timeout_s() < timeout_s) {
        d.message += " (lockstep's timeout " + std::to_string(static_cast<long long>(timeout_s)) + " s was brought down to " +
                     std::to_string(static_cast<long long>(dog.timeout_s())) + " s, " + std::to_string(static_cast<int>(Watchdog::kEngineTimeoutShare * 100)) +
                     "% of the timeout the program gave init_process_group, so that lockstep speaks before its engine gives up)";
      }
      return {d, ""};
    }
    default: return {};
  }
}

}  // namespace lockstep::launch
