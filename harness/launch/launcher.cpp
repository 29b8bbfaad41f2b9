#include "harness/launch/launcher.h"

#include <algorithm>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "harness/comm/board.h"
#include "harness/comm/faults.h"
#include "harness/comm/monitor.h"
#include "harness/launch/cancel.h"
#include "harness/launch/run_once.h"
#include "harness/launch/processes.h"
#include "harness/launch/watchdog.h"
#include "harness/perf/cost.h"
#include "harness/launch/system_run.h"
#include "reference/common/device.h"
#include "harness/comm/engines.h"
#include "harness/comm/verifier.h"
#include "harness/core/error.h"
#include "harness/rank/rank_main.h"
#include "harness/report/chrome_trace.h"
#include "harness/report/dump.h"

namespace lockstep::launch {
namespace {

namespace fs = std::filesystem;

// How long after the first rank ends abnormally the others get to report, so that the root
// cause (a crash, a diagnosis) is chosen over its consequences (peers' connection errors).
constexpr auto kSettle = std::chrono::milliseconds(400);
constexpr auto kPoll = std::chrono::milliseconds(5);


std::optional<nlohmann::json> read_status(const std::string& dir, int rank) {
  std::ifstream in(rank::status_path(dir, rank));
  if (!in) return std::nullopt;
  try {
    return nlohmann::json::parse(in);
  } catch (...) {
    return std::nullopt;
  }
}

// 128 random bits, hex.
std::string random_token() {
  std::ifstream in("/dev/urandom", std::ios::binary);
  unsigned char bytes[16] = {};
  in.read(reinterpret_cast<char*>(bytes), sizeof bytes);
  LOCKSTEP_CHECK(in.gcount() == sizeof bytes, "cannot read /dev/urandom");
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (unsigned char b : bytes) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

std::string join_ranks(const std::vector<int>& ranks) {
  std::ostringstream os;
  os << (ranks.size() == 1 ? "rank " : "ranks ");
  for (std::size_t i = 0; i < ranks.size(); ++i) os << (i ? "," : "") << ranks[i];
  return os.str();
}

// "; ranks 0,2 were waiting in collective #13 all_reduce (mix step 3)" for the ranks in
// flight, grouped by what they wait in.
std::string others_waiting(const comm::Board& board, int except, const std::vector<Child>& kids) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (int r = 0; r < board.world_size(); ++r) {
    if (r == except) continue;
    const auto v = board.view(r);
    std::string what;
    (void)kids;  // exited ranks still show where they were when they stopped
    if (v.in_collective()) what = "waiting in " + v.waiting_in();
    else what = "not in a collective (last completed " + v.last_completed() + ")";
    auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g.first == what; });
    if (it == groups.end()) groups.push_back({what, {r}});
    else it->second.push_back(r);
  }
  std::string s;
  for (const auto& [what, ranks] : groups) s += "; " + join_ranks(ranks) + (ranks.size() == 1 ? " was " : " were ") + what;
  return s;
}

// "; last collectives: rank 0: #6 all_reduce f32[1316] sum (train.py:88 step 26) completed,
// #7 ... in flight; rank 1: ..." from the ranks' flight recorders (the last `per_rank` each).
std::string flight_summary(const comm::Board& board, std::size_t per_rank) {
  std::ostringstream os;
  os << "; last collectives:";
  for (int r = 0; r < board.world_size(); ++r) {
    const auto records = comm::read_flight(board.slot(r));
    os << (r ? "; " : " ") << "rank " << r << ": ";
    if (records.empty()) os << "none";
    const std::size_t from = records.size() > per_rank ? records.size() - per_rank : 0;
    for (std::size_t i = from; i < records.size(); ++i) os << (i > from ? ", " : "") << records[i].describe();
  }
  return os.str();
}

