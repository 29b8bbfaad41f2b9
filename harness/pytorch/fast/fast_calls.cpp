// lockstep_fast: the program's most frequent collectives (a one-tensor all_reduce or broadcast,
// all_to_all_single, all_gather_single, reduce_scatter_single) begun in lockstep's chain and
// started on the program's own group with no Python between them, and their Work, ended (ls_end)
// when the program waits for it, finds it completed or its future completes. Built against the
// torch the program imports, by harness/pytorch/python/lockstep_torch/fast.py (torch >= 2.11; the
// methods it calls are the same virtuals in 2.14.1 and 2.15.0); the Python group (groups.py) calls
// it first and takes its own path when a function here returns None (a call it does not describe
// the same way: non-contiguous, an unknown dtype or reduce op, several tensors). What it hands
// liblockstep_program.so is exactly what runtime.describe would (same ls_call, same fields).
#include <torch/extension.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <array>
#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "harness/pytorch/program.h"

namespace py = pybind11;

namespace {

using BeginFn = std::int64_t (*)(int, const ls_call*, const char*, std::int64_t);
using EndFn = int (*)(std::int64_t, const char*);

// What fast.py hands over once (init): liblockstep_program.so's two entry points and its codes.
struct Codes {
  BeginFn begin = nullptr;
  EndFn end = nullptr;
  std::vector<std::int64_t> field_nones;  // ls_call's fields, each at the table's `none`
  int root_field = -1;
  std::int32_t all_reduce = -1, broadcast = -1, all_to_all = -1, all_gather = -1, reduce_scatter = -1;
  std::int32_t sum = -1;                   // what a call that reduces nothing carries (describe's default)
  std::array<std::int32_t, 64> dtype{};    // by at::ScalarType; -1: not one lockstep describes
  std::array<std::int32_t, 16> reduce{};   // by c10d::ReduceOp::RedOpType; -1: unverified
};
Codes codes;

class EndedWork;
// The Works begun here and not yet ended: settle() and the room before a begin count them with the
// Python side's (runtime.outstanding).
std::mutex outstanding_mu;
std::vector<c10::intrusive_ptr<EndedWork>> outstanding;
std::atomic<std::int64_t> begun{0};  // the collectives begun here (the rank's fast_calls metric)

// The program's Work for a collective begun as `id`: completes as the program's own, and is ended
// (ls_end: checked, its end traced; a diagnosis ends the process) once, by whichever of the
// program's wait, a completed poll or the future's completion comes first.
class EndedWork final : public c10d::Work {
 public:
  EndedWork(c10::intrusive_ptr<c10d::Work> real, std::int64_t id) : real_(std::move(real)), id_(id) {}

  bool wait(std::chrono::milliseconds timeout) override {
    bool out = false;
    try {
      out = real_->wait(timeout);
    } catch (const std::exception& e) {
      if (timeout != kNoTimeout && !real_->isCompleted()) throw;  // the program's own timeout
      finish(e.what());
      throw;
    }
    finish("");
    return out;
  }
  bool isCompleted() override {
    const bool done = real_->isCompleted();
    if (done && !ended_.load()) {
      try {
        wait(kNoTimeout);
      } catch (...) {  // finish has handed the failure to lockstep
      }
    }
    return done;
  }
  bool isSuccess() const override { return real_->isSuccess(); }
  std::exception_ptr exception() const override { return real_->exception(); }
  int sourceRank() const override { return real_->sourceRank(); }
  std::vector<at::Tensor> result() override { return real_->result(); }
  void synchronize() override { real_->synchronize(); }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    c10::intrusive_ptr<EndedWork> self = c10::intrusive_ptr<EndedWork>::reclaim_copy(this);
    auto future = real_->getFuture();
    return future->then(
        [self](c10::ivalue::Future& f) -> c10::IValue {
          if (f.hasError()) {
            self->finish(f.tryRetrieveErrorMessage());
            std::rethrow_exception(f.exception_ptr());
          }
          self->finish("");
          return f.value();
        },
        future->elementType());
  }
  bool ended() const { return ended_.load(); }

  void finish(const std::string& failure) {
    if (ended_.exchange(true)) return;
    {
      std::lock_guard<std::mutex> lock(outstanding_mu);
      for (auto it = outstanding.begin(); it != outstanding.end(); ++it) {
        if (it->get() == this) {
          outstanding.erase(it);
          break;
        }
      }
    }
    codes.end(id_, failure.c_str());  // a diagnosis or an engine failure ends the process here
  }

