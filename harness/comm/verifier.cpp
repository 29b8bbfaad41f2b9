#include "harness/comm/verifier.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <cstring>
#include <map>
#include <sstream>
#include <string>

#include "harness/comm/board.h"
#include "harness/core/env.h"
#include "harness/core/error.h"

namespace lockstep::comm {
namespace {

std::atomic<int> g_pending{0};
std::atomic<bool> g_hold{false};  // an outcome is decided: later engine failures are consequences
std::atomic<bool> g_engine_failed{false};
char g_engine_message[512];

[[noreturn]] void engine_terminate() {
  std::string what = "unknown exception";
  if (auto ep = std::current_exception()) {
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
  }
  std::snprintf(g_engine_message, sizeof g_engine_message, "%s", what.c_str());
  if (g_pending.load() > 0 || g_hold.load()) {
    g_engine_failed.store(true);
    for (;;) ::pause();  // the verifying thread decides what happens to this rank
  }
  std::fprintf(stderr, "terminate called after an uncaught exception: %s\n", g_engine_message);
  std::fflush(nullptr);  // the rank's trace
  std::abort();
}

// Counts a verification in flight for as long as it lives.
struct PendingGuard {
  PendingGuard() { g_pending.fetch_add(1); }
  ~PendingGuard() { g_pending.fetch_sub(1); }
  PendingGuard(const PendingGuard&) = delete;
  PendingGuard& operator=(const PendingGuard&) = delete;
};

void abort_if_engine_failed() {
  if (g_engine_failed.load()) {
    std::fprintf(stderr, "terminate called after an uncaught exception in the engine: %s\n", g_engine_message);
    std::abort();
  }
}

// Record layout (int64 words).
enum Word : std::size_t {
  kOp, kDType, kReduce, kDevice, kCount, kRoot, kTag, kSeq, kStep, kIndex,
  kPhase0, kPhase1, kPhase2, kHeader  // followed by send_counts[ws], recv_counts[ws]
};

std::string phase_of(const std::int64_t* rec) {
  char buf[25] = {};
  std::memcpy(buf, rec + kPhase0, 24);
  return buf;
}

std::string site_of(const std::int64_t* rec) {
  std::ostringstream os;
  os << phase_of(rec);
  if (rec[kStep] >= 0) os << " step " << rec[kStep];
  os << " call " << rec[kIndex];
  return os.str();
}

// `members`: the group's ranks, so that a root reads as the rank it is.
std::string args_of(const std::int64_t* rec, int ws, const std::vector<int>* members = nullptr) {
  Fingerprint fp;
  fp.op = static_cast<Op>(rec[kOp]);
  fp.dtype = static_cast<DType>(rec[kDType]);
  fp.reduce = static_cast<ReduceOp>(rec[kReduce]);
  fp.device = static_cast<DeviceType>(rec[kDevice]);
  fp.count = rec[kCount];
  fp.root = static_cast<int>(rec[kRoot]);
  if (members && fp.root >= 0 && fp.root < static_cast<int>(members->size())) fp.root = (*members)[static_cast<std::size_t>(fp.root)];
  std::string s = describe(fp);
  if (fp.op == Op::kAllToAll) {
    std::ostringstream os;
    os << " send=[";
    for (int j = 0; j < ws; ++j) os << (j ? "," : "") << rec[kHeader + j];
    os << "] recv=[";
    for (int j = 0; j < ws; ++j) os << (j ? "," : "") << rec[kHeader + ws + j];
    os << ']';
    s += os.str();
  }
  return s;
}

// Groups ranks by a key; returns groups ordered by their lowest rank.
template <typename Key>
std::vector<std::vector<int>> group_by(int ws, const std::vector<bool>* present, Key key) {
  std::vector<std::vector<int>> groups;
  std::vector<decltype(key(0))> keys;
  for (int r = 0; r < ws; ++r) {
    if (present && !(*present)[static_cast<std::size_t>(r)]) continue;
    auto k = key(r);
    auto it = std::find(keys.begin(), keys.end(), k);
    if (it == keys.end()) {
      keys.push_back(k);
      groups.push_back({r});
    } else {
      groups[static_cast<std::size_t>(it - keys.begin())].push_back(r);
    }
  }
  return groups;
}

// The group to blame: a strict minority if there is one (the smallest, lowest ranks first),
// otherwise the group not containing rank 0.
const std::vector<int>& blamed(const std::vector<std::vector<int>>& groups) {
  const std::vector<int>* best = &groups.back();
  for (const auto& g : groups) {
    if (g.size() < best->size()) best = &g;
  }
  std::size_t smallest = best->size();
  std::size_t with_size = 0;
  for (const auto& g : groups) with_size += g.size() == smallest;
  if (with_size > 1) {
    for (const auto& g : groups) {
      if (g.front() != 0) return g;
    }
  }
  return *best;
}

std::string differing_fields(const std::int64_t* a, const std::int64_t* b, int ws) {
  std::vector<std::string> fields;
  if (a[kOp] != b[kOp]) fields.push_back("op");
  if (a[kDType] != b[kDType]) fields.push_back("dtype");
  if (a[kCount] != b[kCount]) fields.push_back("count");
  if (a[kReduce] != b[kReduce]) fields.push_back("reduce op");
  if (a[kRoot] != b[kRoot]) fields.push_back("root");
  if (a[kDevice] != b[kDevice]) fields.push_back("device");
  std::string s;
  for (std::size_t i = 0; i < fields.size(); ++i) s += (i ? ", " : "") + fields[i];
  return s + (fields.size() == 1 ? " differs" : " differ");
}

class VerifiedPending final : public Pending {
 public:
  VerifiedPending(std::unique_ptr<PendingGuard> guard, std::unique_ptr<Pending> control,
                  std::unique_ptr<Pending> data, std::vector<std::int64_t> record,
                  std::vector<std::int64_t> gathered, int ws, std::vector<int> members)
      : guard_(std::move(guard)), control_(std::move(control)), data_(std::move(data)), record_(std::move(record)),
        gathered_(std::move(gathered)), ws_(ws), members_(std::move(members)) {}
  void wait() override {
    control_->wait();
    if (auto d = check_fingerprints(gathered_, ws_, nullptr, members_.empty() ? nullptr : &members_)) {
      hold_engine_failures();
      throw DiagnosisError(*d);
    }
    abort_if_engine_failed();
    guard_.reset();
    data_->wait();
  }

