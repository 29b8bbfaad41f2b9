#include "harness/comm/verifier.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
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

// Receives whose sender's record has not been compared yet (VerifiedRecv).
std::atomic<int> g_recv_unchecked{0};

// The engine failed: the rank ends here. A receive given more bytes than its buffer holds fails
// the engine's transport thread, and its record may still be on its way over the control group:
// wait (2 s at most: the sender's record left before its data) for the receives still unchecked,
// so that a mismatch they find is named (its thread holds engine failures and ends the process)
// rather than lost in the abort.
void abort_if_engine_failed() {
  if (!g_engine_failed.load()) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (g_recv_unchecked.load() > 0 && !g_hold.load() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (g_hold.load()) {
    for (;;) ::pause();  // the thread that found the mismatch ends the process
  }
  std::fprintf(stderr, "terminate called after an uncaught exception in the engine: %s\n", g_engine_message);
  std::abort();
}


}  // namespace

// One collective's records on the control group: gathered, then compared once, by the caller's
// wait() or by the background checker.
struct Verifier::ControlCheck {
  std::unique_ptr<Pending> control;
  std::vector<std::int64_t> record;    // read by the control all_gather (moving keeps the buffer)
  std::vector<std::int64_t> gathered;  // written by it
  int ws = 0;
  const Verifier* verifier = nullptr;  // judges the records; it outlives the call
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::optional<Diagnosis> mismatch;
  std::exception_ptr failure;  // what the control all_gather threw (a peer died)

  void run() {
    std::optional<Diagnosis> m;
    std::exception_ptr f;
    try {
      control->wait();
      m = verifier->judge(gathered, ws, nullptr);
    } catch (...) {
      f = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mu);
    mismatch = std::move(m);
    failure = f;
    done = true;
    cv.notify_all();
  }
  void await() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [this] { return done; });
  }
};

// The background comparison: one thread per verifier, comparing the control group's records in
// the order the collectives were issued (the order their all_gathers complete in). A mismatch goes
// to `on_async`, which ends the process. The thread owns this state: it is detached when the
// verifier goes, and ends once the queue is empty.
struct Verifier::Checker {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::shared_ptr<ControlCheck>> queue;
  bool stop = false;
  std::function<void(const Diagnosis&)> on_async;

  void push(std::shared_ptr<ControlCheck> c) {
    std::lock_guard<std::mutex> lock(mu);
    queue.push_back(std::move(c));
    cv.notify_one();
  }
  static void loop(const std::shared_ptr<Checker>& self) {
    for (;;) {
      std::shared_ptr<ControlCheck> c;
      {
        std::unique_lock<std::mutex> lock(self->mu);
        self->cv.wait(lock, [&] { return self->stop || !self->queue.empty(); });
        if (self->queue.empty()) return;
        c = std::move(self->queue.front());
        self->queue.pop_front();
      }
      c->run();
      if (c->mismatch) {
        hold_engine_failures();
        self->on_async(*c->mismatch);
      }
    }
  }
};

namespace {

class VerifiedPending final : public Pending {
 public:
  VerifiedPending(std::unique_ptr<PendingGuard> guard, std::shared_ptr<Verifier::ControlCheck> check,
                  std::unique_ptr<Pending> data, bool in_background)
      : guard_(std::move(guard)), check_(std::move(check)), data_(std::move(data)), in_background_(in_background) {}
  void wait() override {
    if (in_background_) check_->await();
    else check_->run();
    if (check_->failure) std::rethrow_exception(check_->failure);
    if (check_->mismatch) {
      hold_engine_failures();
      throw DiagnosisError(*check_->mismatch);
    }
    abort_if_engine_failed();
    guard_.reset();
    data_->wait();
  }

