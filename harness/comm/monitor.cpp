#include "harness/comm/monitor.h"

#include <chrono>

#include <nlohmann/json.hpp>

#include "harness/core/error.h"

namespace lockstep::comm {

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class MonitoredPending final : public Pending {
 public:
  MonitoredPending(Monitor* monitor, Call call, std::unique_ptr<Pending> inner, std::int64_t t0)
      : monitor_(monitor), call_(std::move(call)), inner_(std::move(inner)), t0_(t0) {}
  void wait() override {
    try {
      inner_->wait();
    } catch (const std::exception& e) {
      monitor_->finish(call_, t0_, false, e.what());
      throw;
    }
    monitor_->finish(call_, t0_, true, "");
  }

 private:
  Monitor* monitor_;
  Call call_;
  std::unique_ptr<Pending> inner_;
  std::int64_t t0_;
};

Monitor::Monitor(std::unique_ptr<Backend> inner, BoardSlot* board, const std::string& trace_path)
    : inner_(std::move(inner)), board_(board) {
  if (!trace_path.empty()) {
    trace_ = std::fopen(trace_path.c_str(), "w");
    LOCKSTEP_CHECK(trace_ != nullptr, "cannot write trace file ", trace_path);
  }
}

Monitor::~Monitor() {
  if (trace_) std::fclose(trace_);
}

std::unique_ptr<Pending> Monitor::start(Call& call) {
  const bool p2p = is_p2p(call.op);
  call.seq = p2p ? next_p2p_++ : next_seq_++;
  if (board_) {
    if (p2p) {
      board_->p2p.fetch_add(1, std::memory_order_relaxed);
    } else {
      board_->op.store(static_cast<std::int32_t>(call.op), std::memory_order_relaxed);
      board_->step.store(call.site.step, std::memory_order_relaxed);
      board_->index.store(call.site.index, std::memory_order_relaxed);
      Board::store_phase(board_->phase, call.site.phase);
      board_->issued.store(call.seq + 1, std::memory_order_release);
    }
  }
  const std::int64_t t0 = trace_ ? now_us() : 0;
  auto inner = inner_->start(call);
  return std::make_unique<MonitoredPending>(this, call, std::move(inner), t0);
}

void Monitor::finish(const Call& call, std::int64_t t_start_us, bool ok, const std::string& error) {
  if (board_ && ok && !is_p2p(call.op)) {
    board_->last_op.store(static_cast<std::int64_t>(call.op), std::memory_order_relaxed);
    board_->last_step.store(call.site.step, std::memory_order_relaxed);
    Board::store_phase(board_->last_phase, call.site.phase);
    board_->completed.store(call.seq + 1, std::memory_order_release);
  }
  if (!trace_) return;
  nlohmann::json j;
  j["rank"] = inner_->rank();
  j["seq"] = call.seq;
  j["kind"] = is_p2p(call.op) ? "p2p" : "collective";
  j["op"] = to_string(call.op);
  if (call.op != Op::kBarrier) {
    j["dtype"] = to_string(call.in.dtype);
    j["count"] = call.in.count;
    j["device"] = to_string(call.in.device);
    std::size_t bytes = call.in.bytes();
    if (call.op == Op::kAllGather) bytes = call.out.bytes();
    if (call.op == Op::kAllToAll) {
      std::int64_t sent = 0;
      for (auto c : call.send_counts) sent += c;
      bytes = static_cast<std::size_t>(sent) * element_size(call.in.dtype);
    }
    j["bytes"] = bytes;
  } else {
    j["bytes"] = 0;
  }
  if (call.op == Op::kAllReduce) j["reduce"] = to_string(call.reduce);
  if (call.op == Op::kBroadcast) j["root"] = call.root;
  if (is_p2p(call.op)) {
    j["peer"] = call.root;
    j["tag"] = call.tag;
  }
  if (call.op == Op::kAllToAll) {
    j["send_counts"] = call.send_counts;
    j["recv_counts"] = call.recv_counts;
  }
  if (!call.wire.empty()) j["wire"] = call.wire;
  j["phase"] = call.site.phase;
  j["step"] = call.site.step;
  j["index"] = call.site.index;
  j["t_start_us"] = t_start_us;
  j["t_end_us"] = now_us();
  if (!ok) j["error"] = error;
  const std::string line = j.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), trace_);
  std::fflush(trace_);
}

}  // namespace lockstep::comm
