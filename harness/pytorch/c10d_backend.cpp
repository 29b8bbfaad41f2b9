// _lockstep_c10d: a c10d backend named "lockstep" for PyTorch programs that lockstep did not
// write. Registered with torch.distributed.Backend.register_backend (lockstep_torch.py), it
// carries every collective the program issues, from Python or from C++ (DDP's reducer), through
// lockstep's own chain, built by the rank runtime (harness/rank/runtime.h) that lockstep's own
// ranks run in: Communicator -> Monitor (board, trace) -> Verifier -> ProcessGroupGloo. Nothing
// here fingerprints, compares or judges: the verifier, the runtime and the launcher do, exactly as
// for lockstep's own workloads. What this file adds is the translation (tensors to views) and the
// program's call site: the Python file:line that issued the collective, and its step (the number
// of DDP forward passes before it).
#include "lockstep/config.h"  // LOCKSTEP_TORCH_VERSION_MAJOR, first: it selects the headers below

#include <Python.h>
#include <frameobject.h>

#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#if LOCKSTEP_TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif
#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "harness/comm/board.h"
#include "harness/comm/c10d_interop.h"
#include "harness/comm/engines.h"
#include "harness/comm/verifier.h"
#include "harness/core/env.h"
#include "harness/core/error.h"
#include "harness/rank/runtime.h"

namespace py = pybind11;

namespace lockstep::pytorch {
namespace {

#if LOCKSTEP_TORCH_VERSION_MAJOR >= 2
using Base = ::c10d::Backend;  // 2.x: a ProcessGroup holds one Backend per device type
#else
using Base = ::c10d::ProcessGroup;  // 1.13: the creator returns the ProcessGroup itself
#endif

// The process's one rank runtime (harness/rank/runtime.h). A program verified by lockstep has one
// group: the default group of init_process_group. Deliberately never destroyed (as in rank_main.cpp):
// Gloo's worker threads may be blocked in a collective that a diagnosed peer will never join.
rank::Runtime* rt = nullptr;
std::mutex issue_mu;  // one collective at a time: the call site (phase, step, index) is shared
std::atomic<std::int64_t> program_step{-1};
bool finished = false;

// Frames in these files are PyTorch's or the interpreter's, not the program's.
bool is_program_file(const std::string& file) {
  if (file.empty() || file[0] == '<') return false;
  for (const char* lib : {"/torch/", "/site-packages/", "/dist-packages/", "/lib/python3", "lockstep_torch.py"}) {
    if (file.find(lib) != std::string::npos) return false;
  }
  return true;
}

// "train.py:57": the innermost frame of the program's own code on this thread's Python stack,
// "" when the calling thread runs no Python (an engine thread).
std::string program_site() {
  if (!Py_IsInitialized()) return "";
  const PyGILState_STATE gil = PyGILState_Ensure();
  std::string out;
  PyFrameObject* f = PyEval_GetFrame();
  Py_XINCREF(f);
  while (f && out.empty()) {
    PyCodeObject* code = PyFrame_GetCode(f);
    const char* file = PyUnicode_AsUTF8(code->co_filename);
    if (file && is_program_file(file)) {
      std::string name(file);
      name = name.substr(name.rfind('/') + 1);
      out = name + ":" + std::to_string(PyFrame_GetLineNumber(f));
    }
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(f);
    Py_DECREF(f);
    f = back;
  }
  Py_XDECREF(f);
  if (PyErr_Occurred()) PyErr_Clear();
  PyGILState_Release(gil);
  return out;
}

comm::DType dtype_of(const at::Tensor& t, const char* op) {
  switch (t.scalar_type()) {
    case at::kFloat: return comm::DType::kF32;
    case at::kDouble: return comm::DType::kF64;
    case at::kHalf: return comm::DType::kF16;
    case at::kBFloat16: return comm::DType::kBF16;
    case at::kChar: return comm::DType::kI8;
    case at::kByte: return comm::DType::kU8;
    case at::kBool: return comm::DType::kU8;
    case at::kInt: return comm::DType::kI32;
    case at::kLong: return comm::DType::kI64;
    default: break;
  }
  TORCH_CHECK(false, "lockstep backend: ", op, " of dtype ", t.scalar_type(), " is not supported");
}

comm::View view_of(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.device().is_cpu(), "lockstep backend: ", op, " got a tensor on ", t.device(),
              "; the wrapping backend carries CPU tensors over Gloo (NCCL programs: the NCCL profiler plugin)");
  TORCH_CHECK(t.is_contiguous(), "lockstep backend: ", op, " needs contiguous tensors");
  comm::View v;
  v.data = t.data_ptr();
  v.dtype = dtype_of(t, op);
  v.count = t.numel();
  return v;
}

const at::Tensor& only(const std::vector<at::Tensor>& ts, const char* op) {
  TORCH_CHECK(ts.size() == 1, "lockstep backend: ", op, " takes one tensor per call, got ", ts.size());
  return ts[0];
}

comm::ReduceOp reduce_of(const ::c10d::ReduceOp& op) {
  switch (static_cast<::c10d::ReduceOp::RedOpType>(op)) {
    case ::c10d::ReduceOp::SUM: return comm::ReduceOp::kSum;
    case ::c10d::ReduceOp::AVG: return comm::ReduceOp::kAvg;
    case ::c10d::ReduceOp::MIN: return comm::ReduceOp::kMin;
    case ::c10d::ReduceOp::MAX: return comm::ReduceOp::kMax;
    default: break;
  }
  TORCH_CHECK(false, "lockstep backend: reduce op ", static_cast<int>(static_cast<::c10d::ReduceOp::RedOpType>(op)),
              " is not supported (sum, avg, min and max are)");
}

// `call` at the program's call site: its file:line and step. A diagnosis ends the rank here
// (status file, exit 3), as in rank_main; so does an engine failure (exit 4), which the launcher
// treats as a consequence of another rank's failure.
void issue(comm::Call call) {
  const std::string site = program_site();
  std::lock_guard<std::mutex> lock(issue_mu);
  rt->communicator()->set_phase(site.empty() ? "program" : site);
  rt->communicator()->set_step(program_step.load());
  rt->carry(std::move(call));
}

// A finished operation (collectives run to completion in issue()), with the future DDP reads.
class DoneWork final : public ::c10d::Work {
 public:
  explicit DoneWork(std::vector<at::Tensor> outputs)
      : outputs_(std::move(outputs)),
        future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
    future_->markCompleted(c10::IValue(outputs_));
  }
  bool isCompleted() override { return true; }
  bool wait(std::chrono::milliseconds) override { return true; }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

c10::intrusive_ptr<::c10d::Work> done(std::vector<at::Tensor> outputs) {
  return c10::make_intrusive<DoneWork>(std::move(outputs));
}

class LockstepGroup final : public Base {
 public:
  LockstepGroup(int rank, int size) : Base(rank, size) {}
  const std::string getBackendName() const override { return "lockstep"; }