 private:
  std::unique_ptr<PendingGuard> guard_;
  std::shared_ptr<Verifier::ControlCheck> check_;
  std::unique_ptr<Pending> data_;
  bool in_background_;
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
    std::atomic<bool> unchecked{true};  // counted in g_recv_unchecked until compared (or failed)
    State() { g_recv_unchecked.fetch_add(1); }
    ~State() { checked(); }
    void checked() {
      if (unchecked.exchange(false)) g_recv_unchecked.fetch_sub(1);
    }
    void verify() {
      try {
        control->wait();
      } catch (...) {
        checked();
        throw;
      }
      mismatch = check_p2p(record, call, rank, members.empty() ? nullptr : &members);
      if (!mismatch) checked();  // a mismatch stays counted until hold_engine_failures()
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

// Collects every member's record of collective `seq` from the board into `gathered`, marking in
// `present` the members that have published it (a member that has not compares when it gets
// there). Returns the number present.
int gather_from_board(const Verifier::BoardRecords& b, int ws, int me, std::int64_t seq, const std::vector<std::int64_t>& mine,
                      std::vector<std::int64_t>& gathered, std::vector<bool>& present) {
  const std::size_t w = mine.size();
  gathered.resize(w * static_cast<std::size_t>(ws));
  present.assign(static_cast<std::size_t>(ws), false);
  std::vector<std::int64_t> rec;
  int count = 0;
  for (int r = 0; r < ws; ++r) {
    const bool ok = r == me || b.read(r, seq, rec);
    const auto& src = (r == me || !ok) ? mine : rec;
    std::copy(src.begin(), src.begin() + static_cast<std::ptrdiff_t>(w),
              gathered.begin() + static_cast<std::ptrdiff_t>(w * static_cast<std::size_t>(r)));
    present[static_cast<std::size_t>(r)] = ok;
    count += ok;
  }
  return count;
}

class BoardPending final : public Pending {
 public:
  BoardPending(std::unique_ptr<PendingGuard> guard, std::unique_ptr<Pending> data, const Verifier& verifier,
               Verifier::InFlight& in_flight, std::vector<std::int64_t> record, int me, int ws, std::int64_t seq,
               double grace_s)
      : guard_(std::move(guard)), data_(std::move(data)), verifier_(verifier), in_flight_(in_flight),
        record_(std::move(record)), me_(me), ws_(ws), seq_(seq), grace_s_(grace_s) {}
  void wait() override {
    std::exception_ptr failure;
    try {
      data_->wait();
    } catch (...) {
      failure = std::current_exception();
    }
    std::vector<std::int64_t> gathered;
    std::vector<bool> present;
    // After a failure the peers may not have published yet: give them a moment, since a
    // mismatch explains a failure better than the failure itself.
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s_);
    while (gather_from_board(verifier_.board_records(), ws_, me_, seq_, record_, gathered, present) < ws_ && failure &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    in_flight_.remove(seq_);
    if (auto d = verifier_.judge(gathered, ws_, &present)) {
      hold_engine_failures();
      throw DiagnosisError(*d);
    }
    guard_.reset();
    if (failure) std::rethrow_exception(failure);
  }

 private:
  std::unique_ptr<PendingGuard> guard_;
  std::unique_ptr<Pending> data_;
  const Verifier& verifier_;
  Verifier::InFlight& in_flight_;
  std::vector<std::int64_t> record_;
  int me_, ws_;
  std::int64_t seq_;
  double grace_s_;
};

}  // namespace

Verifier::Verifier(std::unique_ptr<Backend> inner, std::unique_ptr<Backend> control, Board* board,
                   std::function<void(const Diagnosis&)> on_async_diagnosis, double peer_grace_s,
                   std::vector<int> members, bool check_in_background, std::uint64_t group_key)
    : inner_(std::move(inner)), control_(std::move(control)), board_(board),
      on_async_diagnosis_(std::move(on_async_diagnosis)), peer_grace_s_(peer_grace_s), members_(std::move(members)) {
  if (board_ && group_key) {
    // A program's other group: its records go in a ring of the board each member claims for it.
    const int me = inner_->rank();
    const int global = members_.empty() ? me : members_[static_cast<std::size_t>(me)];
    ring_ = board_->claim_group_ring(global, group_key);
    if (ring_ < 0) board_ = nullptr;  // every ring taken: through the control group
  }
  group_key_ = group_key;
  if (board_) watcher_ = std::thread([this] { watch(); });
  if (check_in_background && !board_ && on_async_diagnosis_) {
    checker_ = std::make_shared<Checker>();
    checker_->on_async = on_async_diagnosis_;
    std::thread([c = checker_] { Checker::loop(c); }).detach();
  }
}

Verifier::~Verifier() {
  stop_.store(true);
  if (watcher_.joinable()) watcher_.join();
  if (checker_) {
    std::lock_guard<std::mutex> lock(checker_->mu);
    checker_->stop = true;
    checker_->cv.notify_all();
  }
}

void Verifier::InFlight::add(std::int64_t seq) {
  std::lock_guard<std::mutex> lock(mu);
  seqs.push_back(seq);
}

void Verifier::InFlight::remove(std::int64_t seq) {
  std::lock_guard<std::mutex> lock(mu);
  seqs.erase(std::remove(seqs.begin(), seqs.end(), seq), seqs.end());
}

std::vector<std::int64_t> Verifier::InFlight::snapshot() {
  std::lock_guard<std::mutex> lock(mu);
  return seqs;
}

bool Verifier::BoardRecords::read(int pos, std::int64_t seq, std::vector<std::int64_t>& out) const {
  const int global = members->empty() ? pos : (*members)[static_cast<std::size_t>(pos)];
  const int r = key ? board->find_group_ring(global, key) : 0;
  return r >= 0 && board->read_fingerprint(global, seq, out, r);
}

Verifier::BoardRecords Verifier::board_records() const { return BoardRecords{board_, group_key_, &members_}; }

std::optional<Diagnosis> Verifier::judge(const std::vector<std::int64_t>& gathered, int ws, const std::vector<bool>* present) const {
  auto d = check_fingerprints(gathered, ws, present, members_.empty() ? nullptr : &members_);
  if (d && d->kind == DiagnosisKind::kMissingParticipant && explain_sites_) {
    auto sites = record_sites(gathered, ws);
    if (present) {
      for (std::size_t r = 0; r < sites.size(); ++r) {
        if (!(*present)[r]) sites[r] = CallSite{"", -2, -1};  // unknown: never matches a waiting rank
      }
    }
    if (auto better = explain_sites_(sites)) return better;
  }
  return d;
}

void Verifier::watch() {
  const int me = inner_->rank();
  const int ws = inner_->world_size();
  std::vector<std::int64_t> mine, gathered;
  std::vector<bool> present;
  const BoardRecords records = board_records();
  // A mismatch seen before every rank has published: when it was first seen, for which slot.
  std::int64_t partial_seq = -1;
  auto partial_since = std::chrono::steady_clock::now();
  while (!stop_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const std::vector<std::int64_t> in_flight = in_flight_.snapshot();
    bool all_agree = !in_flight.empty();  // every rank published every call in flight, alike
    for (const std::int64_t seq : in_flight) {  // the oldest first: the first call that differs is named
      if (!records.read(me, seq, mine)) {
        all_agree = false;
        continue;
      }
      mine.resize(fingerprint_words(ws));
      const int count = gather_from_board(records, ws, me, seq, mine, gathered, present);
      auto d = judge(gathered, ws, &present);
      if (!d) {
        all_agree = all_agree && count == ws;
        continue;
      }
      all_agree = false;
      const auto now_in_flight = in_flight_.snapshot();
      if (std::find(now_in_flight.begin(), now_in_flight.end(), seq) == now_in_flight.end()) break;  // its wait() checks it
      // Ranks that have not published yet are only slower (a loaded machine): wait a little
      // for them, so that the diagnosis groups every rank and blames the real minority.
      if (count < ws) {
        if (partial_seq != seq) {
          partial_seq = seq;
          partial_since = std::chrono::steady_clock::now();
        }
        if (std::chrono::steady_clock::now() - partial_since < std::chrono::duration<double>(peer_grace_s_)) break;
      }
      if (on_async_diagnosis_) on_async_diagnosis_(*d);
      break;
    }
    // The engine failed though the calls match: the failure is the rank's own.
    if (all_agree && g_engine_failed.load()) abort_if_engine_failed();
  }
}

std::unique_ptr<Pending> Verifier::start_on_board(Call& call) {
  const int me = inner_->rank();
  const int ws = inner_->world_size();
  std::vector<std::int64_t> rec = encode_fingerprint(call, ws);
  board_->publish_fingerprint(members_.empty() ? me : members_[static_cast<std::size_t>(me)], call.seq, rec, ring_);
  auto guard = std::make_unique<PendingGuard>();
  in_flight_.add(call.seq);
  auto data = inner_->start(call);
  return std::make_unique<BoardPending>(std::move(guard), std::move(data), *this, in_flight_, std::move(rec), me, ws,
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
    c.peer = call.peer;
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
    c.peer = call.peer;
    c.tag = kRecordTag;
    pending->set_control(control_->start(c), on_async_diagnosis_);
    return pending;
  }
  auto check = std::make_shared<ControlCheck>();
  check->record = encode_fingerprint(call, ws);
  check->gathered.resize(check->record.size() * static_cast<std::size_t>(ws));
  check->ws = ws;
  check->verifier = this;
  Call g;
  g.op = Op::kAllGather;
  g.in = i64_view(check->record);
  g.out = i64_view(check->gathered);
  // The control all_gather is issued first so that it can complete even when the data
  // collective, issued with mismatched arguments, never does.
  auto guard = std::make_unique<PendingGuard>();
  check->control = control_->start(g);
  if (checker_) checker_->push(check);
  auto data = inner_->start(call);
  return std::make_unique<VerifiedPending>(std::move(guard), std::move(check), std::move(data), checker_ != nullptr);
}

}  // namespace lockstep::comm
