// liblockstep_program.so: lockstep's rank runtime for a PyTorch program that lockstep did not
// write, behind a C interface that needs no torch. The lockstep_torch package loads it with ctypes into the
// program's interpreter, whatever torch that interpreter imports (1.13 to 2.15), and wraps the
// program's process group in a torch.distributed.ProcessGroup subclass (c10d's PyProcessGroup
// trampoline, through which DDP's C++ reducer calls too). Each collective the wrapper sees is
// described here (program.h) and carried through the same chain as lockstep's own ranks
// (harness/rank/runtime.h): Monitor (board, trace) -> Verifier -> the engine. The engine is the
// program's own backend (Gloo, NCCL, ...), which the wrapper starts and waits itself (ls_begin,
// ls_end: the call returns to the program while it runs) or through two callbacks (ls_carry);
// nothing here fingerprints, compares or judges.
#include "harness/pytorch/program.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "harness/comm/board.h"
#include "harness/comm/types.h"
#include "harness/comm/verifier.h"
#include "harness/core/env.h"
#include "harness/core/error.h"
#include "harness/rank/plan.h"
#include "harness/rank/runtime.h"

namespace lockstep::pytorch {
namespace {

// The process's one rank runtime: the default group of init_process_group is its chain; the
// program's other groups are chains of their own (ls_open_group). Deliberately never destroyed (as
// in rank_main.cpp).
rank::Runtime* rt = nullptr;
ls_start_fn start_cb = nullptr;
ls_wait_fn wait_cb = nullptr;
std::mutex issue_mu;  // one collective at a time: the call site (phase, step, index) is shared
thread_local std::int64_t current_token = 0;
bool finished = false;
// The wrapper's own metrics (ls_metric), added to the rank's at ls_finish.
std::map<std::string, double> wrapper_metrics;
bool built = false;  // ls_open built rt's chain: lockstep may carry the program's calls
VerifyMode verify_mode = VerifyMode::kVerify;

// The program's other process groups (new_group), by id (1, 2, ...; 0 is the default group): the
// group's ranks and its chain (Runtime::add_group). Its engine is callback group 2 * id, its
// control group 2 * id + 1.
struct Group {
  std::vector<int> members;
  comm::Communicator* comm = nullptr;
};
std::vector<Group> groups(1);

// The program's calls begun (ls_begin, ls_p2p_begin) and not yet ended (ls_end, ls_p2p_end), by
// id: several at once, in the order each was issued (every group's chain numbers its calls as
// ls_begin issues them, under issue_mu). The wrapper starts and waits for the program's call
// itself; ls_end tells how it went (`failure`, "" when it completed).
struct Begun {
  std::unique_ptr<comm::Pending> pending;
  std::shared_ptr<std::string> failure;
  bool collective = true;  // a collective (ls_begin), else a point-to-point call (ls_p2p_begin)
};
std::mutex begun_mu;
std::condition_variable begun_cv;
std::map<std::int64_t, Begun> begun;
std::int64_t begun_next = 0;
int collectives_begun = 0;  // collectives in `begun`
// At most this many collectives in flight per rank: the board keeps each rank's fingerprint
// records of its last Board::kFingerprintRing collectives, which peers must still read.
constexpr int kMaxCollectivesInFlight = 16;
thread_local std::shared_ptr<std::string> current_external;

// Waits until every collective begun has ended (ls_end runs where the wrapper checks the call: on
// the thread that waits for it, or the engine's, when the program's call completes; the wrapper
// ends those it holds before it calls here): before a call lockstep carries to its end. issue_mu
// is held.
void drain() {
  std::unique_lock<std::mutex> lock(begun_mu);
  begun_cv.wait(lock, [] { return collectives_begun == 0; });
}
std::string last_error;

void copy_error(const std::string& what, char* err, int len) {
  if (!err || len <= 0) return;
  const std::size_t n = std::min(what.size(), static_cast<std::size_t>(len - 1));
  std::memcpy(err, what.data(), n);
  err[n] = '\0';
}

// `fields` holds the call's table rows for the ls_call returned, and must outlive it.
ls_call to_c(const comm::Call& c, std::array<std::int64_t, comm::kCallFieldCount>& fields) {
  ls_call out{};
  for (std::size_t i = 0; i < fields.size(); ++i) fields[i] = c.*comm::call_fields()[i].member;
  out.nfields = comm::kCallFieldCount;
  out.fields = fields.data();
  out.op = static_cast<std::int32_t>(c.op);
  out.dtype = static_cast<std::int32_t>(c.in.count || !c.out.count ? c.in.dtype : c.out.dtype);
  out.reduce = static_cast<std::int32_t>(c.reduce);
  out.in = c.in.data;
  out.in_count = c.in.count;
  out.out = c.out.data;
  out.out_count = c.out.count;
  out.nsplits = static_cast<std::int64_t>(c.send_counts.size());
  out.send_counts = c.send_counts.empty() ? nullptr : c.send_counts.data();
  out.recv_counts = c.recv_counts.empty() ? nullptr : c.recv_counts.data();
  out.device = c.in.device == comm::DeviceType::kCuda || c.out.device == comm::DeviceType::kCuda ? 1 : 0;
  return out;
}

class CallbackPending final : public comm::Pending {
 public:
  explicit CallbackPending(std::int64_t handle) : handle_(handle) {}
  void wait() override {
    if (handle_ < 0) return;
    char err[1024] = "";
    const std::int64_t h = handle_;
    handle_ = -1;
    if (wait_cb(h, err, sizeof err) != 0) throw comm::CommError(err);
  }

