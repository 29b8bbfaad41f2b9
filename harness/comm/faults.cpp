#include "harness/comm/faults.h"

#include <algorithm>
#include <csignal>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <unistd.h>

#include "harness/comm/board.h"
#include "harness/comm/dtype.h"
#include "harness/core/error.h"

namespace lockstep::comm {
namespace {

// Converts a buffer to another dtype for the call, and back into the caller's buffer after.
class CastPending final : public Pending {
 public:
  CastPending(std::unique_ptr<Pending> inner, std::shared_ptr<HostBuffer> in_tmp,
              std::shared_ptr<HostBuffer> out_tmp, View in_user, View out_user)
      : inner_(std::move(inner)), in_tmp_(std::move(in_tmp)), out_tmp_(std::move(out_tmp)),
        in_user_(in_user), out_user_(out_user) {}
  void wait() override {
    inner_->wait();
    if (out_tmp_) {
      convert(out_tmp_->view(), out_user_);
    } else {
      convert(in_tmp_->view(), in_user_);
    }
  }

 private:
  std::unique_ptr<Pending> inner_;
  std::shared_ptr<HostBuffer> in_tmp_, out_tmp_;
  View in_user_, out_user_;
};

// Runs `after` once the call has completed.
class ThenPending final : public Pending {
 public:
  ThenPending(std::unique_ptr<Pending> inner, std::function<void()> after) : inner_(std::move(inner)), after_(std::move(after)) {}
  void wait() override {
    inner_->wait();
    after_();
  }

