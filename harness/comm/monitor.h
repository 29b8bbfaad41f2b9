#pragma once
// The recorder decorator. Numbers every call (collectives and p2p separately), publishes it on
// the progress board, and in record/verify mode appends one JSON line per call to the rank's
// trace file when it completes (or fails). Workloads never know it is there.
#include <cstdio>
#include <memory>
#include <string>

#include "harness/comm/backend.h"
#include "harness/comm/board.h"

namespace lockstep::comm {

class Monitor final : public Backend {
 public:
  // `board` may be null (no launcher); `trace_path` "" disables the trace.
  Monitor(std::unique_ptr<Backend> inner, BoardSlot* board, const std::string& trace_path);
  ~Monitor() override;

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  std::string name() const override { return inner_->name(); }
  std::unique_ptr<Pending> start(Call& call) override;

  std::int64_t collectives_issued() const { return next_seq_; }

 private:
  friend class MonitoredPending;
  void finish(const Call& call, std::int64_t t_start_us, bool ok, const std::string& error);

  std::unique_ptr<Backend> inner_;
  BoardSlot* board_;
  std::FILE* trace_ = nullptr;
  std::int64_t next_seq_ = 0;
  std::int64_t next_p2p_ = 0;
};

// Microseconds since the Unix epoch (comparable across processes on one machine).
std::int64_t now_us();

}  // namespace lockstep::comm