 private:
  c10::intrusive_ptr<c10d::Work> real_;
  std::int64_t id_;
  std::atomic<bool> ended_{false};
};

// A call as runtime.describe makes it, for one tensor (and its output).
struct Described {
  ls_call c{};
  std::vector<std::int64_t> fields;
  std::vector<std::int64_t> send, recv;
};

bool describe_tensor(const at::Tensor& t, std::int32_t& dtype, void*& data, std::int64_t& count, std::int32_t& device) {
  if (!t.is_contiguous()) return false;
  const auto st = static_cast<std::size_t>(t.scalar_type());
  if (st >= codes.dtype.size() || codes.dtype[st] < 0) return false;
  dtype = codes.dtype[st];
  data = t.data_ptr();
  count = t.numel();
  if (t.is_cuda()) device = 1;
  return true;
}

// The call `op` of `in` (and `out`); nullopt where runtime.describe would describe it otherwise.
std::optional<Described> describe(std::int32_t op, const at::Tensor* in, const at::Tensor* out, std::int32_t reduce,
                                  std::int64_t root = -1) {
  Described d;
  d.c.op = op;
  d.c.reduce = reduce;
  d.fields = codes.field_nones;
  if (root >= 0 && codes.root_field >= 0) d.fields[static_cast<std::size_t>(codes.root_field)] = root;
  if (in && !describe_tensor(*in, d.c.dtype, d.c.in, d.c.in_count, d.c.device)) return std::nullopt;
  if (out && !describe_tensor(*out, d.c.dtype, d.c.out, d.c.out_count, d.c.device)) return std::nullopt;
  return d;
}

std::int32_t reduce_code(const c10d::ReduceOp& op) {
  const auto k = static_cast<std::size_t>(op.op_);
  return k < codes.reduce.size() ? codes.reduce[k] : -1;
}

// Begins `d` on `group` and starts the program's call; its Work, or None when lockstep declines
// the call (the Python side then takes its own path, which runs it).
template <typename Run>
py::object carry(Described& d, int group, const std::string& site, std::int64_t step, Run run) {
  d.c.nfields = static_cast<std::int64_t>(d.fields.size());
  d.c.fields = d.fields.data();
  if (!d.send.empty()) {
    d.c.nsplits = static_cast<std::int64_t>(d.send.size());
    d.c.send_counts = d.send.data();
    d.c.recv_counts = d.recv.data();
  }
  std::int64_t id = -1;
  {
    py::gil_scoped_release nogil;  // ls_begin may wait for room (another thread's end)
    id = codes.begin(group, &d.c, site.c_str(), step);
  }
  if (id < 0) return py::none();
  begun.fetch_add(1);
  c10::intrusive_ptr<c10d::Work> real;
  try {
    py::gil_scoped_release nogil;
    real = run();
  } catch (const std::exception& e) {  // refused at once: explained (a mismatch) and the process ends
    codes.end(id, e.what());
    throw;
  }
  auto work = c10::make_intrusive<EndedWork>(std::move(real), id);
  {
    std::lock_guard<std::mutex> lock(outstanding_mu);
    outstanding.push_back(work);
  }
  return py::cast(c10::intrusive_ptr<c10d::Work>(work));
}

std::vector<std::int64_t> counts(const at::Tensor& t, const std::vector<std::int64_t>& splits, std::int64_t size) {
  const std::int64_t rows = t.dim() ? t.size(0) : 1;
  const std::int64_t row = rows ? t.numel() / rows : 0;
  std::vector<std::int64_t> out;
  if (splits.empty()) {
    out.assign(static_cast<std::size_t>(size), rows / size * row);
  } else {
    for (const std::int64_t s : splits) out.push_back(s * row);
  }
  return out;
}

