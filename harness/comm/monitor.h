#pragma once
// The recorder decorator. Numbers every call (collectives and p2p separately), publishes it on
// the progress board, and in record/verify mode appends one JSON line per call to the rank's
// trace file when it completes (or fails). Workloads never know it is there.
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "harness/comm/backend.h"
#include "harness/comm/board.h"
#include "harness/trace/record.h"

namespace lockstep::comm {

class Monitor final : public Backend {
 public:
  // `board` may be null (no launcher); `trace_path` "" disables the trace.
  Monitor(std::unique_ptr<Backend> inner, BoardSlot* board, const std::string& trace_path);
  // A monitor that appends to another's trace (`trace` null: none): a program's other process
  // groups, numbered apart, in the rank's one trace file. Each record is one write of one line.
  // Its records carry `trace_rank`, the rank's own (the group's rank is the engine's);
  // `group_key` is the group's board key, the same on every member (its p2p records carry it).
  Monitor(std::unique_ptr<Backend> inner, BoardSlot* board, std::shared_ptr<std::FILE> trace, int trace_rank,
          std::uint64_t group_key = 0);
  std::shared_ptr<std::FILE> trace_file() const { return trace_; }
  ~Monitor() override;

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  std::string name() const override { return inner_->name(); }
  std::unique_ptr<Pending> start(Call& call) override;

  std::int64_t collectives_issued() const { return next_seq_; }

 private:
  friend class MonitoredPending;
  void finish(const Call& call, std::int64_t t_start_us, bool ok, const std::string& error, std::int64_t p2p_id);

  std::unique_ptr<Backend> inner_;
  BoardSlot* board_;
  std::shared_ptr<std::FILE> trace_;
  int trace_rank_ = -1;  // -1: the engine's rank
  std::int64_t next_seq_ = 0;
  std::int64_t next_p2p_ = 0;
  std::uint64_t group_key_ = 0;
  // Point-to-point calls issued on this group per (op, peer, tag): each one's ordinal on the board.
  std::map<std::tuple<int, int, int>, std::int64_t> p2p_ordinals_;
};

// The trace record of `call` on `rank`, issued at `t_start_us` and done at `t_end_us`; `error`
// is null for a call that completed.
trace::Record trace_record(const Call& call, int rank, std::int64_t t_start_us, std::int64_t t_end_us,
                           const std::string* error);

// The trace record of flight-recorder entry `f` of `rank`, marked flight_recorder: a call that did
// not complete carries `error` ("failed", or "in flight when the rank ended", when it ends now).
trace::Record trace_record(int rank, const FlightView& f);

// Microseconds since the Unix epoch (comparable across processes on one machine).
std::int64_t now_us();

}  // namespace lockstep::comm
