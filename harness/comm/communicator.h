#pragma once
// What workloads call. Owns the decorator chain, and stamps every call with its call site
// (phase, step, index) so the verifier can tell a skipped collective from a changed one.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "harness/comm/backend.h"

namespace lockstep::comm {

class Communicator {
 public:
  explicit Communicator(std::unique_ptr<Backend> top);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  std::string backend_name() const { return top_->name(); }

  // The call site of subsequent calls. Changing either resets the per-site call index.
  void set_phase(std::string phase);
  void set_step(std::int64_t step);
  const std::string& phase() const { return site_.phase; }
  std::int64_t step() const { return site_.step; }
  // Where the next call will be issued from (its phase, step and index).
  const CallSite& site() const { return site_; }
  // Called with (phase, step) whenever either changes: the rank's cost accounting.
  void set_site_observer(std::function<void(const std::string&, std::int64_t)> observer) {
    observer_ = std::move(observer);
  }

  // Blocking collectives. Throw CommError on engine failure and DiagnosisError on a verified
  // mismatch; results are only visible in the buffers after a normal return.
  void all_reduce(View buf, ReduceOp op = ReduceOp::kSum);
  void all_gather(View in, View out);  // out.count == in.count * world_size
  void all_to_all(View in, std::vector<std::int64_t> send_counts, View out,
                  std::vector<std::int64_t> recv_counts);
  void broadcast(View buf, int root);
  void barrier();
  void send(View buf, int peer, int tag = 0);
  void recv(View buf, int peer, int tag = 0);
  // Non-blocking point-to-point, for rings where every rank both sends and receives.
  std::unique_ptr<Pending> isend(View buf, int peer, int tag = 0);
  std::unique_ptr<Pending> irecv(View buf, int peer, int tag = 0);

  // Issues `call` as given (site stamped here). For tests and fault-free replays.
  std::unique_ptr<Pending> start(Call call);
  // Issues `call` from `site` as given, leaving this communicator's own site and call index as they
  // are: a program's point-to-point call, which only its peer sees, so that it does not shift the
  // call index of the collectives every rank issues from one site.
  std::unique_ptr<Pending> start_at(Call call, const CallSite& site);

 private:
  std::unique_ptr<Backend> top_;
  int rank_;
  int world_size_;
  CallSite site_;
  std::function<void(const std::string&, std::int64_t)> observer_;
};


}  // namespace lockstep::comm