 private:
  std::int64_t handle_;
};

// Starts and waits for one call through the callbacks.
std::unique_ptr<comm::Pending> start_now(int group, std::int64_t token, const comm::Call& call) {
  std::array<std::int64_t, comm::kCallFieldCount> fields;
  ls_call c = to_c(call, fields);
  char err[1024] = "";
  const std::int64_t handle = start_cb(group, token, &c, err, sizeof err);
  if (handle < 0) throw comm::CommError(err);
  return std::make_unique<CallbackPending>(handle);
}

// The program's call, started and waited for by the wrapper itself (ls_begin, ls_end): its
// outcome is what ls_end says.
class ExternalPending final : public comm::Pending {
 public:
  explicit ExternalPending(std::shared_ptr<std::string> failure) : failure_(std::move(failure)) {}
  void wait() override {
    if (!failure_->empty()) throw comm::CommError(*failure_);
  }

 private:
  std::shared_ptr<std::string> failure_;
};

// The program's call, started when it is waited for: the verifier waits for the ranks' records
// (the board, or the control group) before it waits for the data, so the program's engine runs
// the call only once it is known to match. An engine given mismatched calls may abort the process
// (torch 1.13's Gloo receiving f32 into f16) or hang; lockstep's own ranks start early and watch.
class StartAtWait final : public comm::Pending {
 public:
  StartAtWait(comm::Call call, std::int64_t token, int group) : call_(std::move(call)), token_(token), group_(group) {}
  void wait() override { start_now(group_, token_, call_)->wait(); }

 private:
  comm::Call call_;
  std::int64_t token_;
  int group_;
};

// The program's backend, as an engine of lockstep's chain. `group` 0 carries the program's own
// call (the wrapper holds its tensors under the current token) and lockstep's calls (token 0,
// raw host buffers, e.g. the final barrier); group 1 is the verifier's control group (records of
// point-to-point calls, and every record when the board cannot verify: ranks on several hosts).
// The program's other groups (ls_open_group) are 2 * id (its calls) and 2 * id + 1 (control).
class ProgramEngine final : public comm::Backend {
 public:
  ProgramEngine(int rank, int size, int group) : rank_(rank), size_(size), group_(group) {}
  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  std::string name() const override { return group_ % 2 == 0 ? "program" : "program-control"; }
  std::unique_ptr<comm::Pending> start(comm::Call& call) override {
    if (group_ % 2 == 0 && current_external) return std::make_unique<ExternalPending>(current_external);
    // A group's engine (even numbers) carries the program's call under the current token, or a
    // call of lockstep's own (token 0); control groups (odd) only lockstep's.
    if (group_ % 2 == 0) return std::make_unique<StartAtWait>(call, current_token, group_);
    return start_now(group_, 0, call);
  }