 private:
  std::unique_ptr<PendingGuard> guard_;
  std::unique_ptr<Pending> control_;
  std::unique_ptr<Pending> data_;
  std::vector<std::int64_t> record_;    // read by the control all_gather (moving keeps the buffer)
  std::vector<std::int64_t> gathered_;  // written by it
  int ws_;
  std::vector<int> members_;
};

// A receive: the sender's record arrives on the control group, and is compared with the
// receiver's own call before the data is released. The comparison runs as soon as the record
// arrives, on a thread of its own, not only when the caller waits: a receive buffer smaller
// than what the peer sends (a cast to a narrower dtype) fails the engine's transport thread,
// which is parked (install_engine_failure_handler), and every other call of this rank on that
// engine (a send the caller waits for first) then never completes. A mismatch found there
// goes to `on_async` (which ends the process) so that it is still named.
class VerifiedRecv final : public Pending {
 public:
  VerifiedRecv(std::unique_ptr<PendingGuard> guard, std::unique_ptr<Pending> data, Call call,
               int rank, int ws, std::vector<int> members)
      : guard_(std::move(guard)), data_(std::move(data)), state_(std::make_shared<State>()) {
    state_->call = std::move(call);
    state_->rank = rank;
    state_->members = std::move(members);
    state_->record.resize(fingerprint_words(ws));
  }
  ~VerifiedRecv() override {
    // A receive dropped without wait() (the rank is failing): the checker may still be waiting
    // for a record that never comes; it owns what it uses.
    if (checker_.joinable()) checker_.detach();
  }
  std::vector<std::int64_t>& record() { return state_->record; }
  void set_control(std::unique_ptr<Pending> control, const std::function<void(const Diagnosis&)>& on_async) {
    state_->control = std::move(control);
    if (!on_async) return;
    checker_ = std::thread([state = state_, on_async] {
      try {
        state->verify();
      } catch (...) {  // the control receive failed (a peer died): wait() rethrows it
        state->failure = std::current_exception();
        return;
      }
      if (state->mismatch) {
        hold_engine_failures();
        on_async(*state->mismatch);
      }
    });
  }
  void wait() override {
    if (checker_.joinable()) checker_.join();
    else state_->verify();
    if (state_->failure) std::rethrow_exception(state_->failure);
    if (state_->mismatch) {
      hold_engine_failures();
      throw DiagnosisError(*state_->mismatch);
    }
    abort_if_engine_failed();
    guard_.reset();
    data_->wait();
  }