  c10::intrusive_ptr<::c10d::Work> broadcast(std::vector<at::Tensor>& ts, const ::c10d::BroadcastOptions& o) override {
    comm::Call c;
    c.op = comm::Op::kBroadcast;
    c.in = c.out = view_of(only(ts, "broadcast"), "broadcast");
    c.root = static_cast<int>(o.rootRank);
    issue(std::move(c));
    return done(ts);
  }

  c10::intrusive_ptr<::c10d::Work> allreduce(std::vector<at::Tensor>& ts, const ::c10d::AllreduceOptions& o) override {
    comm::Call c;
    c.op = comm::Op::kAllReduce;
    c.in = c.out = view_of(only(ts, "allreduce"), "allreduce");
    c.reduce = reduce_of(o.reduceOp);
    issue(std::move(c));
    return done(ts);
  }

  c10::intrusive_ptr<::c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outs, std::vector<at::Tensor>& ins,
                                            const ::c10d::AllgatherOptions&) override {
    const at::Tensor& in = only(ins, "allgather");
    TORCH_CHECK(outs.size() == 1 && static_cast<int>(outs[0].size()) == getSize(),
                "lockstep backend: allgather needs one output list of world_size tensors");
    at::Tensor flat = at::empty({getSize() * in.numel()}, in.options());
    comm::Call c;
    c.op = comm::Op::kAllGather;
    c.in = view_of(in, "allgather");
    c.out = view_of(flat, "allgather");
    issue(std::move(c));
    for (int r = 0; r < getSize(); ++r) outs[0][r].view({-1}).copy_(flat.narrow(0, r * in.numel(), in.numel()));
    return done(outs[0]);
  }