 private:
  int rank_, size_, group_;
};

comm::View view_of(void* data, std::int32_t dtype, std::int64_t count, std::int32_t device) {
  comm::View v;
  v.data = data;
  v.dtype = static_cast<comm::DType>(dtype);
  v.count = count;
  v.device = device ? comm::DeviceType::kCuda : comm::DeviceType::kCpu;
  return v;
}

// The program's steps, steps per second and median step (the lockstep_torch package measures them): the
// rank's metrics.
std::map<std::string, double> program_metrics(std::int64_t steps, double steps_per_s, double median_step_s) {
  std::map<std::string, double> m = {{"program_steps", static_cast<double>(steps)}};
  if (steps_per_s > 0) m["steps_per_s"] = steps_per_s;
  if (median_step_s > 0) m["median_step_s"] = median_step_s;
  return m;
}

std::string hex(std::int64_t v) {
  std::ostringstream os;
  os << std::hex << v;
  return os.str();
}

// lockstep's FNV-1a (scenarios/README.md, Outputs) over the 8 little-endian bytes of each word,
// shifted right by one (63 bits: positive as an int64): the run's digest of a program without DDP
// (over every rank's digest, in rank order) and a group's key on the board.
std::int64_t fnv1a_63(const std::vector<std::int64_t>& words) {
  std::uint64_t h = 1469598103934665603ULL;
  for (const std::int64_t d : words) {
    const auto u = static_cast<std::uint64_t>(d);
    for (int b = 0; b < 8; ++b) {
      h ^= (u >> (8 * b)) & 0xffu;
      h *= 1099511628211ULL;
    }
  }
  return static_cast<std::int64_t>(h >> 1);
}

}  // namespace
}  // namespace lockstep::pytorch

using namespace lockstep;
using namespace lockstep::pytorch;

