#include "harness/rank/runtime.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstdio>
#include <sstream>
#include <cstdlib>
#include <iostream>
#include <mutex>

#include "harness/comm/verifier.h"
#include "harness/core/error.h"

namespace lockstep::rank {

Runtime::Runtime(int rank, int world_size, std::string status_path, RankStatus status, double timeout_s)
    : rank_(rank), world_size_(world_size), status_path_(std::move(status_path)), status_(std::move(status)), timeout_s_(timeout_s) {
  status_.rank = rank;
}

bool Runtime::attach_board(const std::string& path) {
  if (path.empty()) return true;
  comm::Board board = comm::Board::attach(path);
  if (board.world_size() != world_size_) return false;
  board_ = std::move(board);
  slot_ = &board_.slot(rank_);
  slot_->state.store(static_cast<int>(comm::RankState::kRunning));
  comm::set_own_slot(slot_);
  return true;
}

comm::Communicator& Runtime::build(ChainSpec spec) {
  std::unique_ptr<comm::Backend> chain = std::move(spec.engine);
  const bool use_board = board_.valid() && board_.fingerprint_words() == comm::fingerprint_words(world_size_) &&
                         comm::verify_channel_from_env() == comm::VerifyChannel::kAuto;
  if (spec.mode == VerifyMode::kVerify) {
    board_verifies_ = use_board;
    chain = std::make_unique<comm::Verifier>(std::move(chain), spec.control(), use_board ? &board_ : nullptr,
                                             [this](const Diagnosis& d) { diagnosed(d); }, std::min(5.0, timeout_s_ / 2),
                                             std::vector<int>{}, spec.check_in_background);
  }
  auto monitor = std::make_unique<comm::Monitor>(std::move(chain), slot_, spec.mode == VerifyMode::kOff ? "" : spec.trace_path);
  monitor_ = monitor.get();
  chain = std::move(monitor);
  if (!spec.faults.empty()) chain = std::make_unique<comm::FaultInjector>(std::move(chain), std::move(spec.faults));
  // Deliberately never destroyed: ~ProcessGroupGloo joins worker threads that may be stuck in a
  // collective that a diagnosed peer will never join. The rank ends with _Exit.
  communicator_ = new comm::Communicator(std::move(chain));
  return *communicator_;
}

std::int64_t Runtime::collectives_issued() const { return monitor_ ? monitor_->collectives_issued() : 0; }

void Runtime::mark(bool ok) {
  if (slot_) slot_->state.store(static_cast<int>(ok ? comm::RankState::kFinished : comm::RankState::kFailed));
}

void Runtime::settle() {
  mark(status_.outcome == Outcome::kOk);
  if (!status_path_.empty()) write_status(status_path_, status_);
  std::fflush(nullptr);
}

void Runtime::finish(int code) {
  // Called from the main thread, or from the verifier's watcher thread.
  static std::mutex finishing;
  comm::hold_engine_failures();
  finishing.lock();
  mark(code == kExitClean);
  try {
    if (!status_path_.empty()) write_status(status_path_, status_);
  } catch (const std::exception& e) {
    // A full or read-only report disk: say so, and still end (never throw out of here: the
    // handler that catches it would call finish() again and wait on `finishing` forever).
    std::cerr << "lockstep rank " << rank_ << ": cannot write " << status_path_ << ": " << e.what() << '\n';
    code = kExitNoStatus;
  }
  std::fflush(nullptr);
  // Engine threads may still be blocked in a collective that will never complete; do not run
  // their destructors.
  std::_Exit(code);
}

void Runtime::diagnosed(const Diagnosis& d) {
  status_.outcome = Outcome::kDiagnosis;
  status_.diagnosis = d;
  std::cerr << "lockstep rank " << rank_ << ": " << to_string(d.kind) << ": " << d.message << std::endl;
  finish(kExitDiagnosed);
}

void Runtime::comm_failed(const std::string& what) {
  status_.outcome = Outcome::kCommError;
  status_.message = what;
  std::cerr << "lockstep rank " << rank_ << ": communication error: " << what << std::endl;
  finish(kExitCommError);
}

std::optional<Diagnosis> Runtime::explain(const std::string& failure) {
  if (!board_verifies_ || !communicator_ || !monitor_) return std::nullopt;
  // Peers explaining their own failure wait for this rank to end or go on: it has ended.
  slot_->state.store(static_cast<int>(comm::RankState::kFailed));
  return comm::skipped_collective(board_, rank_, monitor_->collectives_issued(), communicator_->site(), failure,
                                  std::min(timeout_s_ / 2, 5.0));
}

void Runtime::failed(Outcome outcome, const std::string& what, int code) {
  if (outcome == Outcome::kError) {
    if (auto skipped = explain("error: " + what)) diagnosed(*skipped);
  }
  status_.outcome = outcome;
  status_.message = what;
  std::cerr << "lockstep rank " << rank_ << ": " << (outcome == Outcome::kError ? "error: " : "") << what << '\n';
  finish(code);
}

std::unique_ptr<comm::Pending> Runtime::begin(comm::Call call, comm::Communicator* on) {
  try {
    return (on ? on : communicator_)->start(std::move(call));
  } catch (const DiagnosisError& e) {
    diagnosed(e.diagnosis());
  } catch (const comm::CommError& e) {
    comm_failed(e.what());
  }
}

void Runtime::end(comm::Pending& pending) {
  try {
    pending.wait();
  } catch (const DiagnosisError& e) {
    diagnosed(e.diagnosis());
  } catch (const comm::CommError& e) {
    comm_failed(e.what());
  }
}

void Runtime::carry(comm::Call call, comm::Communicator* on) { end(*begin(std::move(call), on)); }

void Runtime::carry_at(comm::Call call, const comm::CallSite& site, comm::Communicator* on) {
  end(*begin_at(std::move(call), site, on));
}

std::unique_ptr<comm::Pending> Runtime::begin_at(comm::Call call, const comm::CallSite& site, comm::Communicator* on) {
  try {
    return (on ? on : communicator_)->start_at(std::move(call), site);
  } catch (const DiagnosisError& e) {
    diagnosed(e.diagnosis());
  } catch (const comm::CommError& e) {
    comm_failed(e.what());
  }
}

namespace {
// A member of the group `members` whose call at `sites[p]` another rank waits for from the same
// site and step on another group that holds it: that member issued the call on the wrong group
// (the logging all-reduce over dp where the pair waits over tp). Looks on the board for up to
// `wait_s` (the waiting rank may be slower to get there). nullopt when no rank waits like that.
std::optional<Diagnosis> call_on_wrong_group(const comm::Board& board, const std::vector<int>& members,
                                             const std::vector<comm::CallSite>& sites, double wait_s) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  for (;;) {
    for (std::size_t p = 0; p < sites.size() && p < members.size(); ++p) {
      const int x = members[p];
      for (int y = 0; y < board.world_size(); ++y) {
        const comm::SlotView v = board.view(y);
        if (y == x || !v.in_group_call() || v.group_phase != sites[p].phase || v.group_step != sites[p].step) continue;
        const std::vector<int> theirs = v.group_ranks();
        if (theirs == members || std::find(theirs.begin(), theirs.end(), x) == theirs.end()) continue;
        std::ostringstream os;
        os << "rank " << x << " issued the call at " << sites[p].phase;
        if (sites[p].step >= 0) os << " step " << sites[p].step;
        os << " on the group of " << rank_list(members) << ", where rank " << y << " waits for it in " << v.waiting_in_group()
           << ": the call issued on the wrong group";
        return Diagnosis{DiagnosisKind::kCollectiveMismatch, os.str(), x, -1, sites[p].step};
      }
    }
    if (std::chrono::steady_clock::now() >= until) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}
}  // namespace

comm::Communicator& Runtime::add_group(std::vector<int> members, std::unique_ptr<comm::Backend> engine,
                                       std::unique_ptr<comm::Backend> control, VerifyMode mode, std::uint64_t key) {
  std::unique_ptr<comm::Backend> chain = std::move(engine);
  if (mode == VerifyMode::kVerify) {
    auto verifier = std::make_unique<comm::Verifier>(std::move(chain), std::move(control), board_verifies_ && key ? &board_ : nullptr,
                                                     [this](const Diagnosis& d) { diagnosed(d); }, std::min(5.0, timeout_s_ / 2),
                                                     members, /*check_in_background=*/true, key);
    if (board_.valid()) {
      verifier->set_site_explainer([this, members](const std::vector<comm::CallSite>& sites) {
        return call_on_wrong_group(board_, members, sites, std::min(2.0, timeout_s_ / 4));
      });
    }
    chain = std::move(verifier);
  }
  chain = std::make_unique<comm::Monitor>(std::move(chain), slot_, monitor_ ? monitor_->trace_file() : nullptr, rank_, key);
  // Never destroyed, as the default chain (build).
  return *new comm::Communicator(std::move(chain));
}

Runtime::Groups Runtime::gather_groups(std::int64_t value) {
  Groups g;
  g.all.assign(static_cast<std::size_t>(world_size_), 0);
  comm::Call c;
  c.op = comm::Op::kAllGather;
  c.in = comm::View{&value, comm::DType::kI64, 1};
  c.out = comm::View{g.all.data(), comm::DType::kI64, static_cast<std::int64_t>(g.all.size())};
  carry(std::move(c));
  for (int r = 0; r < world_size_; ++r) {
    const std::int64_t v = g.all[static_cast<std::size_t>(r)];
    auto it = std::find_if(g.groups.begin(), g.groups.end(), [&](const auto& x) { return x.first == v; });
    if (it == g.groups.end()) g.groups.push_back({v, {r}});
    else it->second.push_back(r);
  }
  if (g.groups.size() == 2 && (g.groups[0].second.size() == 1) != (g.groups[1].second.size() == 1)) {
    g.blamed = g.groups[0].second.size() == 1 ? g.groups[0].second[0] : g.groups[1].second[0];
  }
  return g;
}

std::vector<std::int64_t> Runtime::gather_values(std::int64_t value) { return gather_groups(value).all; }

void Runtime::check_same_value(std::int64_t value, const std::string& subject, const std::string& reason) {
  const Groups g = gather_groups(value);
  if (g.groups.size() == 1) return;
  std::ostringstream os;
  os << subject << ":";
  for (std::size_t i = 0; i < g.groups.size(); ++i) {
    os << (i ? "; " : " ") << rank_list(g.groups[i].second) << " digest " << std::hex << g.groups[i].first << std::dec;
  }
  os << " (" << reason << ")";
  diagnosed(Diagnosis{DiagnosisKind::kResultMismatch, os.str(), g.blamed, collectives_issued() - 1});
}

void Runtime::check_same_count(std::int64_t count, const std::string& subject, const std::string& unit) {
  const Groups g = gather_groups(count);
  if (g.groups.size() == 1) return;
  std::ostringstream os;
  os << subject << ":";
  for (int r = 0; r < world_size_; ++r) {
    os << (r ? ", " : " ") << "rank " << r << " " << g.all[static_cast<std::size_t>(r)] << (r == 0 ? " " + unit : "");
  }
  // The step the check was made at (a program's: the iteration whose loader differs).
  Diagnosis d{DiagnosisKind::kUnevenSteps, os.str(), g.blamed, collectives_issued() - 1, communicator_->site().step};
  diagnosed(d);
}

}  // namespace lockstep::rank