 private:
  struct State {
    std::unique_ptr<Pending> control;
    Call call;
    int rank = 0;
    std::vector<int> members;
    std::vector<std::int64_t> record;  // written by the control receive
    std::optional<Diagnosis> mismatch;
    std::exception_ptr failure;  // what the checker's control receive threw
    void verify() {
      control->wait();
      mismatch = check_p2p(record, call, rank, members.empty() ? nullptr : &members);
    }
  };
  std::unique_ptr<PendingGuard> guard_;
  std::unique_ptr<Pending> data_;
  std::shared_ptr<State> state_;
  std::thread checker_;
};

class BothPending final : public Pending {
 public:
  BothPending(std::unique_ptr<Pending> a, std::unique_ptr<Pending> b, std::vector<std::int64_t> keep)
      : a_(std::move(a)), b_(std::move(b)), keep_(std::move(keep)) {}
  void wait() override {
    a_->wait();
    b_->wait();
  }

 private:
  std::unique_ptr<Pending> a_, b_;
  std::vector<std::int64_t> keep_;  // the buffer the control send reads from
};

View i64_view(std::vector<std::int64_t>& v) {
  return View{v.data(), DType::kI64, static_cast<std::int64_t>(v.size()), DeviceType::kCpu, 0};
}

}  // namespace

void install_engine_failure_handler() { std::set_terminate(engine_terminate); }
void hold_engine_failures() { g_hold.store(true); }

VerifyChannel verify_channel_from_env() {
  const char* v = std::getenv(env::kVerifyChannel);
  const std::string value = v ? v : "";
  if (value.empty() || value == "auto") return VerifyChannel::kAuto;
  if (value == "control") return VerifyChannel::kControl;
  throw InputError(std::string(env::kVerifyChannel) + " must be 'auto' or 'control', got '" + value + "'");
}

std::size_t fingerprint_words(int world_size) {
  return kHeader + 2 * static_cast<std::size_t>(world_size);
}

std::vector<std::int64_t> encode_fingerprint(const Call& call, int world_size) {
  std::vector<std::int64_t> rec(fingerprint_words(world_size), 0);
  const Fingerprint fp = fingerprint_of(call);
  rec[kOp] = static_cast<std::int64_t>(fp.op);
  rec[kDType] = static_cast<std::int64_t>(fp.dtype);
  rec[kReduce] = static_cast<std::int64_t>(fp.reduce);
  rec[kDevice] = static_cast<std::int64_t>(fp.device);
  rec[kCount] = fp.count;
  rec[kRoot] = is_p2p(call.op) ? call.root : fp.root;
  rec[kTag] = call.tag;
  rec[kSeq] = call.seq;
  rec[kStep] = call.site.step;
  rec[kIndex] = call.site.index;
  char buf[24] = {};
  std::memcpy(buf, call.site.phase.data(), std::min<std::size_t>(call.site.phase.size(), 24));
  std::memcpy(&rec[kPhase0], buf, 24);
  if (call.op == Op::kAllToAll) {
    for (int j = 0; j < world_size; ++j) {
      rec[kHeader + j] = call.send_counts[static_cast<std::size_t>(j)];
      rec[kHeader + world_size + j] = call.recv_counts[static_cast<std::size_t>(j)];
    }
  }
  return rec;
}

std::optional<Diagnosis> check_fingerprints(const std::vector<std::int64_t>& gathered, int ws,
                                            const std::vector<bool>* present, const std::vector<int>* members) {
  const std::size_t w = fingerprint_words(ws);
  // Positions are the group's ranks; messages and blame name the ranks themselves.
  auto G = [&](int r) { return members ? (*members)[static_cast<std::size_t>(r)] : r; };
  auto names = [&](const std::vector<int>& rs) {
    std::vector<int> g;
    for (int r : rs) g.push_back(G(r));
    return rank_list(g);
  };
  const std::string on = members ? " on the group of " + rank_list(*members) : "";
  auto rec = [&](int r) { return gathered.data() + static_cast<std::size_t>(r) * w; };
  auto known = [&](int r) { return !present || (*present)[static_cast<std::size_t>(r)]; };
  int first = 0;
  while (first < ws && !known(first)) ++first;
  if (first == ws) return std::nullopt;
  const std::int64_t seq = rec(first)[kSeq];

  // 1. Call sites: ranks at different points of the program.
  auto sites = group_by(ws, present, [&](int r) {
    return std::vector<std::int64_t>(rec(r) + kStep, rec(r) + kHeader);
  });
  if (sites.size() > 1) {
    // Two equal groups: the rank further along in the same phase (or at the end) is the one
    // that skipped a call.
    const std::vector<int>* bad_ptr = &blamed(sites);
    if (sites.size() == 2 && sites[0].size() == sites[1].size()) {
      const auto* a = rec(sites[0].front());
      const auto* b = rec(sites[1].front());
      if (phase_of(a) == "finalize" || phase_of(b) == "finalize") {
        bad_ptr = phase_of(a) == "finalize" ? &sites[0] : &sites[1];
      } else if (phase_of(a) == phase_of(b)) {
        const bool a_ahead = std::pair(a[kStep], a[kIndex]) > std::pair(b[kStep], b[kIndex]);
        bad_ptr = a_ahead ? &sites[0] : &sites[1];
      }
    }
    const auto& bad = *bad_ptr;
    std::ostringstream os;
    os << "collective #" << seq << on << ": ";
    for (std::size_t g = 0; g < sites.size(); ++g) {
      const auto* r0 = rec(sites[g].front());
      os << (g ? "; " : "") << names(sites[g]) << " issued it from " << site_of(r0) << " ("
         << args_of(r0, ws, members) << ")";
    }
    const auto* mine = rec(bad.front());
    const auto* other = rec(bad.front() == sites.front().front() ? sites[1].front()
                                                                  : sites.front().front());
    if (phase_of(mine) == "finalize") {
      os << ": " << names(bad) << " reached the end of the workload while others still issue collectives";
    } else if (phase_of(other) == "finalize") {
      os << ": " << names(bad) << " issued a collective after the others reached the end";
    } else {
      os << ": " << names(bad) << " skipped or added a collective before this one";
    }
    // The step of the collective the blamed ranks did not take part in: the others' site.
    return Diagnosis{DiagnosisKind::kMissingParticipant, os.str(), G(bad.front()), seq, other[kStep]};
  }

  // 2. Arguments at the same call site.
  auto args = group_by(ws, present, [&](int r) {
    return std::vector<std::int64_t>(rec(r) + kOp, rec(r) + kTag);
  });
  if (args.size() > 1) {
    const auto& bad = blamed(args);
    const auto* good_rec = rec(bad.front() == args.front().front() ? args[1].front()
                                                                    : args.front().front());
    std::ostringstream os;
    os << "collective #" << seq << on << " (" << site_of(rec(first)) << "): ";
    for (std::size_t g = 0; g < args.size(); ++g) {
      os << (g ? ", " : "") << names(args[g]) << ' ' << args_of(rec(args[g].front()), ws, members);
    }
    os << ": " << differing_fields(rec(bad.front()), good_rec, ws);
    return Diagnosis{DiagnosisKind::kCollectiveMismatch, os.str(), G(bad.front()), seq, rec(first)[kStep]};
  }

  // 3. all_to_all: what i sends to j must be what j expects from i. Blame the rank party to
  // the most disagreeing (sender, receiver) pairs, the lowest on ties: the one party to every
  // pair when there is one (the minority: a rank with wrong splits disagrees with each peer it
  // got wrong), else the lowest of those that are.
  if (static_cast<Op>(rec(first)[kOp]) == Op::kAllToAll) {
    struct Pair {
      int from, to;
      std::int64_t sent, expected;
    };
    std::vector<Pair> bad;
    std::vector<int> party(static_cast<std::size_t>(ws), 0);
    for (int i = 0; i < ws; ++i) {
      for (int j = 0; j < ws; ++j) {
        if (!known(i) || !known(j)) continue;
        const std::int64_t sent = rec(i)[kHeader + j];
        const std::int64_t expected = rec(j)[kHeader + ws + i];
        if (sent == expected) continue;
        bad.push_back({i, j, sent, expected});
        ++party[static_cast<std::size_t>(i)];
        if (j != i) ++party[static_cast<std::size_t>(j)];
      }
    }
    if (!bad.empty()) {
      const int blame = static_cast<int>(std::max_element(party.begin(), party.end()) - party.begin());
      std::vector<int> in_every;
      for (int r = 0; r < ws; ++r) {
        if (party[static_cast<std::size_t>(r)] == static_cast<int>(bad.size())) in_every.push_back(r);
      }
      constexpr std::size_t kShown = 6;
      std::ostringstream os;
      os << "collective #" << seq << on << " (" << site_of(rec(first)) << "): all_to_all split sizes disagree: ";
      for (std::size_t k = 0; k < std::min(bad.size(), kShown); ++k) {
        const Pair& p = bad[k];
        os << (k ? "; " : "") << "rank " << G(p.from) << " sends " << p.sent << " elements to rank " << G(p.to)
           << ", which expects " << p.expected << " from rank " << G(p.from);
      }
      if (bad.size() > kShown) os << "; and " << bad.size() - kShown << " more pairs";
      if (in_every.size() == 1) {
        os << ": rank " << G(blame) << " is party to every disagreeing pair";
      } else if (in_every.empty()) {
        os << ": no rank is party to every disagreeing pair; rank " << G(blame) << " is party to the most ("
           << party[static_cast<std::size_t>(blame)] << " of " << bad.size() << ")";
      } else {
        os << ": " << names(in_every) << " are party to every disagreeing pair; blaming the lowest";
      }
      return Diagnosis{DiagnosisKind::kCollectiveMismatch, os.str(), G(blame), seq, rec(first)[kStep]};
    }
  }
  return std::nullopt;
}

std::optional<Diagnosis> skipped_collective(const Board& board, int me, std::int64_t issued, const CallSite& here,
                                            const std::string& failure, double wait_s) {
  const int ws = board.world_size();
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  auto ready = [&](int r) {
    const auto v = board.view(r);
    return v.issued > issued || v.state == RankState::kFinished || v.state == RankState::kFailed;
  };
  for (;;) {
    bool all = true;
    for (int r = 0; r < ws; ++r) all = all && (r == me || ready(r));
    if (all || std::chrono::steady_clock::now() > until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::vector<int> waiting;
  std::vector<std::int64_t> rec, first;
  for (int r = 0; r < ws; ++r) {
    if (r == me || !board.read_fingerprint(r, issued, rec)) continue;
    const bool passed = phase_of(rec.data()) == here.phase &&
                        std::pair(here.step, here.index) > std::pair(rec[kStep], rec[kIndex]);
    if (!passed) continue;
    if (waiting.empty()) first = rec;
    waiting.push_back(r);
  }
  if (waiting.empty()) return std::nullopt;
  std::ostringstream os;
  os << "collective #" << issued << ": rank " << me << " did not take part in the "
     << to_string(static_cast<Op>(first[kOp])) << " that " << rank_list(waiting) << " issued from "
     << site_of(first.data()) << "; it went past that call without issuing it, then failed: " << failure;
  return Diagnosis{DiagnosisKind::kMissingParticipant, os.str(), me, issued, first[kStep]};
}

std::optional<Diagnosis> check_p2p(const std::vector<std::int64_t>& sender, const Call& receiver,
                                   int group_receiver, const std::vector<int>* members) {
  const auto* s = sender.data();
  auto G = [&](std::int64_t r) {
    return members && r >= 0 && r < static_cast<std::int64_t>(members->size()) ? (*members)[static_cast<std::size_t>(r)]
                                                                               : static_cast<int>(r);
  };
  const int receiver_rank = G(group_receiver);
  const int peer = G(receiver.root);
  std::ostringstream os;
  if (static_cast<Op>(s[kOp]) != Op::kSend || s[kRoot] != group_receiver) {
    os << "p2p #" << receiver.seq << ": rank " << receiver_rank << " receives from rank " << peer
       << " but rank " << peer << " issued " << to_string(static_cast<Op>(s[kOp])) << " to rank "
       << G(s[kRoot]);
    return Diagnosis{DiagnosisKind::kMissingParticipant, os.str(), peer, receiver.seq, s[kStep]};
  }
  const bool same = s[kDType] == static_cast<std::int64_t>(receiver.in.dtype) &&
                    s[kCount] == receiver.in.count && s[kTag] == receiver.tag;
  if (!same) {
    os << "p2p #" << receiver.seq << " (" << site_of(s) << "): rank " << peer << " send "
       << to_string(static_cast<DType>(s[kDType])) << '[' << s[kCount] << "] tag=" << s[kTag]
       << ", rank " << receiver_rank << " recv " << to_string(receiver.in.dtype) << '['
       << receiver.in.count << "] tag=" << receiver.tag;
    return Diagnosis{DiagnosisKind::kCollectiveMismatch, os.str(), peer, receiver.seq, s[kStep]};
  }
  return std::nullopt;
}

namespace {

// Collects every rank's record of collective `seq` from the board into `gathered`, marking in
// `present` the ranks that have published it (a rank that has not compares when it gets
// there). Returns the number present.
int gather_from_board(const Board& board, int me, std::int64_t seq, const std::vector<std::int64_t>& mine,
                      std::vector<std::int64_t>& gathered, std::vector<bool>& present) {
  const int ws = board.world_size();
  const std::size_t w = mine.size();
  gathered.resize(w * static_cast<std::size_t>(ws));
  present.assign(static_cast<std::size_t>(ws), false);
  std::vector<std::int64_t> rec;
  int count = 0;
  for (int r = 0; r < ws; ++r) {
    const bool ok = r == me || board.read_fingerprint(r, seq, rec);
    const auto& src = (r == me || !ok) ? mine : rec;
    std::copy(src.begin(), src.end(), gathered.begin() + static_cast<std::ptrdiff_t>(w * static_cast<std::size_t>(r)));
    present[static_cast<std::size_t>(r)] = ok;
    count += ok;
  }
  return count;
}

class BoardPending final : public Pending {
 public:
  BoardPending(std::unique_ptr<PendingGuard> guard, std::unique_ptr<Pending> data, const Board& board,
               std::atomic<std::int64_t>& in_flight, std::vector<std::int64_t> record, int me, std::int64_t seq,
               double grace_s)
      : guard_(std::move(guard)), data_(std::move(data)), board_(board), in_flight_(in_flight),
        record_(std::move(record)), me_(me), seq_(seq), grace_s_(grace_s) {}
  void wait() override {
    std::exception_ptr failure;
    try {
      data_->wait();
    } catch (...) {
      failure = std::current_exception();
    }
    std::vector<std::int64_t> gathered;
    std::vector<bool> present;
    const int ws = board_.world_size();
    // After a failure the peers may not have published yet: give them a moment, since a
    // mismatch explains a failure better than the failure itself.
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s_);
    while (gather_from_board(board_, me_, seq_, record_, gathered, present) < ws && failure &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    in_flight_.store(-1);
    if (auto d = check_fingerprints(gathered, ws, &present)) {
      hold_engine_failures();
      throw DiagnosisError(*d);
    }
    guard_.reset();
    if (failure) std::rethrow_exception(failure);
  }

 private:
  std::unique_ptr<PendingGuard> guard_;
  std::unique_ptr<Pending> data_;
  const Board& board_;
  std::atomic<std::int64_t>& in_flight_;
  std::vector<std::int64_t> record_;
  int me_;
  std::int64_t seq_;
  double grace_s_;
};

}  // namespace

Verifier::Verifier(std::unique_ptr<Backend> inner, std::unique_ptr<Backend> control, Board* board,
                   std::function<void(const Diagnosis&)> on_async_diagnosis, double peer_grace_s,
                   std::vector<int> members)
    : inner_(std::move(inner)), control_(std::move(control)), board_(board),
      on_async_diagnosis_(std::move(on_async_diagnosis)), peer_grace_s_(peer_grace_s), members_(std::move(members)) {
  if (board_) watcher_ = std::thread([this] { watch(); });
}

Verifier::~Verifier() {
  stop_.store(true);
  if (watcher_.joinable()) watcher_.join();
}

void Verifier::watch() {
  const int me = inner_->rank();
  const int ws = inner_->world_size();
  std::vector<std::int64_t> mine, gathered;
  std::vector<bool> present;
  // A mismatch seen before every rank has published: when it was first seen, for which slot.
  std::int64_t partial_seq = -1;
  auto partial_since = std::chrono::steady_clock::now();
  while (!stop_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const std::int64_t seq = in_flight_.load();
    if (seq < 0 || !board_->read_fingerprint(me, seq, mine)) continue;
    const int count = gather_from_board(*board_, me, seq, mine, gathered, present);
    if (in_flight_.load() != seq) continue;  // completed meanwhile: the caller checks it
    if (auto d = check_fingerprints(gathered, ws, &present)) {
      // Ranks that have not published yet are only slower (a loaded machine): wait a little
      // for them, so that the diagnosis groups every rank and blames the real minority.
      if (count < ws) {
        if (partial_seq != seq) {
          partial_seq = seq;
          partial_since = std::chrono::steady_clock::now();
        }
        if (std::chrono::steady_clock::now() - partial_since < std::chrono::duration<double>(peer_grace_s_)) continue;
      }
      if (on_async_diagnosis_) on_async_diagnosis_(*d);
    } else if (count == ws && g_engine_failed.load()) {
      abort_if_engine_failed();
    }
  }
}

std::unique_ptr<Pending> Verifier::start_on_board(Call& call) {
  const int me = inner_->rank();
  std::vector<std::int64_t> rec = encode_fingerprint(call, inner_->world_size());
  board_->publish_fingerprint(me, call.seq, rec);
  auto guard = std::make_unique<PendingGuard>();
  in_flight_.store(call.seq);
  auto data = inner_->start(call);
  return std::make_unique<BoardPending>(std::move(guard), std::move(data), *board_, in_flight_, std::move(rec), me,
                                        call.seq, std::max(2.0, peer_grace_s_));
}

std::unique_ptr<Pending> Verifier::start(Call& call) {
  const int ws = inner_->world_size();
  const int me = inner_->rank();
  if (board_ && !is_p2p(call.op)) return start_on_board(call);
  if (call.op == Op::kSend) {
    std::vector<std::int64_t> rec = encode_fingerprint(call, ws);
    Call c;
    c.op = Op::kSend;
    c.in = i64_view(rec);
    c.root = call.root;
    c.tag = call.tag;
    auto control = control_->start(c);
    auto data = inner_->start(call);
    return std::make_unique<BothPending>(std::move(control), std::move(data), std::move(rec));
  }
  if (call.op == Op::kRecv) {
    auto guard = std::make_unique<PendingGuard>();
    auto data = inner_->start(call);
    auto pending = std::make_unique<VerifiedRecv>(std::move(guard), std::move(data), call, me, ws, members_);
    Call c;
    c.op = Op::kRecv;
    c.in = c.out = i64_view(pending->record());
    c.root = call.root;
    c.tag = call.tag;
    pending->set_control(control_->start(c), on_async_diagnosis_);
    return pending;
  }
  std::vector<std::int64_t> rec = encode_fingerprint(call, ws);
  std::vector<std::int64_t> gathered(rec.size() * static_cast<std::size_t>(ws));
  Call g;
  g.op = Op::kAllGather;
  g.in = i64_view(rec);
  g.out = i64_view(gathered);
  // The control all_gather is issued first so that it can complete even when the data
  // collective, issued with mismatched arguments, never does.
  auto guard = std::make_unique<PendingGuard>();
  auto control = control_->start(g);
  auto data = inner_->start(call);
  return std::make_unique<VerifiedPending>(std::move(guard), std::move(control), std::move(data), std::move(rec),
                                           std::move(gathered), ws, members_);
}

}  // namespace lockstep::comm