// Adds to each rank's trace the flight-recorder records it lacks: the calls of a rank killed
// before it flushed its trace, and the call each rank was in when the run ended (with the
// diagnosis, when the diagnosis names that collective).
void add_flight_records(const comm::Board& board, const std::string& dir, const std::optional<Diagnosis>& d) {
  for (int r = 0; r < board.world_size(); ++r) {
    const std::string path = rank::trace_path(dir, r);
    std::set<std::int64_t> have;
    {
      std::ifstream in(path);
      for (std::string line; std::getline(in, line);) {
        const auto record = trace::parse_line(line);
        if (record && record->kind == trace::kCollective) have.insert(record->seq.value_or(-1));
      }
    }
    std::ofstream out(path, std::ios::app);
    for (const auto& f : comm::read_flight(board.slot(r))) {
      if (have.count(f.seq)) continue;
      trace::Record record = comm::trace_record(r, f);
      if (record.error && d && d->seq == f.seq) record.error = std::string(to_string(d->kind)) + ": " + d->message;
      out << trace::to_line(record);
    }
  }
}

struct Outcome {
  std::optional<Diagnosis> diagnosis;
  std::string error;  // a harness problem (not a diagnosis), "" if none
};

// `exit_finishes`: a clean exit is a finished rank (a program on its own backend, which
// publishes nothing on the board).
Outcome judge_exits(const std::vector<Child>& kids, const comm::Board& board, const std::string& dir, bool exit_finishes = false) {
  const int ws = static_cast<int>(kids.size());
  // 1. A rank that reached a diagnosis itself (verifier, workload checks).
  for (int r = 0; r < ws; ++r) {
    const auto& c = kids[static_cast<std::size_t>(r)];
    if (c.exited && WIFEXITED(c.status) && WEXITSTATUS(c.status) == rank::kExitDiagnosed) {
      if (auto st = read_status(dir, r); st && st->contains("diagnosis")) {
        const auto& d = (*st)["diagnosis"];
        auto kind = diagnosis_kind_from_string(d.value("kind", ""));
        if (kind) return {Diagnosis{*kind, d.value("message", ""), d.value("rank", -1), d.value("seq", std::int64_t{-1})}, ""};
      }
    }
  }
  // 2. Input errors are the user's to fix, not a diagnosis.
  for (int r = 0; r < ws; ++r) {
    const auto& c = kids[static_cast<std::size_t>(r)];
    if (c.exited && WIFEXITED(c.status) && WEXITSTATUS(c.status) == rank::kExitInput) {
      auto st = read_status(dir, r);
      return {std::nullopt, "rank " + std::to_string(r) + ": " + (st ? st->value("message", "bad input") : "bad input")};
    }
  }
  // 2b. A rank that could not write its status: the report folder's disk, not the rank.
  for (int r = 0; r < ws; ++r) {
    const auto& c = kids[static_cast<std::size_t>(r)];
    if (c.exited && WIFEXITED(c.status) && WEXITSTATUS(c.status) == rank::kExitNoStatus) {
      return {std::nullopt, "rank " + std::to_string(r) + " could not write its status file under " + dir +
                                " (is the report disk full or read-only?); see rank" + std::to_string(r) + ".log"};
    }
  }
  // 3. The earliest rank that crashed or failed on its own.
  const Child* first = nullptr;
  int first_rank = -1;
  for (int r = 0; r < ws; ++r) {
    const auto& c = kids[static_cast<std::size_t>(r)];
    if (!c.exited) continue;
    const bool crashed = WIFSIGNALED(c.status);
    const int code = WIFEXITED(c.status) ? WEXITSTATUS(c.status) : -1;
    const bool failed = crashed || (code != rank::kExitClean && code != rank::kExitCommError);
    if (failed && (!first || c.exit_time < first->exit_time)) {
      first = &c;
      first_rank = r;
    }
  }
  if (first) {
    const auto v = board.view(first_rank);
    std::ostringstream os;
    os << "rank " << first_rank;
    if (WIFSIGNALED(first->status)) {
      os << " was killed by " << signal_name(WTERMSIG(first->status));
    } else {
      os << " exited with code " << WEXITSTATUS(first->status);
      if (auto st = read_status(dir, first_rank); st && st->contains("message")) {
        os << " (" << (*st)["message"].get<std::string>() << ")";
      } else if (const std::string l = log_last_line(rank::log_path(dir, first_rank)); !l.empty()) {
        os << " (" << l << ")";  // it wrote no status: a program that failed outside lockstep's backend
      }
    }
    os << " after completing " << v.last_completed();
    if (v.in_collective()) os << ", while in " << v.waiting_in();
    os << others_waiting(board, first_rank, kids);
    return {Diagnosis{DiagnosisKind::kRankFailure, os.str(), first_rank, v.completed - 1}, ""};
  }
  // 4. A rank that ended cleanly without finishing its workload (it returned early).
  for (int r = 0; r < ws; ++r) {
    const auto& c = kids[static_cast<std::size_t>(r)];
    const auto v = board.view(r);
    if (c.exited && WIFEXITED(c.status) && WEXITSTATUS(c.status) == rank::kExitClean && !exit_finishes &&
        v.state != comm::RankState::kFinished) {
      std::ostringstream os;
      os << "rank " << r << " exited (code 0) without finishing its workload after completing "
         << v.last_completed() << others_waiting(board, r, kids);
      return {Diagnosis{DiagnosisKind::kMissingParticipant, os.str(), r, v.completed}, ""};
    }
  }
  // 5. Only communication errors: name them (their cause is outside the ranks).
  for (int r = 0; r < ws; ++r) {
    const auto& c = kids[static_cast<std::size_t>(r)];
    if (c.exited && WIFEXITED(c.status) && WEXITSTATUS(c.status) == rank::kExitCommError) {
      auto st = read_status(dir, r);
      const auto v = board.view(r);
      std::string msg = "rank " + std::to_string(r) + " lost communication in " +
                        (v.in_collective() ? v.waiting_in() : "no collective") + ": " +
                        (st ? st->value("message", "") : "");
      return {Diagnosis{DiagnosisKind::kRankFailure, msg, r, v.issued - 1}, ""};
    }
  }
  return {};
}