extern "C" {

int ls_code(const char* kind, const char* name) {
  const std::string k = kind ? kind : "", n = name ? name : "";
  if (k == "op") {
    if (auto v = comm::op_from_string(n)) return static_cast<int>(*v);
  } else if (k == "dtype") {
    if (auto v = comm::dtype_from_string(n)) return static_cast<int>(*v);
  } else if (k == "reduce") {
    if (auto v = comm::reduce_op_from_string(n)) return static_cast<int>(*v);
  }
  return -1;
}

int ls_open(int rank, int world_size, const char* system, ls_start_fn start, ls_wait_fn wait, char* err, int errlen) {
  try {
    if (rt) throw InputError("this program creates a second default process group; lockstep verifies the first one only");
    start_cb = start;
    wait_cb = wait;
    rank::RankStatus initial;
    initial.program = true;
    initial.system = system ? system : "";
    // The launcher's plan for this rank (rank/plan.h); a program started by another launcher has
    // none: verified, with no board, status or trace.
    rank::RankPlan plan = rank::plan_from_env().value_or(rank::RankPlan{});
    if (!env::str(env::kPlan).empty() && (plan.rank != rank || plan.world_size != world_size)) {
      throw InputError("the rank plan " + env::str(env::kPlan) + " is for rank " + std::to_string(plan.rank) + " of " +
                       std::to_string(plan.world_size) + ", but the program's default group makes this rank " +
                       std::to_string(rank) + " of " + std::to_string(world_size));
    }
    rt = new rank::Runtime(rank, world_size, plan.status_path, std::move(initial), plan.timeout_s);
    if (!rt->attach_board(plan.board_path)) {
      throw InputError("the board " + plan.board_path + " is not for " + std::to_string(world_size) + " ranks, the program's group");
    }
    comm::set_activity("running the program");
    // The program's engine fails in its own transport thread when a peer sends more than a receive
    // holds (a mismatched point-to-point call, which runs while its record is compared): parked
    // while the verifier decides, as in lockstep's own ranks (verifier.h).
    comm::install_engine_failure_handler();
    rank::ChainSpec spec;
    spec.engine = std::make_unique<ProgramEngine>(rank, world_size, 0);
    spec.control = [=] { return std::make_unique<ProgramEngine>(rank, world_size, 1); };
    spec.mode = plan.mode;
    spec.trace_path = plan.trace_path;
    spec.check_in_background = true;  // the program starts its calls beside lockstep's check
    if (plan.slow_rank) {
      // The scenario's slow_rank fault on this rank (plan.h): the program's calls, slowed.
      comm::Fault f;
      f.kind = comm::Fault::Kind::kSlowRank;
      f.index = plan.slow_rank->index;
      f.rank = rank;
      f.seconds = plan.slow_rank->seconds;
      f.phase = plan.slow_rank->phase;
      f.call = plan.slow_rank->call;
      if (!plan.slow_rank->op.empty()) f.op = comm::op_from_string(plan.slow_rank->op);
      spec.faults.push_back(f);
    }
    verify_mode = spec.mode;
    rt->build(std::move(spec));
    // The program's engine starts each call at once (ls_begin, ls_p2p_begin), on the board and
    // over the control group alike (ranks on several hosts): the check runs beside it.
    built = true;
    return 0;
  } catch (const std::exception& e) {
    copy_error(e.what(), err, errlen);
    return 1;
  }
}

int ls_board_verifies(void) { return rt && rt->board_verifies() ? 1 : 0; }

namespace {
comm::Call call_of(const ls_call* c) {
  comm::Call call;
  call.op = static_cast<comm::Op>(c->op);
  call.in = view_of(c->in, c->dtype, c->in_count, c->device);
  call.out = view_of(c->out, c->dtype, c->out_count, c->device);
  call.reduce = static_cast<comm::ReduceOp>(c->reduce);
  if (c->nfields != comm::kCallFieldCount || (c->nfields > 0 && !c->fields)) {
    // The wrapper builds its calls from ls_call_fields(): another count is a wrapper of another build.
    std::cerr << "lockstep: ls_call carries " << c->nfields << " fields, this library's call-field table has "
              << comm::kCallFieldCount << " (ls_call_fields): the wrapper and the library come from different builds\n";
    std::exit(2);
  }
  for (std::size_t i = 0; i < comm::call_fields().size(); ++i) call.*comm::call_fields()[i].member = c->fields[i];
  if (c->nsplits > 0) {
    call.send_counts.assign(c->send_counts, c->send_counts + c->nsplits);
    call.recv_counts.assign(c->recv_counts, c->recv_counts + c->nsplits);
  }
  return call;
}

comm::Communicator* chain_of(int group) {
  return group > 0 && static_cast<std::size_t>(group) < groups.size() ? groups[static_cast<std::size_t>(group)].comm
                                                                     : rt->communicator();
}

void set_site(int group, const char* site, std::int64_t step) {
  comm::Communicator* c = chain_of(group);
  c->set_phase(site && *site ? site : "program");
  c->set_step(step);
}
}  // namespace

int ls_open_group(const std::int32_t* ranks, int n, int me) {
  if (!rt || finished || !ranks || n <= 0 || me < 0 || me >= n) return -1;
  std::lock_guard<std::mutex> lock(issue_mu);
  drain();
  Group g;
  g.members.assign(ranks, ranks + n);
  const int id = static_cast<int>(groups.size());
  // The group's key on the board: its ranks and how many groups of the same ranks came before it
  // (every member makes its groups in one order), so that two groups of the same ranks differ.
  std::vector<std::int64_t> words(g.members.begin(), g.members.end());
  words.push_back(std::count_if(groups.begin(), groups.end(), [&](const Group& o) { return o.members == g.members; }));
  const auto key = static_cast<std::uint64_t>(fnv1a_63(words) | 1);  // non-zero, positive as a board word
  g.comm = &rt->add_group(g.members, std::make_unique<ProgramEngine>(me, n, 2 * id),
                          std::make_unique<ProgramEngine>(me, n, 2 * id + 1), verify_mode, key);
  groups.push_back(std::move(g));
  return id;
}

int ls_carry(int group, std::int64_t token, const ls_call* c, const char* site, std::int64_t step) {
  if (!rt || finished || !built) return 1;
  if (group < 0 || static_cast<std::size_t>(group) >= groups.size()) return 1;
  comm::Call call = call_of(c);
  if (group > 0) call.group = groups[static_cast<std::size_t>(group)].members;
  std::lock_guard<std::mutex> lock(issue_mu);
  drain();
  current_token = token;
  if (comm::is_p2p(call.op)) {
    // Seen by its peer only: it must not shift the call index of the group's collectives.
    rt->carry_at(std::move(call), comm::CallSite{site && *site ? site : "program", step, 0}, chain_of(group));
  } else {
    set_site(group, site, step);
    rt->carry(std::move(call), chain_of(group));
  }
  current_token = 0;
  return 0;
}

namespace {
// Issues `call` on `group` through lockstep's chain, for the program to start itself; its id for
// ls_end / ls_p2p_end. issue_mu is held.
std::int64_t begin_external(int group, comm::Call call, const char* site, std::int64_t step) {
  const bool collective = !comm::is_p2p(call.op);
  if (group > 0) call.group = groups[static_cast<std::size_t>(group)].members;
  auto failure = std::make_shared<std::string>();
  current_external = failure;
  std::unique_ptr<comm::Pending> pending;
  if (collective) {
    set_site(group, site, step);
    pending = rt->begin(std::move(call), chain_of(group));
  } else {
    // Seen by its peer only: it must not shift the call index of the group's collectives.
    pending = rt->begin_at(std::move(call), comm::CallSite{site && *site ? site : "program", step, 0}, chain_of(group));
  }
  current_external.reset();
  std::lock_guard<std::mutex> b(begun_mu);
  const std::int64_t id = ++begun_next;
  begun[id] = Begun{std::move(pending), std::move(failure), collective};
  collectives_begun += collective;
  return id;
}

int end_external(std::int64_t id, const char* failure, bool collective) {
  Begun one;
  {
    std::lock_guard<std::mutex> b(begun_mu);
    auto it = begun.find(id);
    if (!rt || it == begun.end() || it->second.collective != collective) return 1;
    one = std::move(it->second);
    begun.erase(it);
  }
  *one.failure = failure ? failure : "";
  rt->end(*one.pending);  // a diagnosis or an engine failure ends the process here
  {
    std::lock_guard<std::mutex> b(begun_mu);
    collectives_begun -= collective;
  }
  begun_cv.notify_all();
  return 0;
}
}  // namespace

std::int64_t ls_p2p_begin(int group, const ls_call* c, const char* site, std::int64_t step) {
  // Checked beside the transfer wherever the verifier runs (on the board or over the control
  // group alike: the record goes to the receiver on the control group either way), so that pairs
  // that both send first run as natively on several hosts too.
  if (!rt || finished || !built || group < 0 || static_cast<std::size_t>(group) >= groups.size()) return -1;
  comm::Call call = call_of(c);
  if (!comm::is_p2p(call.op)) return -1;
  std::lock_guard<std::mutex> lock(issue_mu);  // the chain's numbering; no drain: it runs beside the rest
  return begin_external(group, std::move(call), site, step);
}

int ls_p2p_end(std::int64_t id, const char* failure) { return end_external(id, failure, false); }

std::int64_t ls_begin(int group, const ls_call* c, const char* site, std::int64_t step) {
  if (!rt || finished || !built || group < 0 || static_cast<std::size_t>(group) >= groups.size()) return -1;
  comm::Call call = call_of(c);
  if (comm::is_p2p(call.op)) return -1;
  std::lock_guard<std::mutex> lock(issue_mu);
  {
    std::unique_lock<std::mutex> b(begun_mu);
    begun_cv.wait(b, [] { return collectives_begun < kMaxCollectivesInFlight; });
  }
  return begin_external(group, std::move(call), site, step);
}

int ls_end(std::int64_t id, const char* failure) { return end_external(id, failure, true); }

void ls_check_same_count(std::int64_t value, const char* subject, const char* unit, std::int64_t step) {
  if (!rt || finished) return;
  std::lock_guard<std::mutex> lock(issue_mu);
  drain();
  rt->communicator()->set_phase("lockstep");
  rt->communicator()->set_step(step);
  rt->check_same_count(value, subject ? subject : "", unit ? unit : "");
}

int ls_finish(const char* failure, std::int64_t failure_step, std::int64_t steps, double steps_per_s, double median_step_s,
              std::int64_t replica_digest, std::int64_t rank_digest) {
  const std::string fail = failure ? failure : "";
  if (!rt) {
    // A program on its own backend (wrap = "none") only reports its steps. A wrapped program that
    // never created its default group had nothing verified: that is not a pass.
    rank::RankPlan plan;
    try {
      plan = rank::plan_from_env().value_or(rank::RankPlan{});
    } catch (const std::exception& e) {
      std::cerr << "lockstep: " << e.what() << std::endl;
      return rank::kExitInput;
    }
    const std::string& path = plan.status_path;
    if (!path.empty() && fail.empty()) {
      rank::RankStatus st;
      st.program = true;
      st.outcome = rank::Outcome::kOk;
      st.metrics = program_metrics(steps, steps_per_s, median_step_s);
      if (env::str(env::kC10dWrap, "gloo") != "none") {
        st.outcome = rank::Outcome::kInputError;
        st.message = "the program never called init_process_group: lockstep verified none of its collectives";
      }
      const bool nothing_checked = st.outcome == rank::Outcome::kInputError;
      rank::Runtime once(plan.rank, plan.world_size, path, std::move(st), plan.timeout_s);
      once.attach_board(plan.board_path);
      once.settle();
      if (nothing_checked) return rank::kExitInput;
    }
    return 0;
  }
  if (finished) return 0;
  rank::RankStatus& st = rt->status();
  std::int64_t program_digest = -1;
  if (!fail.empty()) {
    finished = true;
    if (auto d = rt->explain("error: " + fail)) rt->diagnosed(*d);
    st.outcome = rank::Outcome::kError;
    st.message = fail;
    st.step = failure_step;
    rt->settle();
    return 0;
  }
  {
    std::lock_guard<std::mutex> lock(issue_mu);
    drain();
    rt->communicator()->set_phase("finalize");
    rt->communicator()->set_step(-1);
    comm::Call c;
    c.op = comm::Op::kBarrier;
    rt->carry(std::move(c));
    // DistributedDataParallel keeps its replicas identical (it broadcasts the parameters at
    // construction and every rank applies the same all-reduced gradients).
    if (replica_digest >= 0) {
      rt->check_same_value(replica_digest, "the DistributedDataParallel module's parameters differ between the ranks at the end of the program",
                           "DDP keeps its replicas identical; a rank's gradient all-reduce stopped, was skipped or differed");
    }
    if (rank_digest >= 0) {
      // What is not replicated (a sharded or hand-written program; the shards of a DDP module's
      // parameters DDP ignores, TorchRec's tables): the run's digest is every rank's 63-bit
      // digest in rank order, after the replicas' where there are replicas, for baselines and
      // upgrade comparisons.
      std::vector<std::int64_t> words = rt->gather_values(rank_digest);
      if (replica_digest >= 0) words.insert(words.begin(), replica_digest);
      program_digest = fnv1a_63(words);
    }
  }
  finished = true;
  st.outcome = rank::Outcome::kOk;
  st.collectives = rt->collectives_issued();
  st.metrics = program_metrics(steps, steps_per_s, median_step_s);
  st.metrics["collectives"] = static_cast<double>(rt->collectives_issued());
  for (const auto& [name, value] : wrapper_metrics) st.metrics[name] = value;
  if (program_digest >= 0) st.digest = hex(program_digest);
  else if (replica_digest >= 0) st.digest = hex(replica_digest);
  rt->settle();
  return 0;
}

void ls_engine_timeout(double seconds) { comm::set_engine_timeout(seconds); }

void ls_metric(const char* name, double value) {
  if (name && *name) wrapper_metrics[name] = value;
}

void ls_unverified(const char* name, std::int64_t count) {
  if (rt && name && count > 0) rt->status().unverified[name] += count;
}

const char* ls_version(void) { return "9"; }

const char* ls_call_fields(void) {
  static const std::string text = [] {
    std::string s;
    for (const auto& f : comm::call_fields()) {
      if (!s.empty()) s += ',';
      s.append(f.name).append("=").append(std::to_string(f.none));
    }
    return s;
  }();
  return text.c_str();
}

}  // extern "C"
