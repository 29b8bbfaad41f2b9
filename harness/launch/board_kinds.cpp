// The kinds of rank that publish on the run's board (rank_kind.h): lockstep's own ranks and a
// program's. Their plans, board and store are prepared here, and what they leave (statuses,
// traces, flight records, costs) becomes the result's evidence.

#include <algorithm>
#include <chrono>
#include <thread>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "harness/comm/board.h"
#include "harness/comm/engines.h"
#include "harness/comm/faults.h"
#include "harness/comm/monitor.h"
#include "harness/comm/verifier.h"
#include "harness/core/env.h"
#include "harness/core/error.h"
#include "harness/launch/cancel.h"
#include "harness/launch/processes.h"
#include "harness/launch/rank_kind.h"
#include "harness/launch/waits_check.h"
#include "harness/launch/python.h"
#include "harness/launch/watch.h"
#include "harness/launch/watchdog.h"
#include "harness/perf/cost.h"
#include "harness/rank/plan.h"
#include "harness/rank/runtime.h"
#include "harness/rank/status.h"
#include "harness/report/chrome_trace.h"
#include "harness/report/dump.h"

namespace lockstep::launch {
namespace {

namespace fs = std::filesystem;

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

// A program's calls lockstep did not verify (each rank's status, unverified_calls): one note naming
// them and the ranks that made them, and the metric unverified_calls (the most any rank made), so
// that a pass never hides a call that was not checked.
void note_unverified(const std::string& dir, int first, int end, report::ScenarioResult& res) {
  std::map<std::string, std::pair<std::int64_t, std::vector<int>>> calls;
  std::int64_t most = 0;
  for (int r = first; r < end; ++r) {
    const auto st = rank::read_status(rank::status_path(dir, r));
    if (!st) continue;
    std::int64_t n = 0;
    for (const auto& [name, count] : st->unverified) {
      auto& c = calls[name];
      c.first = std::max(c.first, count);
      c.second.push_back(r);
      n += count;
    }
    most = std::max(most, n);
  }
  res.metrics["unverified_calls"] = static_cast<double>(most);
  if (calls.empty()) return;
  std::ostringstream os;
  os << "not verified by lockstep (ran unchanged on the program's group): ";
  bool first_call = true;
  for (const auto& [name, c] : calls) {
    os << (first_call ? "" : ", ") << name << " x" << c.first << " (" << rank_list(c.second) << ")";
    first_call = false;
  }
  res.notes.push_back(os.str());
}

// The curve a program logs ([compare] curve): every line of `log` that the regex finds, its groups
// (step, value) or (value; the k-th match is step k). A value that is not a number ends nothing:
// the line is skipped, as is a line longer than kMaxCurveLine (std::regex matches recursively: a
// long line could exhaust the stack). At most kMaxCurvePoints points.
constexpr std::size_t kMaxCurvePoints = 1000000, kMaxCurveLine = 4096;
report::Series curve_from_log(const std::string& log, const std::string& pattern, double rtol) {
  report::Series out;
  out.rtol = rtol;
  const std::regex re(pattern, std::regex::ECMAScript);
  const bool with_step = re.mark_count() == 2;
  std::ifstream in(log);
  std::string line;
  std::smatch m;
  while (std::getline(in, line) && out.values.size() < kMaxCurvePoints) {
    if (line.size() > kMaxCurveLine || !std::regex_search(line, m, re)) continue;
    const std::string v = m[with_step ? 2 : 1].str();
    char* end = nullptr;
    const double value = std::strtod(v.c_str(), &end);
    if (v.empty() || end != v.c_str() + v.size()) continue;
    if (with_step) {
      const std::string st = m[1].str();
      char* e2 = nullptr;
      const long long step = std::strtoll(st.c_str(), &e2, 10);
      if (st.empty() || e2 != st.c_str() + st.size()) continue;
      out.steps.push_back(step);
    }
    out.values.push_back(value);
  }
  return out;
}

// "; last collectives: rank 0: #6 all_reduce f32[1316] sum (train.py:88 step 26) completed,
// #7 ... in flight; rank 1: ..." from the flight recorders of ranks [first, end) (the last
// `per_rank` each).
std::string flight_summary(const comm::Board& board, std::size_t per_rank, int first, int end) {
  std::ostringstream os;
  os << "; last collectives:";
  for (int r = first; r < end; ++r) {
    const auto records = comm::read_flight(board.slot(r));
    os << (r > first ? "; " : " ") << "rank " << r << ": ";
    if (records.empty()) os << "none";
    const std::size_t from = records.size() > per_rank ? records.size() - per_rank : 0;
    for (std::size_t i = from; i < records.size(); ++i) os << (i > from ? ", " : "") << records[i].describe();
  }
  return os.str();
}

// Adds to the trace of each rank in [first, end) the flight-recorder records it lacks: the calls
// of a rank killed before it flushed its trace, and the call each rank was in when the run ended
// (with the diagnosis, when the diagnosis names that collective).
void add_flight_records(const comm::Board& board, const std::string& dir, const std::optional<Diagnosis>& d, int first, int end) {
  for (int r = first; r < end; ++r) {
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

// "" when every [[inject]] fired and changed what some rank does; else an error naming the first
// that did not. An injection that never fired, or fired but changed nothing (the workload took
// the bug's path, but this run's data made no difference: no duplicate ids, no peer's rows),
// tested nothing, whatever the outcome.
std::string unfired_injections(const scenario::Scenario& s, const comm::Board& board, const std::optional<Diagnosis>& d,
                               bool slowdown_off) {
  std::uint64_t fired = 0, changed = 0;
  for (int r = 0; r < board.world_size(); ++r) {
    const auto v = board.view(r);
    fired |= v.fired;
    changed |= v.changed;
  }
  for (const auto& inj : s.injections) {
    const std::uint64_t bit = std::uint64_t{1} << inj.index;
    if (changed & bit) continue;
    if (slowdown_off && inj.kind == "slowdown") continue;
    std::ostringstream os;
    if (fired & bit) {
      std::string ranks;
      for (int r = 0; r < board.world_size(); ++r) {
        if (board.view(r).fired & bit) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
      }
      os << "injection " << inj.label() << " fired on rank" << (ranks.find(',') == std::string::npos ? " " : "s ") << ranks
         << " but changed nothing: none of this run's data was data it changes (see what " << inj.kind
         << " needs in scenarios/README.md); an injection that changes nothing tests nothing";
      if (d) os << "; the run ended with " << to_string(d->kind) << ": " << d->message;
      return os.str();
    }
    os << "injection " << inj.label() << " never fired: ";
    if (inj.fault) {
      const comm::Fault& f = *inj.fault;
      const auto v = board.view(f.rank);
      os << "rank " << f.rank << " issued no call matching " << comm::describe_target(f) << " (";
      if (v.max_step >= 0) os << "the last step it issued a collective from was " << v.max_step << "; ";
      os << "it last completed " << v.last_completed() << ")";
    } else if (inj.slowdown) {
      os << "no iteration (a step >= 0) of " << inj.slowdown->describe() << " ran";
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
    auto st = rank::read_status(rank::status_path(dir, r));
    if (!st || st->outcome != rank::Outcome::kOk || !st->perf) continue;
    const perf::RankCost& p = *st->perf;
    res.counters = p.availability;
    for (const auto& [phase, x] : p.phases) {
      report::PhaseCost c;
      c.iterations = x.iterations;
      c.wall_s = x.wall_s;
      c.cpu_s = x.cpu_s;
      c.user_s = x.user_s;
      c.sys_s = x.sys_s;
      c.main_cpu_s = x.main_cpu_s;
      c.counters = x.counters;
      const std::string prefix = phase + "/rank" + std::to_string(r) + "/";
      if (!x.main_cpu_samples.empty()) res.samples[prefix + "main_cpu_s"] = x.main_cpu_samples;
      for (const auto& [n, v] : x.counter_samples)
        if (!v.empty()) res.samples[prefix + n] = v;
      res.perf.back()[phase] = c;
    }
  }
  // Programs and systems under test report no cost of their own.
  if (std::all_of(res.perf.begin(), res.perf.end(), [](const auto& phases) { return phases.empty(); })) res.perf.clear();
}

bool slowdown_fired(const scenario::Scenario& s, const std::string& dir) {
  for (int r = 0; r < s.world_size; ++r) {
    auto st = rank::read_status(rank::status_path(dir, r));
    if (st && st->perf && st->perf->slowdown_fired) return true;
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


// How long a node of a multi-node run that timed out keeps its ranks before ending them.
constexpr auto kNodeGrace = std::chrono::seconds(2);

// lockstep's own ranks and a program's: both publish on the run's board and follow the rank
// contract (plan in, status out).
class BoardRanks : public RankKind {
 public:
  BoardRanks(const scenario::Scenario& s, const LaunchOptions& options, bool program)
      : s_(s), options_(options), program_(program) {
    const auto& nodes = options.nodes;
    local_ = program ? s.world_size / std::max(nodes.nnodes, 1) : s.world_size;
    first_ = program ? nodes.node_rank * local_ : 0;
  }
  ~BoardRanks() override {
    std::error_code ec;
    if (!board_path_.empty()) fs::remove(board_path_, ec);
  }
  int first_rank() const override { return first_; }
  int rank_count() const override { return local_; }

  void prepare(const std::string& dir) override {
    dir_ = dir;
    board_path_ = dir + "/board.bin";
    board_ = comm::Board::create(board_path_, s_.world_size, comm::fingerprint_words(s_.world_size));
    // Each rank's plan (rank/plan.h), written once, read once by the rank.
    for (int r = first_; r < first_ + local_; ++r) {
      rank::RankPlan plan = rank::plan_for(s_, r, dir);
      plan.board_path = fs::absolute(board_path_).string();
      if (!program_) {
        plan.slowdown = options_.slowdown;
        plan.slowdown_off = options_.slowdown_off;
      }
      rank::write_plan(rank::plan_path(dir, r), plan);
    }
  }

  std::unique_ptr<ProgressSource> progress() override {
    const bool unobserved = program_ && s_.program->wrap == "none";
    return board_source(board_, dir_, unobserved, first_, local_);
  }

  void collect(RanksEnd end, report::ScenarioResult& res) override {
    Judgement& outcome = end.judgement;
    const int last = first_ + local_;
    if (outcome.error.empty()) outcome.error = unfired_injections(s_, board_, outcome.diagnosis, options_.slowdown_off);
    // A hang or a failed rank: where every rank was, from the flight recorders.
    if (outcome.diagnosis && (outcome.diagnosis->kind == DiagnosisKind::kTimeout || outcome.diagnosis->kind == DiagnosisKind::kRankFailure)) {
      outcome.diagnosis->message += flight_summary(board_, 2, first_, last);
    }
    // A rank that ended cleanly flushed its whole trace: only the others can lack records.
    const bool all_clean = !outcome.diagnosis && outcome.error.empty();
    if (s_.verify != VerifyMode::kOff && !all_clean) add_flight_records(board_, dir_, outcome.diagnosis, first_, last);
    std::vector<std::string> traces;
    for (int r = first_; r < last; ++r) traces.push_back(rank::trace_path(dir_, r));
    report::write_chrome_trace(traces, dir_ + "/trace.json");
    if (options_.dump) report::merge_manifests((fs::path(options_.report_dir) / "dump" / s_.slug()).string(), s_.id());
    collect_perf(s_, dir_, res);
    if (outcome.error.empty() && all_clean && !options_.slowdown.empty() && !slowdown_fired(s_, dir_)) {
      outcome.error = "--slowdown " + options_.slowdown + " never fired: no rank ran an iteration (a step >= 0) of " +
                      perf::parse_slowdown_flag(options_.slowdown, "--slowdown").describe() + "; phases run: " +
                      phases_run(res);
    }
    if (program_) {
      // What the program ran on ("torch 2.15.0"): the report's system, and which [expect.torch] applies.
      for (int r = first_; r < last && res.system.empty(); ++r) {
        if (auto st = rank::read_status(rank::status_path(dir_, r))) res.system = st->system;
      }
      note_unverified(dir_, first_, last, res);
    }
    if (auto st = rank::read_status(rank::status_path(dir_, first_)); st && st->outcome == rank::Outcome::kOk) {
      for (const auto& [k, v] : st->metrics) res.metrics[k] = v;
      res.digest = st->digest;
      res.series = st->series;
      if (program_ && !s_.curve.empty() && first_ == 0)
        res.series[s_.curve_name] = curve_from_log(rank::log_path(dir_, 0), s_.curve, s_.tolerances.curve_rtol);
    }
    res.tolerances = s_.tolerances;
    // Where the time went between ranks, after a run that ended cleanly; only the launcher that
    // has every rank's trace (one node) can line them up.
    if (outcome.error.empty() && all_clean && s_.verify != VerifyMode::kOff && first_ == 0 && local_ == s_.world_size) {
      try {
        check_waits(s_, dir_, res, outcome.diagnosis);
      } catch (const InputError& e) {
        // Traces that do not line up: an error where the scenario gates on the check, else a remark.
        if (s_.straggler_share) outcome.error = e.what();
        else res.notes.push_back(std::string("waits not analysed: ") + e.what());
      }
    }
    res.diagnosis = outcome.diagnosis;
    res.error = outcome.error;
  }

 protected:
  const scenario::Scenario& s_;
  const LaunchOptions& options_;
  const bool program_;
  int first_ = 0, local_ = 0;
  std::string dir_, board_path_;
  comm::Board board_;
};

// lockstep's own ranks: `lockstep rank` processes around a store this launcher hosts.
class OwnRanks final : public BoardRanks {
 public:
  OwnRanks(const scenario::Scenario& s, const LaunchOptions& options) : BoardRanks(s, options, false) {}
  std::string skip_reason() const override { return ""; }
  void prepare(const std::string& dir) override {
    BoardRanks::prepare(dir);
    store_ = std::make_unique<comm::StoreServer>(s_.world_size, rank::engine_timeout_s(s_.startup_timeout_s, s_.timeout_s), dir);
    // Every key of this run's rendezvous goes under a secret prefix (comm/engines.h), so another
    // local process that reaches the store cannot join or read it.
    token_ = random_token();
  }
  RankStart start(int r) override {
    RankStart rs;
    rs.argv = {options_.binary, "rank", s_.file, "--variant", std::to_string(s_.variant_index), "--report-dir", options_.report_dir};
    if (options_.dump) rs.argv.push_back("--dump");
    rs.env = inherited_env();
    for (auto& kv : torchrun_env(r, s_.world_size, s_.ranks_per_node, store_->port())) rs.env.push_back(std::move(kv));
    rs.env.push_back(env::assign(env::kStoreHosted, "1"));
    set_env(rs.env, env::assign(env::kStoreToken, token_));
    if (!store_->file().empty()) rs.env.push_back(env::assign(env::kStoreFile, fs::absolute(store_->file()).string()));
    rs.env.push_back(env::assign(env::kPlan, fs::absolute(rank::plan_path(dir_, r)).string()));
    rs.log = rank::log_path(dir_, r);
    return rs;
  }

 private:
  std::unique_ptr<comm::StoreServer> store_;
  std::string token_;
};

// A program (kind = "program") runs as the ranks itself: its rank 0 hosts its own store, as
// under torchrun --standalone, and lockstep's program runtime in it publishes on the board. One
// launcher starts one node's ranks of a multi-node program (LaunchOptions::nodes).
class ProgramRanks final : public BoardRanks {
 public:
  ProgramRanks(const scenario::Scenario& s, const LaunchOptions& options) : BoardRanks(s, options, true) {}
  std::string skip_reason() const override { return program_skip_reason(s_); }
  void prepare(const std::string& dir) override {
    const auto& nodes = options_.nodes;
    LOCKSTEP_CHECK(nodes.nnodes >= 1 && s_.world_size % nodes.nnodes == 0 && nodes.node_rank >= 0 && nodes.node_rank < nodes.nnodes &&
                       (nodes.nnodes == 1 || nodes.master_port > 0),
                   "a program over ", nodes.nnodes, " nodes needs world_size (", s_.world_size,
                   ") a multiple of them, node_rank in [0, nnodes) (got ", nodes.node_rank, ") and a master port");
    try {
      argv_ = command_argv(s_, s_.program->command);
    } catch (const InputError& e) {
      throw InputError(s_.program->where + ": workload.command: " + e.what());
    }
    BoardRanks::prepare(dir);
    port_ = nodes.master_port > 0 ? nodes.master_port : loopback_port();
  }
  RankStart start(int r) override {
    RankStart rs;
    rs.argv = argv_;
    rs.env = program_env(s_, r, port_, dir_, fs::absolute(rank::plan_path(dir_, r)).string(), options_.nodes.master_addr);
    // The other nodes' ranks publish on their own boards: compare over the control group.
    if (options_.nodes.nnodes > 1) set_env(rs.env, env::assign(env::kVerifyChannel, "control"));
    rs.log = rank::log_path(dir_, r);
    const auto& echo = options_.echo_ranks;
    if (options_.echo && (echo.empty() || std::find(echo.begin(), echo.end(), r) != echo.end())) rs.echo = "[rank" + std::to_string(r) + "]:";
    return rs;
  }
  // A node that timed out keeps its ranks a moment before ending them: the other nodes, which
  // watch with the same timeout_s, then judge the hang from their own ranks' state rather than
  // from the lost connections that ending these ranks would cause there.
  void before_kill(const WatchEnd& end) override {
    if (options_.nodes.nnodes <= 1 || end.verdict != Watchdog::Verdict::kTimeout) return;
    for (auto until = Clock::now() + kNodeGrace; Clock::now() < until && !cancelled();) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

 private:
  std::vector<std::string> argv_;
  int port_ = 0;
};

}  // namespace

std::unique_ptr<RankKind> own_ranks(const scenario::Scenario& s, const LaunchOptions& options) {
  return std::make_unique<OwnRanks>(s, options);
}
std::unique_ptr<RankKind> program_ranks(const scenario::Scenario& s, const LaunchOptions& options) {
  return std::make_unique<ProgramRanks>(s, options);
}

}  // namespace lockstep::launch