Diagnosis judge_timeout(const comm::Board& board, const std::vector<Child>& kids, double timeout_s) {
  const int ws = board.world_size();
  std::int64_t most = 0;
  for (int r = 0; r < ws; ++r) most = std::max(most, board.view(r).issued);
  // Blame the ranks that are behind: not in a collective, or not yet at the furthest one.
  std::vector<int> behind;
  for (int r = 0; r < ws; ++r) {
    const auto v = board.view(r);
    if (!v.in_collective() || v.issued < most) behind.push_back(r);
  }
  std::ostringstream os;
  os << "no progress for " << timeout_s << " s";
  int blamed = -1;
  std::int64_t seq = most - 1;
  if (behind.empty()) {
    os << ": every rank is waiting in " << board.view(0).waiting_in();
  } else {
    blamed = behind.front();
    const auto v = board.view(blamed);
    os << ": " << join_ranks(behind) << (behind.size() == 1 ? " has" : " have") << " not issued collective #"
       << most - (most > 0 ? 1 : 0) << " (rank " << blamed << " last completed " << v.last_completed() << ")";
    os << others_waiting(board, blamed, kids);
  }
  return Diagnosis{DiagnosisKind::kTimeout, os.str(), blamed, seq};
}

// How far a starting rank got, from the activity it published (rank_main.cpp, graph_spec.cpp);
// an activity of lockstep's that this list does not know counts as the furthest.
int startup_stage(const std::string& activity) {
  static const char* kStages[] = {"", "connecting to the store", "creating process groups", "building the workload"};
  for (int i = 0; i < 4; ++i) {
    if (activity == kStages[i]) return i;
  }
  return 4;
}

