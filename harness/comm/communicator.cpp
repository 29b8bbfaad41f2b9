#include "harness/comm/communicator.h"

#include "harness/core/error.h"

namespace lockstep::comm {

Communicator::Communicator(std::unique_ptr<Backend> top)
    : top_(std::move(top)), rank_(top_->rank()), world_size_(top_->world_size()) {}

Communicator::~Communicator() = default;

void Communicator::set_phase(std::string phase) {
  if (phase == site_.phase) return;
  site_.index = 0;
  site_.phase = std::move(phase);
  if (observer_) observer_(site_.phase, site_.step);
}

void Communicator::set_step(std::int64_t step) {
  if (step == site_.step) return;
  site_.index = 0;
  site_.step = step;
  if (observer_) observer_(site_.phase, site_.step);
}

std::unique_ptr<Pending> Communicator::start(Call call) {
  call.site = site_;
  ++site_.index;
  return top_->start(call);
}

std::unique_ptr<Pending> Communicator::start_at(Call call, const CallSite& site) {
  call.site = site;
  return top_->start(call);
}

void Communicator::all_reduce(View buf, ReduceOp op) {
  Call c;
  c.op = Op::kAllReduce;
  c.in = c.out = buf;
  c.reduce = op;
  start(std::move(c))->wait();
}

void Communicator::all_gather(View in, View out) {
  LOCKSTEP_CHECK(out.count == in.count * world_size_, "all_gather: output holds ", out.count,
                 " elements, needs ", in.count * world_size_);
  Call c;
  c.op = Op::kAllGather;
  c.in = in;
  c.out = out;
  start(std::move(c))->wait();
}

void Communicator::all_to_all(View in, std::vector<std::int64_t> send_counts, View out,
                              std::vector<std::int64_t> recv_counts) {
  LOCKSTEP_CHECK(static_cast<int>(send_counts.size()) == world_size_ &&
                     static_cast<int>(recv_counts.size()) == world_size_,
                 "all_to_all: split sizes must have world_size entries");
  Call c;
  c.op = Op::kAllToAll;
  c.in = in;
  c.out = out;
  c.send_counts = std::move(send_counts);
  c.recv_counts = std::move(recv_counts);
  start(std::move(c))->wait();
}

void Communicator::broadcast(View buf, int root) {
  Call c;
  c.op = Op::kBroadcast;
  c.in = c.out = buf;
  c.root = root;
  start(std::move(c))->wait();
}

void Communicator::barrier() {
  Call c;
  c.op = Op::kBarrier;
  start(std::move(c))->wait();
}

std::unique_ptr<Pending> Communicator::isend(View buf, int peer, int tag) {
  Call c;
  c.op = Op::kSend;
  c.in = buf;
  c.peer = peer;
  c.tag = tag;
  return start(std::move(c));
}

std::unique_ptr<Pending> Communicator::irecv(View buf, int peer, int tag) {
  Call c;
  c.op = Op::kRecv;
  c.in = c.out = buf;
  c.peer = peer;
  c.tag = tag;
  return start(std::move(c));
}

void Communicator::send(View buf, int peer, int tag) { isend(buf, peer, tag)->wait(); }
void Communicator::recv(View buf, int peer, int tag) { irecv(buf, peer, tag)->wait(); }

}  // namespace lockstep::comm
