#include "harness/comm/monitor.h"

#include <chrono>
#include <cstdio>

#include "harness/core/error.h"

namespace lockstep::comm {

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class MonitoredPending final : public Pending {
 public:
  MonitoredPending(Monitor* monitor, Call call, std::unique_ptr<Pending> inner, std::int64_t t0, std::int64_t p2p_id)
      : monitor_(monitor), call_(std::move(call)), inner_(std::move(inner)), t0_(t0), p2p_id_(p2p_id) {}
  void wait() override {
    try {
      inner_->wait();
    } catch (const std::exception& e) {
      monitor_->finish(call_, t0_, false, e.what(), p2p_id_);
      throw;
    }
    monitor_->finish(call_, t0_, true, "", p2p_id_);
  }

 private:
  Monitor* monitor_;
  Call call_;
  std::unique_ptr<Pending> inner_;
  std::int64_t t0_;
  std::int64_t p2p_id_;  // its number in the board's p2p_flight, -1 none
};

Monitor::Monitor(std::unique_ptr<Backend> inner, BoardSlot* board, const std::string& trace_path)
    : inner_(std::move(inner)), board_(board) {
  if (!trace_path.empty()) {
    std::FILE* f = std::fopen(trace_path.c_str(), "w");
    LOCKSTEP_CHECK(f != nullptr, "cannot write trace file ", trace_path);
    std::setvbuf(f, nullptr, _IOFBF, 1 << 20);
    trace_ = std::shared_ptr<std::FILE>(f, [](std::FILE* p) { std::fclose(p); });
  }
}

Monitor::Monitor(std::unique_ptr<Backend> inner, BoardSlot* board, std::shared_ptr<std::FILE> trace, int trace_rank,
                 std::uint64_t group_key)
    : inner_(std::move(inner)), board_(board), trace_(std::move(trace)), trace_rank_(trace_rank), group_key_(group_key) {}

Monitor::~Monitor() = default;

std::unique_ptr<Pending> Monitor::start(Call& call) {
  const bool p2p = is_p2p(call.op);
  call.seq = p2p ? next_p2p_++ : next_seq_++;
  const bool other_group = !call.group.empty();
  if (board_ && other_group) {
    // A call on another of the program's groups: progress, and where a hang leaves the rank.
    std::uint64_t mask = 0;
    for (int r : call.group) mask |= r >= 0 && r < 64 ? std::uint64_t{1} << r : 0;
    board_->group_op.store(static_cast<std::int32_t>(call.op), std::memory_order_relaxed);
    board_->group_mask.store(mask, std::memory_order_relaxed);
    board_->group_step.store(call.site.step, std::memory_order_relaxed);
    Board::store_phase(board_->group_phase, call.site.phase);
    board_->group_issued.fetch_add(1, std::memory_order_release);
  } else if (board_) {
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
  if (board_ && !p2p && !other_group) flight_issued(*board_, call.seq, call, t0);
  std::int64_t p2p_id = -1;
  if (board_ && p2p) {
    const bool mapped = other_group && call.peer >= 0 && static_cast<std::size_t>(call.peer) < call.group.size();
    const int peer = mapped ? call.group[static_cast<std::size_t>(call.peer)] : static_cast<int>(call.peer);
    const std::int64_t ordinal = p2p_ordinals_[{static_cast<int>(call.op), peer, call.tag}]++;
    p2p_id = p2p_issued(*board_, call, peer, ordinal, group_key_);
  }
  auto inner = inner_->start(call);
  return std::make_unique<MonitoredPending>(this, call, std::move(inner), t0, p2p_id);
}

void Monitor::finish(const Call& call, std::int64_t t_start_us, bool ok, const std::string& error, std::int64_t p2p_id) {
  if (board_ && p2p_id >= 0) p2p_done(*board_, p2p_id);
  if (board_ && !call.group.empty()) {
    if (ok) board_->group_completed.fetch_add(1, std::memory_order_release);
  } else if (board_ && ok && !is_p2p(call.op)) {
    board_->last_op.store(static_cast<std::int64_t>(call.op), std::memory_order_relaxed);
    board_->last_step.store(call.site.step, std::memory_order_relaxed);
    Board::store_phase(board_->last_phase, call.site.phase);
    // Calls in flight together may end out of order (an engine's worker threads): the count only grows.
    std::int64_t done = board_->completed.load(std::memory_order_relaxed);
    while (done < call.seq + 1 && !board_->completed.compare_exchange_weak(done, call.seq + 1, std::memory_order_release)) {
    }
  }
  if (board_ && !is_p2p(call.op) && call.group.empty()) flight_done(*board_, call.seq, ok, now_us());
  if (!trace_) return;
  std::string line;
  line.reserve(384);
  trace::append_line(line, trace_record(call, trace_rank_ >= 0 ? trace_rank_ : inner_->rank(), t_start_us, now_us(), ok ? nullptr : &error));
  // Buffered: flushed when the rank ends (normally, diagnosed, or by an injected crash). A rank
  // killed by the watchdog loses its unflushed tail; the flight recorder on the board keeps its
  // last BoardSlot::kFlightRing collectives, which the launcher adds to the trace.
  std::fwrite(line.data(), 1, line.size(), trace_.get());
}

trace::Record trace_record(const Call& call, int rank, std::int64_t t_start_us, std::int64_t t_end_us,
                           const std::string* error) {
  trace::Record r;
  r.rank = rank;
  r.seq = call.seq;
  r.kind = is_p2p(call.op) ? trace::kP2p : trace::kCollective;
  r.op = to_string(call.op);
  const OpTraits& t = traits(call.op);
  if (t.data) {
    std::size_t bytes = call.in.bytes();
    if (call.op == Op::kAllGather) bytes = call.out.bytes();
    if (call.op == Op::kAllToAll) {
      std::int64_t sent = 0;
      for (auto c : call.send_counts) sent += c;
      bytes = static_cast<std::size_t>(sent) * element_size(call.in.dtype);
    }
    r.dtype = to_string(call.in.dtype);
    r.count = call.in.count;
    r.device = to_string(call.in.device);
    r.bytes = static_cast<std::int64_t>(bytes);
  } else {
    r.bytes = 0;
  }
  if (t.reduces) r.reduce = to_string(call.reduce);
  for (std::size_t i = 0; i < call_fields().size(); ++i) {
    if (call_fields()[i].shown(call.op, call.*call_fields()[i].member)) r.*trace::kCallFieldMembers[i] = call.*call_fields()[i].member;
  }
  if (t.splits) {
    r.send_counts = call.send_counts;
    r.recv_counts = call.recv_counts;
  }
  if (!call.wire.empty()) r.wire = call.wire;
  if (!call.group.empty()) r.group = std::vector<std::int64_t>(call.group.begin(), call.group.end());
  r.phase = call.site.phase;
  r.step = call.site.step;
  r.index = call.site.index;
  r.t_start_us = t_start_us;
  r.t_end_us = t_end_us;
  if (error) r.error = *error;
  return r;
}

trace::Record trace_record(int rank, const FlightView& f) {
  trace::Record r;
  r.rank = rank;
  r.seq = f.seq;
  r.kind = trace::kCollective;
  r.op = to_string(f.op);
  if (traits(f.op).data) {
    r.dtype = to_string(f.dtype);
    r.count = f.count;
  }
  if (traits(f.op).reduces) r.reduce = to_string(f.reduce);
  r.phase = f.phase;
  r.step = f.step;
  r.index = f.index;
  r.flight_recorder = true;
  if (f.state != FlightState::kCompleted) {
    r.error = f.state == FlightState::kFailed ? "failed" : "in flight when the rank ended";
  }
  r.t_start_us = f.t_start_us;
  r.t_end_us = f.t_end_us ? f.t_end_us : now_us();
  return r;
}

}  // namespace lockstep::comm
