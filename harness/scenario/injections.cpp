#include "harness/scenario/injections.h"

#include <csignal>
#include <cstdio>
#include <string>

#include "harness/comm/dtype.h"
#include "harness/core/error.h"

namespace lockstep::scenario {
namespace {

// The signals a crash fault may raise.
struct SignalName {
  const char* name;
  int number;
};
constexpr SignalName kSignals[] = {{"SIGSEGV", SIGSEGV}, {"SIGABRT", SIGABRT}, {"SIGKILL", SIGKILL},
                                   {"SIGBUS", SIGBUS},   {"SIGFPE", SIGFPE},   {"SIGTERM", SIGTERM}};

}  // namespace

comm::Fault parse_fault(const Injection& injection, int world_size) {
  const Config& c = injection.config;
  comm::Fault f;
  f.index = injection.index;
  const std::string& k = injection.kind;
  if (k == "dtype_mismatch") f.kind = comm::Fault::Kind::kDtype;
  else if (k == "count_mismatch") f.kind = comm::Fault::Kind::kCount;
  else if (k == "root_mismatch") f.kind = comm::Fault::Kind::kRoot;
  else if (k == "reduce_mismatch") f.kind = comm::Fault::Kind::kReduce;
  else if (k == "split_mismatch") f.kind = comm::Fault::Kind::kSplit;
  else if (k == "corrupt_output") f.kind = comm::Fault::Kind::kCorrupt;
  else if (k == "skip_collective") f.kind = comm::Fault::Kind::kSkip;
  else if (k == "crash") f.kind = comm::Fault::Kind::kCrash;
  else if (k == "sleep") f.kind = comm::Fault::Kind::kSleep;
  else if (k == "exit_early") f.kind = comm::Fault::Kind::kExitEarly;
  else if (k == "slow_rank") f.kind = comm::Fault::Kind::kSlowRank;
  else c.fail("kind", "not a communicator fault: '" + k + "'");

  (void)c.get_string("kind");
  const std::int64_t rank = c.get_int("rank");
  if (rank < 0 || rank >= world_size) {
    c.fail("rank", "must be in [0, " + std::to_string(world_size) + "), got " + std::to_string(rank));
  }
  f.rank = static_cast<int>(rank);
  f.step = c.get_int("step", -1);
  if (c.has("step") && f.step < 0) c.fail("step", "must be >= 0 (omit it to match any step), got " + std::to_string(f.step));
  f.phase = c.get_string("phase", "");
  f.call = c.get_int("call", -1);
  if (c.has("call") && f.call < 0) c.fail("call", "must be >= 0, got " + std::to_string(f.call));
  if (c.has("op")) {
    const std::string op = c.get_string("op");
    f.op = comm::op_from_string(op);
    if (!f.op) c.fail("op", "unknown op '" + op + "' (all_reduce, all_gather, all_to_all, broadcast, barrier, send, recv)");
  }
  const bool startup = f.phase == "startup";
  if (startup) {
    if (f.kind != comm::Fault::Kind::kCrash && f.kind != comm::Fault::Kind::kSleep && f.kind != comm::Fault::Kind::kExitEarly) {
      c.fail("phase", "phase 'startup' is before the first collective: only crash, sleep and exit_early can fire there");
    }
    for (const char* key : {"step", "call", "op"}) {
      if (c.has(key)) c.fail(key, "phase 'startup' has no collectives to match: remove " + std::string(key));
    }
  }
  switch (f.kind) {
    case comm::Fault::Kind::kDtype: {
      const std::string d = c.get_string("dtype");
      auto dt = comm::dtype_from_string(d);
      if (!dt) c.fail("dtype", "unknown dtype '" + d + "' (f32, f64, f16, bf16, i8, u8, i32, i64)");
      f.dtype = *dt;
      break;
    }
    case comm::Fault::Kind::kCount:
      f.delta = c.get_int("delta", 1);
      if (f.delta < 1) c.fail("delta", "must be >= 1 (elements removed from the call), got " + std::to_string(f.delta));
      break;
    case comm::Fault::Kind::kSplit:
      f.delta = c.get_int("delta", 1);
      if (f.delta < 1) c.fail("delta", "must be >= 1 (elements moved from one peer's split to the next), got " + std::to_string(f.delta));
      if (world_size < 2) c.fail("kind", "split_mismatch needs world_size >= 2 (a split to move elements between)");
      if (!f.op) f.op = comm::Op::kAllToAll;
      break;
    case comm::Fault::Kind::kCorrupt:
      f.element = c.get_int("element", -1);
      if (f.element < -1) c.fail("element", "must be >= 0 (or -1 for the last element), got " + std::to_string(f.element));
      break;
    case comm::Fault::Kind::kRoot:
      f.root = static_cast<int>(c.get_int("root", -1));
      if (f.root < -1 || f.root >= world_size) c.fail("root", "out of range: " + std::to_string(f.root));
      if (world_size < 2 && f.root < 0) c.fail("kind", "root_mismatch needs world_size >= 2 (another root to pick)");
      if (!f.op) f.op = comm::Op::kBroadcast;
      break;
    case comm::Fault::Kind::kReduce:
      if (c.has("reduce")) {
        const std::string r = c.get_string("reduce");
        f.reduce = comm::reduce_op_from_string(r);
        if (!f.reduce || *f.reduce == comm::ReduceOp::kAvg || !comm::is_arithmetic(*f.reduce)) c.fail("reduce", "unknown reduce op '" + r + "' (sum, max, min)");
      }
      if (!f.op) f.op = comm::Op::kAllReduce;
      break;
    case comm::Fault::Kind::kCrash: {
      if (c.has("exit_code")) {
        f.exit_code = static_cast<int>(c.get_int("exit_code"));
        if (f.exit_code <= 0 || f.exit_code > 255 || (f.exit_code >= 2 && f.exit_code <= 5)) {
          c.fail("exit_code", "must be in 1..255 and not 2 to 5 (reserved), got " + std::to_string(f.exit_code));
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
    case comm::Fault::Kind::kSleep:
      f.seconds = c.get_double("seconds");
      if (!(f.seconds > 0)) c.fail("seconds", "must be > 0");
      break;
    case comm::Fault::Kind::kSlowRank:
      f.seconds = c.get_double("seconds");
      if (!(f.seconds > 0 && f.seconds <= 60)) c.fail("seconds", "must be in (0, 60] (the sleep before each step's first matching call)");
      if (c.has("step")) c.fail("step", "slow_rank slows every step: match a phase, call or op instead");
      break;
    case comm::Fault::Kind::kSkip:
    case comm::Fault::Kind::kExitEarly: break;
  }
  if (f.op && !comm::applies_to(f, *f.op)) {
    c.fail("op", k + " cannot change a " + std::string(comm::to_string(*f.op)) + " call" +
                     (f.kind == comm::Fault::Kind::kRoot     ? " (only broadcast has a root)"
                      : f.kind == comm::Fault::Kind::kReduce ? " (only all_reduce has a reduce op)"
                      : f.kind == comm::Fault::Kind::kSplit  ? " (only all_to_all has split sizes)"
                      : f.kind == comm::Fault::Kind::kCorrupt ? " (it has no output)"
                                                       : " (a barrier carries no data)"));
  }
  c.finish();
  return f;
}

perf::Slowdown parse_slowdown(const Injection& injection, int world_size) {
  const auto& c = injection.config;
  (void)c.get_string("kind");
  perf::Slowdown s;
  s.percent = c.get_double("percent");
  if (!(s.percent > 0 && s.percent <= 1000)) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", s.percent);
    c.fail("percent", std::string("must be in (0, 1000], got ") + got);
  }
  s.phase = c.get_string("phase", "");
  if (c.has("phase") && s.phase.empty()) c.fail("phase", "must not be empty (omit it for every phase)");
  if (c.has("rank")) {
    const std::int64_t r = c.get_int("rank");
    if (r < 0 || r >= world_size) c.fail("rank", "must be in [0, " + std::to_string(world_size) + "), got " + std::to_string(r));
    s.rank = static_cast<int>(r);
  }
  return s;
}

}  // namespace lockstep::scenario
