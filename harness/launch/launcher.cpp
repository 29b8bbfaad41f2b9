#include "harness/launch/launcher.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
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
#include "harness/launch/run_once.h"
#include "harness/launch/python.h"
#include "harness/launch/system_run.h"
#include "harness/launch/verdict.h"
#include "harness/launch/watch.h"
#include "harness/launch/watchdog.h"
#include "harness/perf/cost.h"
#include "harness/rank/runtime.h"
#include "harness/rank/status.h"
#include "harness/report/chrome_trace.h"
#include "harness/report/dump.h"
#include "reference/common/device.h"

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
    if (!st || st->outcome != rank::Outcome::kOk || !st->perf.is_object()) continue;
    const auto& p = st->perf;
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
    auto st = rank::read_status(rank::status_path(dir, r));
    if (st && st->perf.is_object() && st->perf.value("slowdown_fired", false)) return true;
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

}  // namespace

std::string self_executable() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("lockstep") : p.string();
}


namespace {

// How long a node of a multi-node run that timed out keeps its ranks before ending them.
constexpr auto kNodeGrace = std::chrono::seconds(2);

// Runs `s` once and leaves the evidence in `res` (verdict.h): a skip, a cancel, a diagnosis or
// an error.
void gather(const scenario::Scenario& s, const LaunchOptions& options, report::ScenarioResult& res) {
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
      return;
    }
    if (found < s.requires_cuda_devices) {
      res.status = report::Status::kSkip;
      res.reason = "needs " + std::to_string(s.requires_cuda_devices) + " CUDA devices, found " +
                   std::to_string(found) + " (backend nccl puts each rank on its own GPU)";
      return;
    }
  }
  if (s.requires_ranks > options.max_ranks) {
    res.status = report::Status::kSkip;
    res.reason = "requires " + std::to_string(s.requires_ranks) + " ranks, --max-ranks is " + std::to_string(options.max_ranks);
    return;
  }

  if (s.system || s.program) {
    if (std::string why = s.system ? system_skip_reason(s) : program_skip_reason(s); !why.empty()) {
      res.status = report::Status::kSkip;
      res.reason = why;
      return;
    }
  }

  const std::string dir = rank::artifacts_dir(options.report_dir, s.slug());
  try {
    fs::remove_all(dir);
    fs::create_directories(dir);
    if (s.system) {
      SystemOutcome sys = run_system(s, options, dir);
      res.duration_s = elapsed();
      if (sys.cancelled) {
        res.status = report::Status::kCancelled;
        res.reason = cancelled_reason();
        return;
      }
      res.digest = sys.digest;
      res.metrics = sys.metrics;
      res.notes = sys.notes;
      res.system = s.system->name + (sys.system.empty() ? "" : " (" + sys.system + ")");
      res.diagnosis = sys.diagnosis;
      res.error = sys.error;
      return;
    }
    const std::string board_path = dir + "/board.bin";
    comm::Board board = comm::Board::create(board_path, s.world_size, comm::fingerprint_words(s.world_size));
    // A program (kind = "program") runs as the ranks itself: its rank 0 hosts its own store, as
    // under torchrun --standalone, and lockstep's program runtime in it publishes on the board.
    const bool program = s.program.has_value();
    const bool unobserved = program && s.program->wrap == "none";
    std::vector<std::string> program_argv;
    if (program) {
      try {
        program_argv = command_argv(s, s.program->command);
      } catch (const InputError& e) {
        fs::remove(board_path);
        res.duration_s = elapsed();
        res.error = s.program->where + ": workload.command: " + e.what();
        return;
      }
    }
    std::unique_ptr<comm::StoreServer> store;
    if (!program) store = std::make_unique<comm::StoreServer>(s.world_size, rank::engine_timeout_s(s.startup_timeout_s, s.timeout_s), dir);
    // This launcher's ranks: all of them, or one node's of a multi-node program (options.nodes).
    const auto& nodes = options.nodes;
    const bool multi_node = program && nodes.nnodes > 1;
    const int local = program ? s.world_size / nodes.nnodes : s.world_size;
    const int first = program ? nodes.node_rank * local : 0;
    const int last = first + local;  // this launcher's ranks: [first, last)
    LOCKSTEP_CHECK(!program || (nodes.nnodes >= 1 && s.world_size % nodes.nnodes == 0 && nodes.node_rank >= 0 &&
                                nodes.node_rank < nodes.nnodes && (nodes.nnodes == 1 || nodes.master_port > 0)),
                   "a program over ", nodes.nnodes, " nodes needs world_size (", s.world_size,
                   ") a multiple of them, node_rank in [0, nnodes) (got ", nodes.node_rank, ") and a master port");
    const int program_port = !program ? 0 : nodes.master_port > 0 ? nodes.master_port : loopback_port();

    // Every key of this run's rendezvous goes under a secret prefix (comm/engines.h), so another
    // local process that reaches the store cannot join or read it.
    const std::string token = random_token();
    RankProcesses procs;
    for (int r = first; r < last; ++r) {
      if (program) {
        std::vector<std::string> env = program_env(s, r, program_port, dir, board_path, nodes.master_addr);
        // The other nodes' ranks publish on their own boards: compare over the control group.
        if (multi_node) set_env(env, env::assign(env::kVerifyChannel, "control"));
        const bool echoed = options.echo && (options.echo_ranks.empty() ||
                                             std::find(options.echo_ranks.begin(), options.echo_ranks.end(), r) != options.echo_ranks.end());
        procs.spawn(program_argv, env, rank::log_path(dir, r), echoed ? "[rank" + std::to_string(r) + "]:" : "");
        continue;
      }
      std::vector<std::string> argv = {options.binary, "rank", s.file, "--variant", std::to_string(s.variant_index),
                                       "--report-dir", options.report_dir};
      if (options.dump) argv.push_back("--dump");
      std::vector<std::string> env = inherited_env();
      for (auto& kv : torchrun_env(r, s.world_size, s.ranks_per_node, store->port())) env.push_back(std::move(kv));
      env.push_back(env::assign(env::kStoreHosted, "1"));
      set_env(env, env::assign(env::kStoreToken, token));
      if (!store->file().empty()) env.push_back(env::assign(env::kStoreFile, fs::absolute(store->file()).string()));
      env.push_back(env::assign(env::kBoard, board_path));
      if (!options.slowdown.empty()) env.push_back(env::assign(env::kSlowdown, options.slowdown));
      if (options.slowdown_off) env.push_back(env::assign(env::kSlowdownOff, "1"));
      procs.spawn(argv, env, rank::log_path(dir, r));
    }

    // Watch (watch.h): start-up, then no progress for timeout_s, and the deadline.
    Watchdog dog(local, watchdog_limits(s), Clock::now());
    const auto source = board_source(board, dir, unobserved, first, local);
    const WatchEnd end = watch(procs, *source, dog);
    if (end.cancelled()) {
      fs::remove(board_path);
      res.duration_s = elapsed();
      res.status = report::Status::kCancelled;
      res.reason = cancelled_reason();
      return;
    }
    for (int i = 0; i < local; ++i) {
      if (auto t = dog.startup_seconds(i)) res.startup_s = std::max(res.startup_s, *t);
    }
    Judgement outcome = judge(procs.children(), *source, dog, end, s.timeout_s, dir);
    if (outcome.error.empty()) outcome.error = unfired_injections(s, board, outcome.diagnosis, options.slowdown_off);
    // A node that timed out keeps its ranks a moment before ending them: the other nodes, which
    // watch with the same timeout_s, then judge the hang from their own ranks' state rather than
    // from the lost connections that ending these ranks would cause there.
    if (multi_node && end.verdict == Watchdog::Verdict::kTimeout) {
      for (auto until = Clock::now() + kNodeGrace; Clock::now() < until && !cancelled();) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    procs.kill_all();
    // A hang or a failed rank: where every rank was, from the flight recorders.
    if (outcome.diagnosis && (outcome.diagnosis->kind == DiagnosisKind::kTimeout || outcome.diagnosis->kind == DiagnosisKind::kRankFailure)) {
      outcome.diagnosis->message += flight_summary(board, 2, first, last);
    }

    // Collect what the ranks left.
    // A rank that ended cleanly flushed its whole trace: only the others can lack records.
    const bool all_clean = !outcome.diagnosis && outcome.error.empty();
    if (s.verify != scenario::VerifyMode::kOff && !all_clean) add_flight_records(board, dir, outcome.diagnosis, first, last);
    std::vector<std::string> traces;
    for (int r = first; r < last; ++r) traces.push_back(rank::trace_path(dir, r));
    report::write_chrome_trace(traces, dir + "/trace.json");
    if (options.dump) report::merge_manifests((fs::path(options.report_dir) / "dump" / s.slug()).string(), s.id());
    collect_perf(s, dir, res);
    if (outcome.error.empty() && all_clean && !options.slowdown.empty() && !slowdown_fired(s, dir)) {
      outcome.error = "--slowdown " + options.slowdown + " never fired: no rank ran an iteration (a step >= 0) of " +
                      perf::parse_slowdown_flag(options.slowdown, "--slowdown").describe() + "; phases run: " +
                      phases_run(res);
    }
    if (program) {
      // What the program ran on ("torch 2.15.0"): the report's system, and which [expect.torch] applies.
      for (int r = first; r < first + local && res.system.empty(); ++r) {
        if (auto st = rank::read_status(rank::status_path(dir, r))) res.system = st->system;
      }
      note_unverified(dir, first, first + local, res);
    }
    if (auto st = rank::read_status(rank::status_path(dir, first)); st && st->outcome == rank::Outcome::kOk) {
      for (const auto& [k, v] : st->metrics) res.metrics[k] = v;
      res.digest = st->digest;
      res.series = st->series;
    }
    fs::remove(board_path);

    res.duration_s = elapsed();
    res.diagnosis = outcome.diagnosis;
    res.error = outcome.error;
  } catch (const std::exception& e) {
    res.duration_s = elapsed();
    if (cancelled()) {
      res.status = report::Status::kCancelled;
      res.reason = cancelled_reason();
    } else {
      res.error = e.what();
    }
  }
}

}  // namespace

namespace detail {

report::ScenarioResult run_once(const scenario::Scenario& s, const LaunchOptions& options) {
  report::ScenarioResult res;
  res.status = report::Status::kPass;  // not skip or cancelled until gather() says so
  gather(s, options, res);
  decide(expectation_for(s, res), res);
  return res;
}

}  // namespace detail

report::ScenarioResult run_scenario(const scenario::Scenario& s, const LaunchOptions& options) {
  const bool own_ranks = !s.requires_cuda && s.requires_ranks <= options.max_ranks && !s.system && !s.program;
  if (own_ranks && !options.reference_binary.empty()) return detail::run_against_reference(s, options, options.ab_runs);
  if (own_ranks && detail::self_baselined(s)) return detail::run_against_reference(s, options, detail::kSelfBaselineRuns);
  return detail::run_once(s, options);
}

}  // namespace lockstep::launch
