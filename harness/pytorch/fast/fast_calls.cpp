// lockstep_fast: the program's most frequent collectives (a one-tensor all_reduce or broadcast,
// all_to_all_single, all_gather_single, reduce_scatter_single), run with no Python of lockstep's
// but one line: install() returns C++ methods for the Python group (groups.py's LockstepGroup),
// which runtime._open_fast makes its methods. Each takes lockstep's issue lock, finds the call's site (the
// innermost frame of the program's own code, as sites.program_site) and step, begins the call in
// lockstep's chain (ls_begin), starts it on the program's own group and returns a Work of its own,
// ended (ls_end) once, by the program's wait, a completed poll or its future's completion. What it
// hands liblockstep_program.so is exactly what the Python path (the group's own method, kept as
// `_slow_<name>`) would: the same ls_call, fields, site and step; a call it does not describe the
// same way (non-contiguous, an unknown dtype or reduce op, several tensors, other arguments) goes
// to that method.
//
// Built against the torch the program imports by harness/pytorch/python/lockstep_torch/fast.py
// (torch >= 2.11: the virtuals it calls are the same in 2.14.1 and 2.15.0).
#include <torch/extension.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <Python.h>

#include <array>
#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "harness/pytorch/program.h"

namespace py = pybind11;

namespace {

using BeginFn = std::int64_t (*)(int, const ls_call*, const char*, std::int64_t);
using EndFn = int (*)(std::int64_t, const char*);

// What install() hands over once: liblockstep_program.so's two entry points and its codes.
struct Codes {
  BeginFn begin = nullptr;
  EndFn end = nullptr;
  std::vector<std::int64_t> field_nones;  // ls_call's fields, each at the table's `none`
  int root_field = -1;
  std::int32_t all_reduce = -1, broadcast = -1, all_to_all = -1, all_gather = -1, reduce_scatter = -1;
  std::int32_t sum = -1;                  // what a call that reduces nothing carries (describe's default)
  std::array<std::int32_t, 64> dtype{};   // by at::ScalarType; -1: not one lockstep describes
  std::array<std::int32_t, 16> reduce{};  // by c10d::ReduceOp::RedOpType; -1: unverified
};
Codes codes;

// The Python side it works with (the runtime), kept for the process's life: never destroyed, so
// that nothing of Python's is released after the interpreter has gone.
struct Python {
  py::object runtime;          // runtime._Runtime: outstanding_ids, settle
  std::int64_t max_in_flight;  // its MAX_IN_FLIGHT (program.cpp's kMaxCollectivesInFlight)
  py::object acquire, release;  // its issue_lock's
  py::object current_step;     // its steps.current
  py::object program_site;     // sites.program_site: where no frame of this thread is the program's
  py::object is_program_file;  // sites._is_program_file
  // A code file's name (kept alive here) -> its base name when it is the program's own, else "".
  std::unordered_map<PyObject*, std::pair<py::object, std::string>> files;
};
Python* python = nullptr;

// The engine's error as the Python path hands it to lockstep (str(e): torch's message without its
// C++ backtrace).
std::string error_text(const std::exception& e) {
  if (const auto* c = dynamic_cast<const c10::Error*>(&e)) return c->what_without_backtrace();
  return e.what();
}
std::string error_text(const std::exception_ptr& p) {
  try {
    std::rethrow_exception(p);
  } catch (const std::exception& e) {
    return error_text(e);
  } catch (...) {
    return "unknown error";
  }
}

class EndedWork;
// The Works begun here and not yet ended: settle() and the room before a begin count them with the
// Python side's (runtime.outstanding). Never destroyed: a Work left at exit (a failing program does
// not settle) is not torn down after its engine.
std::mutex outstanding_mu;
std::vector<c10::intrusive_ptr<EndedWork>>& outstanding = *new std::vector<c10::intrusive_ptr<EndedWork>>();
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
      finish(error_text(e));
      throw;
    }
    finish("");
    return out;
  }
  bool isCompleted() override {
    const bool done = real_->isCompleted();
    if (done && !ended_.load()) {
      // Python's is_completed() holds the GIL: lockstep's check (which may wait for the peers'
      // records) runs without it, as on the Python path.
      std::optional<py::gil_scoped_release> nogil;
      if (PyGILState_Check()) nogil.emplace();
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
            self->finish(error_text(f.exception_ptr()));
            std::rethrow_exception(f.exception_ptr());
          }
          self->finish("");
          return f.value();
        },
        future->elementType());
  }

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