// Start-up took longer than its bound: who is still starting and what they report doing, and
// where the ranks that did start are. The ranks furthest behind are blamed; when every rank
// is at the same point, nobody is.
Diagnosis judge_startup(const comm::Board& board, const Watchdog& dog) {
  const auto& starting = dog.starting();
  std::ostringstream os;
  os << "start-up took longer than " << dog.limits().startup_s << " s (run.startup_timeout_s)";
  std::vector<std::pair<std::string, std::vector<int>>> doing;
  int behind = 1 << 20;
  int ahead = -1;
  for (int r : starting) {
    const std::string a = board.view(r).activity;
    behind = std::min(behind, startup_stage(a));
    ahead = std::max(ahead, startup_stage(a));
    auto it = std::find_if(doing.begin(), doing.end(), [&](auto& g) { return g.first == a; });
    if (it == doing.end()) doing.push_back({a, {r}});
    else it->second.push_back(r);
  }
  std::sort(doing.begin(), doing.end(), [](auto& x, auto& y) { return startup_stage(x.first) < startup_stage(y.first); });
  for (const auto& [a, ranks] : doing) {
    os << ": " << join_ranks(ranks) << (ranks.size() == 1 ? " is" : " are") << " still starting ("
       << (a.empty() ? "nothing reported yet: the process is starting or loading its libraries" : a) << ")";
  }
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (int r = 0; r < board.world_size(); ++r) {
    const auto t = dog.startup_seconds(r);
    if (!t) continue;
    const auto v = board.view(r);
    const std::string what = v.in_collective() ? "waiting in " + v.waiting_in() : "last completed " + v.last_completed();
    auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g.first == what; });
    if (it == groups.end()) groups.push_back({what, {r}});
    else it->second.push_back(r);
  }
  for (const auto& [what, ranks] : groups) {
    os << "; " << join_ranks(ranks) << " started (after ";
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      os << (i ? ", " : "") << std::fixed << std::setprecision(1) << *dog.startup_seconds(ranks[i]) << " s";
    }
    os << ") and " << (ranks.size() == 1 ? "is " : "are ") << what;
  }
  const bool someone_ahead = !groups.empty() || ahead > behind;
  return Diagnosis{DiagnosisKind::kTimeout, os.str(), someone_ahead ? doing.front().second.front() : -1, -1};
}

// The run kept making progress but did not end within run.deadline_s.
Diagnosis judge_deadline(const comm::Board& board, const Watchdog& dog) {
  std::ostringstream os;
  os << "the run did not end within run.deadline_s = " << dog.limits().deadline_s << " s (its last progress was "
     << std::fixed << std::setprecision(1) << dog.idle_seconds() << " s before)";
  for (int r = 0; r < board.world_size(); ++r) {
    const auto v = board.view(r);
    os << "; rank " << r << ' ' << (v.in_collective() ? "in " + v.waiting_in() : "last completed " + v.last_completed());
  }
  return Diagnosis{DiagnosisKind::kTimeout, os.str(), -1, -1};
}

// "" when every [[inject]] fired on some rank; else an error naming the first that did not. An
// injection that never fired tested nothing, whatever the outcome.
std::string unfired_injections(const scenario::Scenario& s, const comm::Board& board, const std::optional<Diagnosis>& d,
                               bool slowdown_off) {
  std::uint64_t fired = 0;
  for (int r = 0; r < board.world_size(); ++r) fired |= board.view(r).fired;
  for (const auto& inj : s.injections) {
    if (fired & (std::uint64_t{1} << inj.index)) continue;
    if (slowdown_off && inj.kind == "slowdown") continue;
    std::ostringstream os;
    os << "injection " << inj.label() << " never fired: ";
    if (comm::is_comm_fault(inj.kind)) {
      const comm::Fault f = comm::parse_fault(inj, s.world_size);
      const auto v = board.view(f.rank);
      os << "rank " << f.rank << " issued no call matching " << comm::describe_target(f) << " (";
      if (v.max_step >= 0) os << "the last step it issued a collective from was " << v.max_step << "; ";
      os << "it last completed " << v.last_completed() << ")";
    } else if (inj.kind == "slowdown") {
      os << "no iteration (a step >= 0) of " << perf::parse_slowdown(inj, s.world_size).describe() << " ran";
    } else {
      os << "the workload never reached the point it changes (check its step, rank or the data it needs)";
    }
    if (d) os << "; the run ended with " << to_string(d->kind) << " before it could: " << d->message;
    return os.str();
  }
  return "";
}

// The ranks' costs per phase, and the per-iteration samples the baseline rule judges.
void collect_perf(const scenario::Scenario& s, const std::string& dir, report::ScenarioResult& res) {
  for (int r = 0; r < s.world_size; ++r) {
    res.perf.emplace_back();
    auto st = read_status(dir, r);
    if (!st || st->value("outcome", "") != "ok" || !st->contains("perf")) continue;
    const auto& p = (*st)["perf"];
    res.counters = p.value("availability", "");
    const auto names = p.value("counters", std::vector<std::string>{});
    for (const auto& [phase, x] : p.at("phases").items()) {
      report::PhaseCost c;
      c.iterations = x.value("iterations", std::int64_t{0});
      c.wall_s = x.value("wall_s", 0.0);
      c.cpu_s = x.value("cpu_s", 0.0);
      c.user_s = x.value("user_s", 0.0);
      c.sys_s = x.value("sys_s", 0.0);
      const std::string prefix = phase + "/rank" + std::to_string(r) + "/";
      c.main_cpu_s = x.value("main_cpu_s", 0.0);
      if (auto v = x.value("main_cpu_samples", std::vector<double>{}); !v.empty())
        res.samples[prefix + "main_cpu_s"] = std::move(v);
      for (const auto& n : names) {
        c.counters[n] = x.value(n, 0.0);
        if (auto v = x.value(n + "_samples", std::vector<double>{}); !v.empty()) res.samples[prefix + n] = std::move(v);
      }
      res.perf.back()[phase] = c;
    }
  }
  // Programs and systems under test report no cost of their own.
  if (std::all_of(res.perf.begin(), res.perf.end(), [](const auto& phases) { return phases.empty(); })) res.perf.clear();
}

