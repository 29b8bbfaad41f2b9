#include "harness/comm/faults.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <unistd.h>

#include "harness/comm/dtype.h"
#include "harness/core/error.h"

namespace lockstep::comm {
namespace {

struct SignalName {
  const char* name;
  int number;
};
constexpr SignalName kSignals[] = {{"SIGSEGV", SIGSEGV}, {"SIGABRT", SIGABRT}, {"SIGKILL", SIGKILL},
                                   {"SIGBUS", SIGBUS},   {"SIGFPE", SIGFPE},   {"SIGTERM", SIGTERM}};

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

}  // namespace

const std::vector<std::string>& comm_fault_kinds() {
  static const std::vector<std::string> kinds = {"dtype_mismatch", "count_mismatch",
                                                 "root_mismatch",  "skip_collective",
                                                 "crash",          "sleep",
                                                 "exit_early"};
  return kinds;
}

bool is_comm_fault(std::string_view kind) {
  for (const auto& k : comm_fault_kinds()) {
    if (k == kind) return true;
  }
  return false;
}

Fault parse_fault(const scenario::Injection& injection, int world_size) {
  const scenario::Config& c = injection.config;
  Fault f;
  const std::string& k = injection.kind;
  if (k == "dtype_mismatch") f.kind = Fault::Kind::kDtype;
  else if (k == "count_mismatch") f.kind = Fault::Kind::kCount;
  else if (k == "root_mismatch") f.kind = Fault::Kind::kRoot;
  else if (k == "skip_collective") f.kind = Fault::Kind::kSkip;
  else if (k == "crash") f.kind = Fault::Kind::kCrash;
  else if (k == "sleep") f.kind = Fault::Kind::kSleep;
  else if (k == "exit_early") f.kind = Fault::Kind::kExitEarly;
  else c.fail("kind", "not a communicator fault: '" + k + "'");

  (void)c.get_string("kind");
  const std::int64_t rank = c.get_int("rank");
  if (rank < 0 || rank >= world_size) {
    c.fail("rank", "must be in [0, " + std::to_string(world_size) + "), got " + std::to_string(rank));
  }
  f.rank = static_cast<int>(rank);
  f.step = c.get_int("step");
  if (f.step < 0) c.fail("step", "must be >= 0, got " + std::to_string(f.step));
  f.phase = c.get_string("phase", "");
  f.call = c.get_int("call", -1);
  if (c.has("op")) {
    const std::string op = c.get_string("op");
    f.op = op_from_string(op);
    if (!f.op) c.fail("op", "unknown op '" + op + "'");
  }
  switch (f.kind) {
    case Fault::Kind::kDtype: {
      const std::string d = c.get_string("dtype");
      auto dt = dtype_from_string(d);
      if (!dt) c.fail("dtype", "unknown dtype '" + d + "' (f32, f64, f16, bf16, i8, u8, i32, i64)");
      f.dtype = *dt;
      if (f.op && *f.op != Op::kAllReduce && *f.op != Op::kBroadcast && *f.op != Op::kAllGather) {
        c.fail("op", "dtype_mismatch applies to all_reduce, broadcast or all_gather");
      }
      break;
    }
    case Fault::Kind::kCount:
      f.delta = c.get_int("delta", 1);
      if (f.delta < 1) c.fail("delta", "must be >= 1 (elements removed from the call), got " + std::to_string(f.delta));
      break;
    case Fault::Kind::kRoot:
      f.root = static_cast<int>(c.get_int("root", -1));
      if (f.root < -1 || f.root >= world_size) c.fail("root", "out of range: " + std::to_string(f.root));
      f.op = Op::kBroadcast;
      break;
    case Fault::Kind::kCrash: {
      if (c.has("exit_code")) {
        f.exit_code = static_cast<int>(c.get_int("exit_code"));
        if (f.exit_code <= 0 || f.exit_code > 255 || f.exit_code == 2 || f.exit_code == 3 || f.exit_code == 4) {
          c.fail("exit_code", "must be in 1..255 and not 2, 3 or 4 (reserved), got " + std::to_string(f.exit_code));
        }
      } else {
        const std::string sig = c.get_string("signal", "SIGSEGV");
        for (const auto& s : kSignals) {
          if (sig == s.name) f.signal = s.number;
        }
        if (f.signal == 0) c.fail("signal", "unknown signal '" + sig + "' (SIGSEGV, SIGABRT, SIGKILL, SIGBUS, SIGFPE, SIGTERM)");
      }
      break;
    }
    case Fault::Kind::kSleep:
      f.seconds = c.get_double("seconds");
      if (f.seconds <= 0) c.fail("seconds", "must be > 0");
      break;
    case Fault::Kind::kSkip:
    case Fault::Kind::kExitEarly: break;
  }
  c.finish();
  return f;
}

FaultInjector::FaultInjector(std::unique_ptr<Backend> inner, std::vector<Fault> faults)
    : inner_(std::move(inner)) {
  for (auto& f : faults) {
    if (f.rank == inner_->rank()) faults_.push_back(std::move(f));
  }
  fired_.assign(faults_.size(), false);
}

std::unique_ptr<Pending> FaultInjector::start(Call& call) {
  for (std::size_t i = 0; i < faults_.size(); ++i) {
    const Fault& f = faults_[i];
    if (fired_[i] || f.step != call.site.step) continue;
    if (!f.phase.empty() && f.phase != call.site.phase) continue;
    if (f.call >= 0 && f.call != call.site.index) continue;
    if (f.op && *f.op != call.op) continue;
    if (f.kind == Fault::Kind::kDtype &&
        call.op != Op::kAllReduce && call.op != Op::kBroadcast && call.op != Op::kAllGather) {
      continue;
    }
    if (f.kind == Fault::Kind::kCount && (call.op == Op::kBarrier || call.op == Op::kAllToAll)) continue;
    fired_[i] = true;
    switch (f.kind) {
      case Fault::Kind::kSkip: return std::make_unique<Done>();
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
        std::this_thread::sleep_for(std::chrono::duration<double>(f.seconds));
        break;
      case Fault::Kind::kRoot:
        call.root = f.root >= 0 ? f.root : (call.root + 1) % inner_->world_size();
        break;
      case Fault::Kind::kCount:
        call.in.count = std::max<std::int64_t>(0, call.in.count - f.delta);
        if (call.op == Op::kAllGather) call.out.count = call.in.count * inner_->world_size();
        else if (call.op != Op::kSend && call.op != Op::kRecv) call.out.count = call.in.count;
        else call.out = call.in;
        break;
      case Fault::Kind::kDtype: {
        auto in_tmp = std::make_shared<HostBuffer>(f.dtype, call.in.count);
        convert(call.in, in_tmp->view());
        std::shared_ptr<HostBuffer> out_tmp;
        const View in_user = call.in;
        const View out_user = call.out;
        call.in = in_tmp->view();
        if (call.op == Op::kAllGather) {
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
