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

// The tag of every p2p record on the control group, whatever the call's own: a receiver that
// expects another tag than the sender's still gets the sender's record, and names the tag, instead
// of both waiting. (Records then pair in the order each side posts them: a program that receives
// tags out of the order they were sent is not supported.)
constexpr int kRecordTag = 0;

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
    c.tag = kRecordTag;
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
    c.tag = kRecordTag;
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