bool slowdown_fired(const scenario::Scenario& s, const std::string& dir) {
  for (int r = 0; r < s.world_size; ++r) {
    auto st = read_status(dir, r);
    if (st && st->contains("perf") && (*st)["perf"].value("slowdown_fired", false)) return true;
  }
  return false;
}

std::string phases_run(const report::ScenarioResult& res) {
  std::set<std::string> names;
  for (const auto& phases : res.perf)
    for (const auto& [name, c] : phases)
      if (c.iterations > 0) names.insert(name);
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "(none with steps)" : out;
}

bool meets(const scenario::Expectation& e, const std::optional<Diagnosis>& d, std::string& why) {
  if (!e.kind) {
    if (d) why = "expected pass, got " + std::string(to_string(d->kind)) + ": " + d->message;
    return !d;
  }
  if (!d) {
    why = "expected " + std::string(to_string(*e.kind)) + ", but the run passed";
    return false;
  }
  if (d->kind != *e.kind) {
    why = "expected " + std::string(to_string(*e.kind)) + ", got " + std::string(to_string(d->kind)) + ": " + d->message;
    return false;
  }
  if (e.rank && d->rank != *e.rank) {
    why = "expected the diagnosis to name rank " + std::to_string(*e.rank) + ", it names rank " + std::to_string(d->rank);
    return false;
  }
  if (e.seq && d->seq != *e.seq) {
    why = "expected the diagnosis at collective #" + std::to_string(*e.seq) + ", got #" + std::to_string(d->seq);
    return false;
  }
  for (const auto& part : e.message_contains) {
    if (d->message.find(part) == std::string::npos) {
      why = "the diagnosis message lacks '" + part + "': " + d->message;
      return false;
    }
  }
  return true;
}

}  // namespace

std::string self_executable() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("lockstep") : p.string();
}


namespace detail {

bool meets_expectation(const scenario::Expectation& e, const std::optional<Diagnosis>& d, std::string& why) {
  return meets(e, d, why);
}

report::ScenarioResult run_once(const scenario::Scenario& s, const LaunchOptions& options) {
  report::ScenarioResult res;
  res.name = s.name;
  res.id = s.id();
  res.file = s.file;
  res.variant = s.variant;
  res.tags = s.tags;
  res.expected = s.expect.expected_label();
  res.world_size = s.world_size;
  res.artifacts = s.slug();
  const auto t0 = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };

  if (s.requires_cuda) {
    const int found = ref::cuda_device_count();
    if (found == 0) {
      res.status = report::Status::kSkip;
      res.reason = "requires cuda: no CUDA device is visible";
      return res;
    }
    if (found < s.requires_cuda_devices) {
      res.status = report::Status::kSkip;
      res.reason = "needs " + std::to_string(s.requires_cuda_devices) + " CUDA devices, found " +
                   std::to_string(found) + " (backend nccl puts each rank on its own GPU)";
      return res;
    }
  }
  if (s.requires_ranks > options.max_ranks) {
    res.status = report::Status::kSkip;
    res.reason = "requires " + std::to_string(s.requires_ranks) + " ranks, --max-ranks is " + std::to_string(options.max_ranks);
    return res;
  }

  if (s.system || s.program) {
    if (std::string why = s.system ? system_skip_reason(s) : program_skip_reason(s); !why.empty()) {
      res.status = report::Status::kSkip;
      res.reason = why;
      return res;
    }
  }

