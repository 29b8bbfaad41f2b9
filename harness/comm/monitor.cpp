#include "harness/comm/monitor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

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
    std::setvbuf(trace_, nullptr, _IOFBF, 1 << 20);
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
      if (call.site.step > board_->max_step.load(std::memory_order_relaxed)) board_->max_step.store(call.site.step, std::memory_order_relaxed);
      board_->index.store(call.site.index, std::memory_order_relaxed);
      Board::store_phase(board_->phase, call.site.phase);
      board_->issued.store(call.seq + 1, std::memory_order_release);
    }
  }
  const std::int64_t t0 = trace_ || board_ ? now_us() : 0;
  if (board_ && !p2p) flight_issued(*board_, call.seq, call, t0);
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
  if (board_ && !is_p2p(call.op)) flight_done(*board_, call.seq, ok, now_us());
  if (!trace_) return;
  // Formatted by hand: this runs once per call on the hot path (see bench/comm_bench.cpp).
  char buf[1024];
  int n = std::snprintf(buf, sizeof buf, "{\"rank\":%d,\"seq\":%lld,\"kind\":\"%s\",\"op\":\"%.*s\"",
                        inner_->rank(), static_cast<long long>(call.seq), is_p2p(call.op) ? "p2p" : "collective",
                        static_cast<int>(to_string(call.op).size()), to_string(call.op).data());
  auto append = [&](const char* fmt, auto... args) {
    if (n >= 0 && n < static_cast<int>(sizeof buf)) n += std::snprintf(buf + n, sizeof buf - static_cast<std::size_t>(n), fmt, args...);
  };
  if (call.op != Op::kBarrier) {
    std::size_t bytes = call.in.bytes();
    if (call.op == Op::kAllGather) bytes = call.out.bytes();
    if (call.op == Op::kAllToAll) {
      std::int64_t sent = 0;
      for (auto c : call.send_counts) sent += c;
      bytes = static_cast<std::size_t>(sent) * element_size(call.in.dtype);
    }
    append(",\"dtype\":\"%s\",\"count\":%lld,\"device\":\"%s\",\"bytes\":%zu", std::string(to_string(call.in.dtype)).c_str(),
           static_cast<long long>(call.in.count), std::string(to_string(call.in.device)).c_str(), bytes);
  } else {
    append(",\"bytes\":0");
  }
  if (call.op == Op::kAllReduce) append(",\"reduce\":\"%s\"", std::string(to_string(call.reduce)).c_str());
  if (call.op == Op::kBroadcast) append(",\"root\":%d", call.root);
  if (is_p2p(call.op)) append(",\"peer\":%d,\"tag\":%d", call.root, call.tag);
  std::string line(buf, static_cast<std::size_t>(std::min<int>(n, sizeof buf - 1)));
  nlohmann::json tail;  // rare or unbounded fields: split sizes, notes, names, errors
  if (call.op == Op::kAllToAll) {
    tail["send_counts"] = call.send_counts;
    tail["recv_counts"] = call.recv_counts;
  }
  if (!call.wire.empty()) tail["wire"] = call.wire;
  tail["phase"] = call.site.phase;
  if (!ok) tail["error"] = error;
  std::string rest = tail.dump();  // "{...}"
  line += ',';
  line.append(rest, 1, rest.size() - 2);
  std::snprintf(buf, sizeof buf, ",\"step\":%lld,\"index\":%lld,\"t_start_us\":%lld,\"t_end_us\":%lld}\n",
                static_cast<long long>(call.site.step), static_cast<long long>(call.site.index),
                static_cast<long long>(t_start_us), static_cast<long long>(now_us()));
  line += buf;
  // Buffered: flushed when the rank ends (normally, diagnosed, or by an injected crash). A rank
  // killed by the watchdog loses its unflushed tail; the flight recorder on the board keeps its
  // last BoardSlot::kFlightRing collectives, which the launcher adds to the trace.
  std::fwrite(line.data(), 1, line.size(), trace_);
}

}  // namespace lockstep::comm