  c10::intrusive_ptr<::c10d::Work> _allgather_base(at::Tensor& out, at::Tensor& in, const ::c10d::AllgatherOptions&) override {
    comm::Call c;
    c.op = comm::Op::kAllGather;
    c.in = view_of(in, "_allgather_base");
    c.out = view_of(out, "_allgather_base");
    TORCH_CHECK(c.out.count == c.in.count * getSize(), "lockstep backend: _allgather_base output must hold world_size inputs");
    issue(std::move(c));
    return done({out});
  }

  c10::intrusive_ptr<::c10d::Work> alltoall_base(at::Tensor& out, at::Tensor& in, std::vector<int64_t>& out_splits,
                                                std::vector<int64_t>& in_splits, const ::c10d::AllToAllOptions&) override {
    const int ws = getSize();
    auto counts = [&](const at::Tensor& t, const std::vector<int64_t>& splits) {
      const std::int64_t rows = t.dim() ? t.size(0) : 1;
      const std::int64_t row = rows ? t.numel() / rows : 0;
      std::vector<std::int64_t> n(static_cast<std::size_t>(ws));
      for (int r = 0; r < ws; ++r) n[static_cast<std::size_t>(r)] = (splits.empty() ? rows / ws : splits[static_cast<std::size_t>(r)]) * row;
      return n;
    };
    comm::Call c;
    c.op = comm::Op::kAllToAll;
    c.in = view_of(in, "alltoall_base");
    c.out = view_of(out, "alltoall_base");
    c.send_counts = counts(in, in_splits);
    c.recv_counts = counts(out, out_splits);
    issue(std::move(c));
    return done({out});
  }

  c10::intrusive_ptr<::c10d::Work> barrier(const ::c10d::BarrierOptions&) override {
    comm::Call c;
    c.op = comm::Op::kBarrier;
    issue(std::move(c));
    return done({});
  }

  c10::intrusive_ptr<::c10d::Work> send(std::vector<at::Tensor>& ts, int dst, int tag) override {
    comm::Call c;
    c.op = comm::Op::kSend;
    c.in = view_of(only(ts, "send"), "send");
    c.root = dst;
    c.tag = tag;
    issue(std::move(c));
    return done(ts);
  }

  c10::intrusive_ptr<::c10d::Work> recv(std::vector<at::Tensor>& ts, int src, int tag) override {
    comm::Call c;
    c.op = comm::Op::kRecv;
    c.in = c.out = view_of(only(ts, "recv"), "recv");
    c.root = src;
    c.tag = tag;
    issue(std::move(c));
    return done(ts);
  }
};

// The creator torch.distributed calls for backend "lockstep": (store, rank, world_size, timeout).
// The engines rendezvous through the program's own store; the launcher's settings arrive in
// LOCKSTEP_* variables (scenarios/README.md, "Programs").
c10::intrusive_ptr<Base> create(const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size, const py::object&) {
  TORCH_CHECK(rt == nullptr,
              "lockstep backend: this program creates a second process group (new_group or a second "
              "init_process_group); lockstep verifies the default group only");
  comm::install_engine_failure_handler();
  rank::RankStatus initial;
  initial.program = true;
  rt = new rank::Runtime(rank, size, env::str(env::kStatus), std::move(initial), env::seconds(env::kTimeoutS, 60));
  const double engine_timeout = env::seconds(env::kEngineTimeoutS, 1800);
  const std::string mode = env::str(env::kVerify, "verify");
  TORCH_CHECK(mode == "verify" || mode == "record" || mode == "off",
              env::kVerify, " must be verify, record or off, got '", mode, "'");
  const std::string board = env::str(env::kBoard);
  TORCH_CHECK(rt->attach_board(board), "lockstep backend: the board ", board, " is not for ", size, " ranks, the program's group");
  comm::set_activity("creating process groups");
  const std::string host = env::is_loopback(env::str("MASTER_ADDR", "127.0.0.1")) ? "127.0.0.1" : "";
  auto lstore = comm::wrap_c10d_store(store);
  rank::ChainSpec spec;
  spec.engine = comm::make_gloo_backend(lstore, "lockstep-data/", rank, size, engine_timeout, host);
  spec.control = [=] { return comm::make_gloo_backend(lstore, "lockstep-control/", rank, size, engine_timeout, host); };
  spec.mode = mode == "verify" ? rank::VerifyMode::kVerify : mode == "record" ? rank::VerifyMode::kRecord : rank::VerifyMode::kOff;
  spec.trace_path = env::str(env::kTrace);
  rt->build(std::move(spec));
  comm::set_activity("running the program");
  return c10::make_intrusive<LockstepGroup>(rank, size);
}