  const std::string dir = rank::artifacts_dir(options.report_dir, s.slug());
  try {
    fs::remove_all(dir);
    fs::create_directories(dir);
    if (s.system) {
      SystemOutcome sys = run_system(s, options, dir);
      res.duration_s = elapsed();
      res.digest = sys.digest;
      res.metrics = sys.metrics;
      res.notes = sys.notes;
      res.system = s.system->name + (sys.system.empty() ? "" : " (" + sys.system + ")");
      res.diagnosis = sys.diagnosis;
      if (!sys.error.empty()) {
        res.status = report::Status::kError;
        res.reason = sys.error;
        return res;
      }
      std::string why;
      res.status = meets(s.expect, sys.diagnosis, why) ? report::Status::kPass : report::Status::kFail;
      res.reason = why;
      return res;
    }
    const std::string board_path = dir + "/board.bin";
    comm::Board board = comm::Board::create(board_path, s.world_size, comm::fingerprint_words(s.world_size));
    // A program (kind = "program") runs as the ranks itself: its rank 0 hosts its own store, as
    // under torchrun --standalone, and lockstep's c10d backend in it publishes on the board.
    const bool program = s.program.has_value();
    const bool unobserved = program && s.program->wrap == "none";
    std::vector<std::string> program_argv;
    if (program) {
      try {
        program_argv = command_argv(s, s.program->command);
      } catch (const InputError& e) {
        fs::remove(board_path);
        res.duration_s = elapsed();
        res.status = report::Status::kError;
        res.reason = s.program->where + ": workload.command: " + e.what();
        return res;
      }
    }
    std::unique_ptr<comm::StoreServer> store;
    if (!program) store = std::make_unique<comm::StoreServer>(s.world_size, engine_timeout_s(s), dir);
    const int program_port = program ? loopback_port() : 0;

    // Every key of this run's rendezvous goes under a secret prefix (comm/engines.h), so another
    // local process that reaches the store cannot join or read it.
    const std::string token = random_token();
    RankProcesses procs;
    for (int r = 0; r < s.world_size; ++r) {
      if (program) {
        procs.spawn(program_argv, program_env(s, r, program_port, dir, board_path), rank::log_path(dir, r));
        continue;
      }
      std::vector<std::string> argv = {options.binary, "rank", s.file, "--variant", std::to_string(s.variant_index),
                                       "--report-dir", options.report_dir};
      if (options.dump) argv.push_back("--dump");
      std::vector<std::string> env = inherited_env();
      for (auto& kv : torchrun_env(r, s.world_size, s.ranks_per_node, store->port())) env.push_back(std::move(kv));
      env.push_back("LOCKSTEP_STORE_HOSTED=1");
      std::erase_if(env, [](const std::string& e) { return e.rfind("LOCKSTEP_STORE_TOKEN=", 0) == 0; });
      env.push_back("LOCKSTEP_STORE_TOKEN=" + token);
      if (!store->file().empty()) env.push_back("LOCKSTEP_STORE_FILE=" + fs::absolute(store->file()).string());
      env.push_back("LOCKSTEP_BOARD=" + board_path);
      if (!options.slowdown.empty()) env.push_back("LOCKSTEP_SLOWDOWN=" + options.slowdown);
      if (options.slowdown_off) env.push_back("LOCKSTEP_SLOWDOWN_OFF=1");
      procs.spawn(argv, env, rank::log_path(dir, r));
    }

    // Watch (watchdog.h): start-up, then no progress for timeout_s, and the deadline.
    Watchdog dog(s.world_size, watchdog_limits(s), Clock::now());
    Watchdog::Verdict verdict = Watchdog::Verdict::kWatch;
    std::vector<Watchdog::Rank> seen(static_cast<std::size_t>(s.world_size));
    while (verdict == Watchdog::Verdict::kWatch && !cancelled()) {
      procs.reap();
      for (int r = 0; r < s.world_size; ++r) {
        const auto& c = procs.children()[static_cast<std::size_t>(r)];
        const auto v = board.view(r);
        auto& k = seen[static_cast<std::size_t>(r)];
        k.exited = c.exited;
        // A rank that exited cleanly without finishing leaves the others waiting.
        k.bad_exit = c.exited && !(WIFEXITED(c.status) && WEXITSTATUS(c.status) == rank::kExitClean &&
                                   (unobserved || v.state == comm::RankState::kFinished));
        k.started = unobserved || v.started();
        k.progress = v.issued + v.completed + v.p2p + static_cast<std::int64_t>(v.state);
      }
      verdict = dog.observe(seen, Clock::now());
      if (verdict == Watchdog::Verdict::kWatch) std::this_thread::sleep_for(kPoll);
    }
    if (verdict == Watchdog::Verdict::kWatch) {  // the loop stopped because the run was cancelled
      procs.kill_all();
      fs::remove(board_path);
      res.duration_s = elapsed();
      res.status = report::Status::kCancelled;
      res.reason = "cancelled by " + cancel_signal_name() + " while running; its ranks were stopped";
      return res;
    }
    procs.reap();
    for (int r = 0; r < s.world_size; ++r) {
      if (auto t = dog.startup_seconds(r)) res.startup_s = std::max(res.startup_s, *t);
    }
    Outcome outcome = judge_exits(procs.children(), board, dir, unobserved);
    if (!outcome.diagnosis && outcome.error.empty()) {
      if (verdict == Watchdog::Verdict::kStartupTimeout) outcome.diagnosis = judge_startup(board, dog);
      else if (verdict == Watchdog::Verdict::kTimeout) outcome.diagnosis = judge_timeout(board, procs.children(), s.timeout_s);
      else if (verdict == Watchdog::Verdict::kDeadline) outcome.diagnosis = judge_deadline(board, dog);
    }
    if (outcome.error.empty()) outcome.error = unfired_injections(s, board, outcome.diagnosis, options.slowdown_off);
    procs.kill_all();
    // A hang or a failed rank: where every rank was, from the flight recorders.
    if (outcome.diagnosis && (outcome.diagnosis->kind == DiagnosisKind::kTimeout || outcome.diagnosis->kind == DiagnosisKind::kRankFailure)) {
      outcome.diagnosis->message += flight_summary(board, 2);
    }

    // Collect what the ranks left.
    // A rank that ended cleanly flushed its whole trace: only the others can lack records.
    const bool all_clean = !outcome.diagnosis && outcome.error.empty();
    if (s.verify != scenario::VerifyMode::kOff && !all_clean) add_flight_records(board, dir, outcome.diagnosis);
    std::vector<std::string> traces;
    for (int r = 0; r < s.world_size; ++r) traces.push_back(rank::trace_path(dir, r));
    report::write_chrome_trace(traces, dir + "/trace.json");
    if (options.dump) report::merge_manifests((fs::path(options.report_dir) / "dump" / s.slug()).string(), s.id());
    collect_perf(s, dir, res);
    if (outcome.error.empty() && all_clean && !options.slowdown.empty() && !slowdown_fired(s, dir)) {
      outcome.error = "--slowdown " + options.slowdown + " never fired: no rank ran an iteration (a step >= 0) of " +
                      perf::parse_slowdown_flag(options.slowdown, "--slowdown").describe() + "; phases run: " +
                      phases_run(res);
    }
    if (auto st = read_status(dir, 0); st && st->value("outcome", "") == "ok") {
      for (auto& [k, v] : (*st)["metrics"].items()) res.metrics[k] = v.get<double>();
      res.digest = st->value("digest", "");
      if (st->contains("series")) {
        for (auto& [k, v] : (*st)["series"].items()) {
          res.series[k] = report::Series{v.at("values").get<std::vector<double>>(), v.value("rtol", 0.0)};
        }
      }
    }
    fs::remove(board_path);

    res.duration_s = elapsed();
    res.diagnosis = outcome.diagnosis;
    if (!outcome.error.empty()) {
      res.status = report::Status::kError;
      res.reason = outcome.error;
      return res;
    }
    std::string why;
    res.status = meets(s.expect, outcome.diagnosis, why) ? report::Status::kPass : report::Status::kFail;
    res.reason = why;
  } catch (const std::exception& e) {
    res.duration_s = elapsed();
    res.status = cancelled() ? report::Status::kCancelled : report::Status::kError;
    res.reason = cancelled() ? "cancelled by " + cancel_signal_name() + " while running; its ranks were stopped" : e.what();
  }
  return res;
}

}  // namespace

}  // namespace lockstep::launch