// A call as runtime.describe makes it.
struct Described {
  ls_call c{};
  std::vector<std::int64_t> fields;
  std::vector<std::int64_t> send, recv;
};

bool describe_tensor(const at::Tensor& t, std::int32_t& dtype, void*& data, std::int64_t& count, std::int32_t& device) {
  if (!t.defined() || !t.is_contiguous()) return false;
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

// "train.py:57": the innermost frame of the program's own code on this thread (sites._site_in's
// rule, each file judged once by sites._is_program_file); where there is none, sites.program_site
// (the main thread's, from DDP's autograd thread).
std::string program_site() {
  PyFrameObject* f = PyEval_GetFrame();
  Py_XINCREF(f);
  while (f) {
    PyCodeObject* code = PyFrame_GetCode(f);
    PyObject* name = code->co_filename;
    auto it = python->files.find(name);
    if (it == python->files.end()) {
      py::object n = py::reinterpret_borrow<py::object>(name);
      std::string base;
      if (python->is_program_file(n).cast<bool>()) {
        base = n.cast<std::string>();
        base = base.substr(base.rfind('/') + 1);
      }
      it = python->files.emplace(name, std::make_pair(n, std::move(base))).first;
    }
    if (!it->second.second.empty()) {
      std::string site = it->second.second + ":" + std::to_string(PyFrame_GetLineNumber(f));
      Py_DECREF(code);
      Py_DECREF(f);
      return site;
    }
    PyFrameObject* back = PyFrame_GetBack(f);
    Py_DECREF(code);
    Py_DECREF(f);
    f = back;
  }
  return py::cast<std::string>(python->program_site());
}

// Holds lockstep's issue lock (runtime.issue_lock, the Python path's) while a call is begun and
// started: no other thread begins one between, and no settle runs meanwhile.
struct IssueLock {
  IssueLock() { python->acquire(); }
  ~IssueLock() { python->release(); }
};

// Begins `d` on `group` and starts the program's call (`run`); its Work, or what `slow` (the
// Python path) returns where lockstep declines the call.
template <typename Run, typename Slow>
py::object carry(Described& d, int group, Run run, Slow slow) {
  d.c.nfields = static_cast<std::int64_t>(d.fields.size());
  d.c.fields = d.fields.data();
  if (!d.send.empty()) {
    d.c.nsplits = static_cast<std::int64_t>(d.send.size());
    d.c.send_counts = d.send.data();
    d.c.recv_counts = d.recv.data();
  }
  std::optional<IssueLock> lock(std::in_place);
  // Room for one more collective in flight (runtime._room_for: ls_begin would wait for an end
  // only the program's waits give).
  std::size_t mine = 0;
  {
    std::lock_guard<std::mutex> l(outstanding_mu);
    mine = outstanding.size();
  }
  const std::int64_t limit = python->max_in_flight;
  if (static_cast<std::int64_t>(mine) + python->runtime.attr("outstanding_ids").cast<std::int64_t>() + 1 > limit) {
    python->runtime.attr("settle")(limit - 1);
  }
  const std::string site = program_site();
  const auto step = py::cast<std::int64_t>(python->current_step());
  std::int64_t id = -1;
  {
    py::gil_scoped_release nogil;  // ls_begin may wait for room (another thread's end)
    id = codes.begin(group, &d.c, site.c_str(), step);
  }
  if (id < 0) {
    lock.reset();
    return slow();
  }
  begun.fetch_add(1);
  c10::intrusive_ptr<c10d::Work> real;
  try {
    py::gil_scoped_release nogil;
    real = run();
  } catch (const std::exception& e) {  // refused at once: explained (a mismatch) and the process ends
    const std::string text = error_text(e);
    {
      py::gil_scoped_release nogil;
      codes.end(id, text.c_str());
    }
    throw;
  }
  if (!real) {  // an engine that ran the call to its end and gave no Work (NCCL's synchronous calls)
    {
      py::gil_scoped_release nogil;
      codes.end(id, "");
    }
    lock.reset();
    return py::none();
  }
  auto work = c10::make_intrusive<EndedWork>(std::move(real), id);
  {
    std::lock_guard<std::mutex> l(outstanding_mu);
    outstanding.push_back(work);
  }
  lock.reset();
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

// The group's own group and lockstep's id of it (LockstepGroup._real, _gid).
std::pair<PG, int> group_of(const py::object& self) {
  return {self.attr("_real").cast<PG>(), self.attr("_gid").cast<int>()};
}

// One tensor, from the list c10d passes; nullopt for anything else.
std::optional<std::vector<at::Tensor>> one_tensor(const py::object& tensors) {
  if (!py::isinstance<py::list>(tensors) || py::len(tensors) != 1) return std::nullopt;
  py::object t = tensors[py::int_(0)];
  if (!THPVariable_Check(t.ptr())) return std::nullopt;
  return std::vector<at::Tensor>{THPVariable_Unpack(t.ptr())};
}

// Calls the Python path: the group's own method, kept as `_slow_<name>`.
template <typename... Args>
py::object slow_call(const py::object& self, const char* name, Args&&... args) {
  return self.attr((std::string("_slow_") + name).c_str())(std::forward<Args>(args)...);
}

// The group's methods, by name, each taking the group first (runtime._open_fast makes them the
// group class's, keeping its own as `_slow_<name>`: c10d's trampoline ignores a method that is a
// C++ function, so each is called through a Python function of one line).
py::dict methods() {
  py::dict out;
  auto replace = [&](const char* name, py::cpp_function f) { out[name] = f; };
  replace("allreduce", py::cpp_function(
      [](py::object self, py::object tensors, py::object opts) -> py::object {
        auto v = one_tensor(tensors);
        if (!v || !py::isinstance<c10d::AllreduceOptions>(opts)) return slow_call(self, "allreduce", tensors, opts);
        const auto& o = opts.cast<const c10d::AllreduceOptions&>();
        const std::int32_t red = reduce_code(o.reduceOp);
        auto d = red < 0 ? std::nullopt : describe(codes.all_reduce, &(*v)[0], nullptr, red);
        if (!d) return slow_call(self, "allreduce", tensors, opts);
        auto [real, gid] = group_of(self);
        return carry(*d, gid, [&] { return real->allreduce(*v, o); }, [&] { return slow_call(self, "allreduce", tensors, opts); });
      },
      py::name("allreduce"), py::arg("self"), py::arg("tensors"), py::arg("opts") = py::none()));
  replace("broadcast", py::cpp_function(
      [](py::object self, py::object tensors, py::object opts) -> py::object {
        auto v = one_tensor(tensors);
        if (!v || !py::isinstance<c10d::BroadcastOptions>(opts)) return slow_call(self, "broadcast", tensors, opts);
        const auto& o = opts.cast<const c10d::BroadcastOptions&>();
        auto d = describe(codes.broadcast, &(*v)[0], nullptr, codes.sum, o.rootRank);
        if (!d) return slow_call(self, "broadcast", tensors, opts);
        auto [real, gid] = group_of(self);
        return carry(*d, gid, [&] { return real->broadcast(*v, o); }, [&] { return slow_call(self, "broadcast", tensors, opts); });
      },
      py::name("broadcast"), py::arg("self"), py::arg("tensors"), py::arg("opts") = py::none()));
  replace("all_to_all_single", py::cpp_function(
      [](py::object self, at::Tensor output, at::Tensor input, py::object out_splits, py::object in_splits,
         py::object opts) -> py::object {
        auto slow = [&] { return slow_call(self, "all_to_all_single", output, input, out_splits, in_splits, opts); };
        if (!py::isinstance<c10d::AllToAllOptions>(opts)) return slow();
        std::vector<std::int64_t> out_s, in_s;
        try {
          if (!out_splits.is_none()) out_s = out_splits.cast<std::vector<std::int64_t>>();
          if (!in_splits.is_none()) in_s = in_splits.cast<std::vector<std::int64_t>>();
        } catch (const py::cast_error&) {
          return slow();
        }
        auto d = describe(codes.all_to_all, &input, &output, codes.sum);
        if (!d) return slow();
        auto [real, gid] = group_of(self);
        d->send = counts(input, in_s, real->getSize());
        d->recv = counts(output, out_s, real->getSize());
        const auto& o = opts.cast<const c10d::AllToAllOptions&>();
        return carry(*d, gid, [&] { return real->all_to_all_single(output, input, out_s, in_s, o); }, slow);
      },
      py::name("all_to_all_single"), py::arg("self"), py::arg("output"), py::arg("input"), py::arg("out_splits"),
      py::arg("in_splits"), py::arg("opts") = py::none()));
  replace("all_gather_single", py::cpp_function(
      [](py::object self, at::Tensor output, at::Tensor input, py::object opts) -> py::object {
        auto slow = [&] { return slow_call(self, "all_gather_single", output, input, opts); };
        if (!py::isinstance<c10d::AllgatherOptions>(opts)) return slow();
        auto d = describe(codes.all_gather, &input, &output, codes.sum);
        if (!d) return slow();
        auto [real, gid] = group_of(self);
        const auto& o = opts.cast<const c10d::AllgatherOptions&>();
        return carry(*d, gid, [&] { return real->all_gather_single(output, input, o); }, slow);
      },
      py::name("all_gather_single"), py::arg("self"), py::arg("output"), py::arg("input"), py::arg("opts") = py::none()));
  replace("reduce_scatter_single", py::cpp_function(
      [](py::object self, at::Tensor output, at::Tensor input, py::object opts) -> py::object {
        auto slow = [&] { return slow_call(self, "reduce_scatter_single", output, input, opts); };
        if (!py::isinstance<c10d::ReduceScatterOptions>(opts)) return slow();
        const auto& o = opts.cast<const c10d::ReduceScatterOptions&>();
        const std::int32_t red = reduce_code(o.reduceOp);
        auto d = red < 0 ? std::nullopt : describe(codes.reduce_scatter, &output, nullptr, red);
        if (!d) return slow();
        auto [real, gid] = group_of(self);
        return carry(*d, gid, [&] { return real->reduce_scatter_single(output, input, o); }, slow);
      },
      py::name("reduce_scatter_single"), py::arg("self"), py::arg("output"), py::arg("input"), py::arg("opts") = py::none()));
  return out;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.attr("ABI") = py::int_(2);
  // Hands over liblockstep_program.so's entry points and codes and the runtime; the group's
  // methods (methods()).
  m.def("install", [](py::object runtime, std::uintptr_t begin, std::uintptr_t end,
                       std::vector<std::int64_t> field_nones, int root_field, py::dict ops,
                       std::vector<std::pair<at::Tensor, std::int32_t>> dtypes, py::dict reduces, py::object sites) {
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
    // stay unverified, on the Python path.
    codes.reduce.fill(-1);
    const std::pair<const char*, c10d::ReduceOp::RedOpType> names[] = {
        {"sum", c10d::ReduceOp::SUM}, {"avg", c10d::ReduceOp::AVG},   {"product", c10d::ReduceOp::PRODUCT},
        {"min", c10d::ReduceOp::MIN}, {"max", c10d::ReduceOp::MAX},   {"band", c10d::ReduceOp::BAND},
        {"bor", c10d::ReduceOp::BOR}, {"bxor", c10d::ReduceOp::BXOR}};
    for (const auto& [name, op] : names) {
      if (reduces.contains(name)) codes.reduce[static_cast<std::size_t>(op)] = reduces[name].cast<std::int32_t>();
    }
    codes.sum = codes.reduce[static_cast<std::size_t>(c10d::ReduceOp::SUM)];
    python = new Python{runtime, runtime.attr("MAX_IN_FLIGHT").cast<std::int64_t>(), runtime.attr("issue_lock").attr("acquire"), runtime.attr("issue_lock").attr("release"),
                        runtime.attr("steps").attr("current"), sites.attr("program_site"), sites.attr("_is_program_file"), {}};
    return methods();
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
}