using PG = c10::intrusive_ptr<c10d::ProcessGroup>;

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.attr("ABI") = py::int_(1);
  m.def("init", [](std::uintptr_t begin, std::uintptr_t end, std::vector<std::int64_t> field_nones, int root_field,
                   py::dict ops, std::vector<std::pair<at::Tensor, std::int32_t>> dtypes, py::dict reduces) {
    codes.begin = reinterpret_cast<BeginFn>(begin);
    codes.end = reinterpret_cast<EndFn>(end);
    codes.field_nones = std::move(field_nones);
    codes.root_field = root_field;
    codes.all_reduce = ops["all_reduce"].cast<std::int32_t>();
    codes.broadcast = ops["broadcast"].cast<std::int32_t>();
    codes.all_to_all = ops["all_to_all"].cast<std::int32_t>();
    codes.all_gather = ops["all_gather"].cast<std::int32_t>();
    codes.reduce_scatter = ops["reduce_scatter"].cast<std::int32_t>();
    // `dtypes`: an empty tensor of each dtype lockstep describes, with its code.
    codes.dtype.fill(-1);
    for (const auto& [t, code] : dtypes) {
      const auto k = static_cast<std::size_t>(t.scalar_type());
      if (k < codes.dtype.size()) codes.dtype[k] = code;
    }
    // `reduces`: lockstep's code of each reduce op by name (runtime.reduces); the others (premul_sum)
    // stay unverified, on the Python side's path.
    codes.reduce.fill(-1);
    const std::pair<const char*, c10d::ReduceOp::RedOpType> names[] = {
        {"sum", c10d::ReduceOp::SUM}, {"avg", c10d::ReduceOp::AVG},   {"product", c10d::ReduceOp::PRODUCT},
        {"min", c10d::ReduceOp::MIN}, {"max", c10d::ReduceOp::MAX},   {"band", c10d::ReduceOp::BAND},
        {"bor", c10d::ReduceOp::BOR}, {"bxor", c10d::ReduceOp::BXOR}};
    for (const auto& [name, op] : names) {
      if (reduces.contains(name)) codes.reduce[static_cast<std::size_t>(op)] = reduces[name].cast<std::int32_t>();
    }
    codes.sum = codes.reduce[static_cast<std::size_t>(c10d::ReduceOp::SUM)];
  });
  // The collectives begun here and not yet ended.
  m.def("outstanding", [] {
    std::lock_guard<std::mutex> lock(outstanding_mu);
    return outstanding.size();
  });
  m.def("calls", [] { return begun.load(); });
  // Ends those that have completed (runtime.settle polls them with its own).
  m.def("poll", [] {
    std::vector<c10::intrusive_ptr<EndedWork>> works;
    {
      std::lock_guard<std::mutex> lock(outstanding_mu);
      works = outstanding;
    }
    py::gil_scoped_release nogil;
    for (auto& w : works) w->isCompleted();
  });
  m.def("allreduce", [](const PG& real, std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts, int group,
                        const std::string& site, std::int64_t step) -> py::object {
    if (tensors.size() != 1) return py::none();
    const std::int32_t red = reduce_code(opts.reduceOp);
    if (red < 0) return py::none();
    auto d = describe(codes.all_reduce, &tensors[0], nullptr, red);
    if (!d) return py::none();
    return carry(*d, group, site, step, [&] { return real->allreduce(tensors, opts); });
  });
  m.def("broadcast", [](const PG& real, std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts, int group,
                        const std::string& site, std::int64_t step) -> py::object {
    if (tensors.size() != 1) return py::none();
    auto d = describe(codes.broadcast, &tensors[0], nullptr, codes.sum, opts.rootRank);
    if (!d) return py::none();
    return carry(*d, group, site, step, [&] { return real->broadcast(tensors, opts); });
  });
  m.def("all_to_all_single", [](const PG& real, at::Tensor& output, at::Tensor& input, std::vector<std::int64_t>& out_splits,
                                std::vector<std::int64_t>& in_splits, const c10d::AllToAllOptions& opts, int group,
                                const std::string& site, std::int64_t step) -> py::object {
    auto d = describe(codes.all_to_all, &input, &output, codes.sum);
    if (!d) return py::none();
    const std::int64_t size = real->getSize();
    d->send = counts(input, in_splits, size);
    d->recv = counts(output, out_splits, size);
    return carry(*d, group, site, step, [&] { return real->all_to_all_single(output, input, out_splits, in_splits, opts); });
  });
  m.def("all_gather_single", [](const PG& real, at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts,
                                int group, const std::string& site, std::int64_t step) -> py::object {
    auto d = describe(codes.all_gather, &input, &output, codes.sum);
    if (!d) return py::none();
    return carry(*d, group, site, step, [&] { return real->all_gather_single(output, input, opts); });
  });
  m.def("reduce_scatter_single", [](const PG& real, at::Tensor& output, at::Tensor& input,
                                    const c10d::ReduceScatterOptions& opts, int group, const std::string& site,
                                    std::int64_t step) -> py::object {
    const std::int32_t red = reduce_code(opts.reduceOp);
    if (red < 0) return py::none();
    auto d = describe(codes.reduce_scatter, &output, nullptr, red);
    if (!d) return py::none();
    return carry(*d, group, site, step, [&] { return real->reduce_scatter_single(output, input, opts); });
  });
}