 private:
  std::unique_ptr<Pending> inner_;
  std::function<void()> after_;
};

}  // namespace

const std::vector<std::string>& comm_fault_kinds() {
  static const std::vector<std::string> kinds = {"dtype_mismatch",  "count_mismatch", "root_mismatch",
                                                 "reduce_mismatch", "split_mismatch", "corrupt_output",
                                                 "skip_collective", "crash",          "sleep",
                                                 "exit_early",      "slow_rank"};
  return kinds;
}

bool is_comm_fault(std::string_view kind) {
  for (const auto& k : comm_fault_kinds()) {
    if (k == kind) return true;
  }
  return false;
}

bool applies_to(const Fault& f, Op op) {
  switch (f.kind) {
    case Fault::Kind::kDtype:
    case Fault::Kind::kCount: return op != Op::kBarrier;
    case Fault::Kind::kRoot: return traits(op).rooted;
    case Fault::Kind::kReduce: return traits(op).reduces;
    case Fault::Kind::kSplit: return traits(op).splits;
    case Fault::Kind::kCorrupt: return op != Op::kBarrier && op != Op::kSend;
    case Fault::Kind::kSkip:
    case Fault::Kind::kCrash:
    case Fault::Kind::kSleep:
    case Fault::Kind::kSlowRank:
    case Fault::Kind::kExitEarly: return true;
  }
  return true;
}

std::string describe_target(const Fault& f) {
  std::string s;
  auto add = [&](const std::string& part) { s += (s.empty() ? "" : ", ") + part; };
  if (!f.phase.empty()) add("phase " + f.phase);
  if (f.step >= 0) add("step " + std::to_string(f.step));
  if (f.call >= 0) add("call " + std::to_string(f.call));
  if (f.op) add("op " + std::string(to_string(*f.op)));
  return s.empty() ? "any call" : s;
}

namespace {

// Does what a crash, sleep or exit fault does; returns only after a sleep.
void act(const Fault& f) {
  mark_fired(f.index);
  switch (f.kind) {
    case Fault::Kind::kCrash:
      std::fflush(nullptr);
      if (f.signal != 0) {
        std::signal(f.signal, SIG_DFL);
        std::raise(f.signal);
      }
      std::_Exit(f.exit_code);
    case Fault::Kind::kExitEarly:
      std::fflush(nullptr);
      std::_Exit(0);
    case Fault::Kind::kSleep:
    case Fault::Kind::kSlowRank:
      std::this_thread::sleep_for(std::chrono::duration<double>(f.seconds));
      return;
    default: return;
  }
}

}  // namespace

void fire_startup_faults(const std::vector<Fault>& faults, int rank) {
  for (const auto& f : faults) {
    if (f.rank == rank && f.phase == "startup") act(f);
  }
}


FaultInjector::FaultInjector(std::unique_ptr<Backend> inner, std::vector<Fault> faults)
    : inner_(std::move(inner)) {
  for (auto& f : faults) {
    if (f.rank == inner_->rank() && f.phase != "startup") faults_.push_back(std::move(f));
  }
  fired_.assign(faults_.size(), false);
  slow_step_.assign(faults_.size(), -1);
}

namespace {

// The peer of an all_to_all whose split can give up `delta` elements, or -1.
int donor(const std::vector<std::int64_t>& counts, std::int64_t delta) {
  for (std::size_t j = 0; j < counts.size(); ++j) {
    if (counts[j] >= delta) return static_cast<int>(j);
  }
  return -1;
}

}  // namespace

std::unique_ptr<Pending> FaultInjector::start(Call& call) {
  const int ws = inner_->world_size();
  for (std::size_t i = 0; i < faults_.size(); ++i) {
    const Fault& f = faults_[i];
    if (fired_[i]) continue;
    if (f.step >= 0 && f.step != call.site.step) continue;
    if (!f.phase.empty() && f.phase != call.site.phase) continue;
    if (f.call >= 0 && f.call != call.site.index) continue;
    if (f.op && *f.op != call.op) continue;
    if (f.kind == Fault::Kind::kSlowRank) {
      // Every step, not once: the first matching call of each step waits `seconds`.
      if (call.site.step < 0 || slow_step_[i] == call.site.step) continue;
      slow_step_[i] = call.site.step;
      act(f);
      continue;
    }
    if (!applies_to(f, call.op)) continue;
    // Faults that need elements to take away wait for a call that has them.
    if (f.kind == Fault::Kind::kCount && call.op == Op::kAllToAll && donor(call.send_counts, f.delta) < 0) continue;
    if (f.kind == Fault::Kind::kSplit && donor(call.send_counts, f.delta) < 0) continue;
    if (f.kind == Fault::Kind::kCount && call.op != Op::kAllToAll && call.in.count < f.delta) continue;
    if (f.kind == Fault::Kind::kCorrupt && (call.out.device != DeviceType::kCpu || call.out.count <= std::max<std::int64_t>(f.element, 0))) continue;
    fired_[i] = true;
    switch (f.kind) {
      case Fault::Kind::kSkip: mark_fired(f.index); return std::make_unique<Done>();
      case Fault::Kind::kCrash:
      case Fault::Kind::kExitEarly:
      case Fault::Kind::kSleep: act(f); break;
      case Fault::Kind::kRoot:
        mark_fired(f.index);
        call.root = f.root >= 0 ? f.root : (call.root + 1) % ws;
        break;
      case Fault::Kind::kCorrupt: {
        // The engine's result is wrong on this rank (PyTorch #125874: a bf16 all_gather that
        // returned wrong values): one output element is off by one after the call completes.
        mark_fired(f.index);
        const View out = call.out;
        const std::int64_t at = f.element >= 0 ? f.element : out.count - 1;
        return std::make_unique<ThenPending>(inner_->start(call), [out, at] { store_from_double(out, at, load_as_double(out, at) + 1); });
      }
      case Fault::Kind::kReduce:
        mark_fired(f.index);
        call.reduce = f.reduce ? *f.reduce : call.reduce == ReduceOp::kSum ? ReduceOp::kMax : ReduceOp::kSum;
        break;
      case Fault::Kind::kSplit: {
        mark_fired(f.index);
        const int from = donor(call.send_counts, f.delta);
        const int to = (from + 1) % ws;
        call.send_counts[static_cast<std::size_t>(from)] -= f.delta;
        call.send_counts[static_cast<std::size_t>(to)] += f.delta;
        break;
      }
      case Fault::Kind::kCount:
        mark_fired(f.index);
        if (call.op == Op::kAllToAll) {
          call.send_counts[static_cast<std::size_t>(donor(call.send_counts, f.delta))] -= f.delta;
          call.in.count -= f.delta;
        } else {
          call.in.count -= f.delta;
          if (call.op == Op::kAllGather) call.out.count = call.in.count * ws;
          else if (call.op != Op::kSend && call.op != Op::kRecv) call.out.count = call.in.count;
          else call.out = call.in;
        }
        break;
      case Fault::Kind::kDtype: {
        mark_fired(f.index);
        auto in_tmp = std::make_shared<HostBuffer>(f.dtype, call.in.count);
        convert(call.in, in_tmp->view());
        std::shared_ptr<HostBuffer> out_tmp;
        const View in_user = call.in;
        const View out_user = call.out;
        call.in = in_tmp->view();
        if (call.op == Op::kAllGather || call.op == Op::kAllToAll) {
          out_tmp = std::make_shared<HostBuffer>(f.dtype, call.out.count);
          call.out = out_tmp->view();
        } else {
          call.out = call.in;
        }
        auto inner = inner_->start(call);
        return std::make_unique<CastPending>(std::move(inner), in_tmp, out_tmp, in_user, out_user);
      }
    }
  }
  return inner_->start(call);
}

}  // namespace lockstep::comm