// The program's steps and steps per second (lockstep_torch.py measures both): the rank's metrics.
std::map<std::string, double> program_metrics(std::int64_t steps, double steps_per_s) {
  std::map<std::string, double> m = {{"program_steps", static_cast<double>(steps)}};
  if (steps_per_s > 0) m["steps_per_s"] = steps_per_s;
  return m;
}

// Called at the program's exit (lockstep_torch.py's atexit hook). A clean exit meets the other
// ranks in one verified barrier, as lockstep's own ranks do, so that a rank that issued fewer
// collectives is named, then the ranks must agree on the DDP replicas' digest (`replica_digest`,
// -1: no DDP). `failure` (the program's uncaught exception) skips both, and is reported as
// missing_participant when the rank had passed a collective its peers wait in.

void finish(const std::string& failure, std::int64_t steps, double steps_per_s, std::int64_t replica_digest) {
  if (!rt) {
    // A program on its own backend (wrap = "none"): it only reports its steps.
    const std::string path = env::str(env::kStatus);
    if (!path.empty() && failure.empty()) {
      rank::RankStatus st;
      st.program = true;
      st.outcome = rank::Outcome::kOk;
      st.metrics = program_metrics(steps, steps_per_s);
      rank::Runtime(env::integer("RANK", 0), env::integer("WORLD_SIZE", 1), path, std::move(st), 60).settle();
    }
    return;
  }
  if (finished) return;
  py::gil_scoped_release nogil;
  finished = true;
  rank::RankStatus& st = rt->status();
  if (!failure.empty()) {
    if (auto d = rt->explain("error: " + failure)) rt->diagnosed(*d);
    st.outcome = rank::Outcome::kError;
    st.message = failure;
    rt->settle();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(issue_mu);
    rt->communicator()->set_phase("finalize");
    rt->communicator()->set_step(-1);
    comm::Call c;
    c.op = comm::Op::kBarrier;
    rt->carry(std::move(c));
    // DistributedDataParallel keeps its replicas identical (it broadcasts the parameters at
    // construction and every rank applies the same all-reduced gradients).
    if (replica_digest >= 0) {
      rt->check_same_value(replica_digest, "the DistributedDataParallel module's parameters differ between the ranks at the end of the program",
                           "DDP keeps its replicas identical; a rank's gradient all-reduce stopped, was skipped or differed");
    }
  }
  st.outcome = rank::Outcome::kOk;
  st.collectives = rt->collectives_issued();
  st.metrics = program_metrics(steps, steps_per_s);
  st.metrics["collectives"] = static_cast<double>(rt->collectives_issued());
  rt->settle();
}

}  // namespace
}  // namespace lockstep::pytorch

PYBIND11_MODULE(_lockstep_c10d, m) {
  using namespace lockstep::pytorch;
  m.doc() = "lockstep's c10d backend: a program's collectives through lockstep's recorder and verifier";
  py::module_::import("torch.distributed");  // registers c10d's Python classes (ProcessGroup, Store)
  py::class_<LockstepGroup, Base, c10::intrusive_ptr<LockstepGroup>>(m, "LockstepGroup");
  m.def("create", &create, py::arg("store"), py::arg("rank"), py::arg("world_size"), py::arg("timeout"));
  m.def("set_step", [](std::int64_t step) { program_step.store(step); });
  m.def("finish", &finish, py::arg("failure") = "", py::arg("steps") = 0, py::arg("steps_per_s") = 0.0,
        py::arg("replica_digest") = -1);
  m.def("program_site", &program_site);
  m.attr("torch_version") = LOCKSTEP_TORCH_VERSION;
}
