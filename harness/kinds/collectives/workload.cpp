// Workload "collectives": every step issues a mix of collectives whose inputs are closed-form
// functions of (rank, step, call, element), as nccl-tests' verifiable inputs, and checks every
// output element exactly against the closed form. Values stay small integers, so they are
// exactly representable in every dtype up to world_size 8, and any reduction order gives the
// same bits.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <thread>

#include "harness/comm/communicator.h"
#include "reference/common/device.h"
#include "harness/comm/dtype.h"
#include "harness/report/dump.h"
#include "harness/workloads/digest.h"
#include "harness/workloads/workload.h"

namespace lockstep::workloads {
namespace {

using comm::DType;
using comm::HostBuffer;
using comm::ReduceOp;
using comm::View;

const std::vector<std::string> kAllOps = {"all_reduce", "all_gather", "all_to_all",
                                          "broadcast",  "send_recv",  "barrier"};

struct Options {
  std::int64_t steps = 4;
  std::int64_t count = 256;
  std::vector<DType> dtypes = {DType::kF32};
  std::vector<std::string> ops = kAllOps;
  std::vector<ReduceOp> reduces = {ReduceOp::kSum};
  double compute_ms = 0;
  bool digest_outputs = false;  // the digest covers every checked output (one world size)
};

double value(int rank, std::int64_t step, std::int64_t call, std::int64_t i) {
  return static_cast<double>((rank + 1) * (i % 3 + 1) + (step + call) % 2);
}

// A host buffer, mirrored on the GPU when the scenario runs on CUDA.
class Staged {
 public:
  Staged(DType dtype, std::int64_t count, bool cuda) : host_(dtype, count) {
    if (cuda) device_ = ref::CudaBuffer(host_.view().bytes());
  }
  View host() { return host_.view(); }
  View comm_view() {
    View v = host_.view();
    if (device_.data()) {
      v.data = device_.data();
      v.device = comm::DeviceType::kCuda;
    }
    return v;
  }
  void to_device() {
    if (device_.data()) ref::cuda_copy_to_device(device_.data(), host_.view().data, host_.view().bytes());
  }
  void to_host() {
    if (device_.data()) ref::cuda_copy_to_host(host_.view().data, device_.data(), host_.view().bytes());
  }

 private:
  HostBuffer host_;
  ref::CudaBuffer device_;
};

class Collectives final : public Workload {
 public:
  explicit Collectives(Options o) : o_(std::move(o)) {}

  void run(RankContext& ctx) override {
    const bool cuda = ctx.scenario.device == scenario::Device::kCuda;
    if (cuda) ref::cuda_set_device(ctx.local_rank % std::max(1, ref::cuda_device_count()));
    ctx.comm.set_phase("mix");
    std::int64_t issued = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::int64_t step = 0; step < o_.steps; ++step) {
      ctx.comm.set_step(step);
      checks_.clear();
      for (DType dtype : o_.dtypes) {
        for (const auto& op : o_.ops) issued += run_op(ctx, op, dtype, step, cuda);
      }
      // Outputs are checked after a barrier that ends the step: in verify mode a rank whose
      // collective sequence diverged is named by the verifier before any check reads a
      // buffer that a skipped collective never filled.
      ctx.comm.barrier();
      ++issued;
      for (auto& check : checks_) check();
      if (o_.compute_ms > 0) {
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(o_.compute_ms));
      }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // With digest_outputs, the digest (rank 0) covers every output element it checked, as a
    // double, in issue order: the same for every device and backend at one world size, so it
    // is off by default (world-size matrices would differ).
    if (o_.digest_outputs && ctx.rank == 0) ctx.digest = digest_hex({static_cast<std::int64_t>(digest_), checked_});
    ctx.metrics["collectives"] = static_cast<double>(issued);
    ctx.metrics["us_per_collective"] = issued ? secs * 1e6 / static_cast<double>(issued) : 0;
    for (std::size_t i = 0; i < last_.size(); ++i) {
      ctx.dump.write("all_reduce_" + std::string(comm::to_string(o_.dtypes[i])), last_[i].dtype(),
                     {last_[i].count()}, last_[i].view().data,
                     "result of the last all_reduce of this dtype (bf16/f16 stored as raw bits)");
    }
  }

 private:
  // Issues one op and queues the checks of its outputs. Returns the collectives issued.
  int run_op(RankContext& ctx, const std::string& op, DType dtype, std::int64_t step, bool cuda) {
    const int me = ctx.rank;
    const int ws = ctx.world_size;
    const std::int64_t n = o_.count;
    if (op == "all_reduce") {
      int issued = 0;
      for (ReduceOp red : o_.reduces) {
        auto bufp = std::make_shared<Staged>(dtype, n, cuda);
        Staged& buf = *bufp;
        const std::int64_t c = issued;
        for (std::int64_t i = 0; i < n; ++i) comm::store_from_double(buf.host(), i, value(me, step, c, i));
        buf.to_device();
        ctx.comm.all_reduce(buf.comm_view(), red);
        buf.to_host();
        ++issued;
        checks_.push_back([this, &ctx, bufp, red, c, n, ws, step, dtype, last = red == o_.reduces.back()] {
        Staged& buf = *bufp;
        for (std::int64_t i = 0; i < n; ++i) {
          double expected = 0;
          for (int r = 0; r < ws; ++r) {
            const double v = value(r, step, c, i);
            if (r == 0) expected = v;
            else if (red == ReduceOp::kSum || red == ReduceOp::kAvg) expected += v;
            else if (red == ReduceOp::kMax) expected = std::max(expected, v);
            else expected = std::min(expected, v);
          }
          if (red == ReduceOp::kAvg) expected /= ws;
          check(ctx, buf.host(), i, expected, "all_reduce " + std::string(comm::to_string(red)));
        }
        if (last) remember(dtype, buf.host());
        });
      }
      return issued;
    }
    if (op == "all_gather") {
      Staged in(dtype, n, cuda);
      auto out = std::make_shared<Staged>(dtype, n * ws, cuda);
      for (std::int64_t i = 0; i < n; ++i) comm::store_from_double(in.host(), i, value(me, step, 0, i));
      in.to_device();
      ctx.comm.all_gather(in.comm_view(), out->comm_view());
      out->to_host();
      checks_.push_back([this, &ctx, out, n, ws, step] {
        for (int r = 0; r < ws; ++r) {
          for (std::int64_t i = 0; i < n; ++i) check(ctx, out->host(), r * n + i, value(r, step, 0, i), "all_gather");
        }
      });
      return 1;
    }
    if (op == "all_to_all") {
      auto split = [](int from, int to) { return static_cast<std::int64_t>((from + to) % 3 + 1); };
      std::vector<std::int64_t> send(ws), recv(ws);
      std::int64_t total_send = 0, total_recv = 0;
      for (int j = 0; j < ws; ++j) {
        send[j] = split(me, j);
        recv[j] = split(j, me);
        total_send += send[j];
        total_recv += recv[j];
      }
      Staged in(dtype, total_send, cuda);
      auto outp = std::make_shared<Staged>(dtype, total_recv, cuda);
      Staged& out = *outp;
      for (std::int64_t k = 0; k < total_send; ++k) comm::store_from_double(in.host(), k, value(me, step, 0, k));
      in.to_device();
      ctx.comm.all_to_all(in.comm_view(), send, out.comm_view(), recv);
      out.to_host();
      checks_.push_back([this, &ctx, outp, recv, split, me, ws, step] {
      Staged& out = *outp;
      std::int64_t pos = 0;
      for (int j = 0; j < ws; ++j) {
        std::int64_t offset = 0;  // where my elements start in j's send buffer
        for (int m = 0; m < me; ++m) offset += split(j, m);
        for (std::int64_t k = 0; k < recv[j]; ++k) check(ctx, out.host(), pos + k, value(j, step, 0, offset + k), "all_to_all");
        pos += recv[j];
      }
      });
      return 1;
    }
    if (op == "broadcast") {
      const int root = static_cast<int>(step % ws);
      auto buf = std::make_shared<Staged>(dtype, n, cuda);
      for (std::int64_t i = 0; i < n; ++i) {
        comm::store_from_double(buf->host(), i, me == root ? value(root, step, 0, i) : -1.0 * (dtype == DType::kU8 ? 0 : 1));
      }
      buf->to_device();
      ctx.comm.broadcast(buf->comm_view(), root);
      buf->to_host();
      checks_.push_back([this, &ctx, buf, root, n, step] {
        for (std::int64_t i = 0; i < n; ++i) check(ctx, buf->host(), i, value(root, step, 0, i), "broadcast");
      });
      return 1;
    }
    if (op == "send_recv") {
      if (ws == 1) return 0;
      const int next = (me + 1) % ws, prev = (me + ws - 1) % ws;
      Staged out(dtype, n, cuda);
      auto in = std::make_shared<Staged>(dtype, n, cuda);
      for (std::int64_t i = 0; i < n; ++i) comm::store_from_double(out.host(), i, value(me, step, 1, i));
      out.to_device();
      auto s = ctx.comm.isend(out.comm_view(), next, /*tag=*/static_cast<int>(step));
      auto r = ctx.comm.irecv(in->comm_view(), prev, /*tag=*/static_cast<int>(step));
      s->wait();
      r->wait();
      in->to_host();
      checks_.push_back([this, &ctx, in, prev, n, step] {
        for (std::int64_t i = 0; i < n; ++i) check(ctx, in->host(), i, value(prev, step, 1, i), "recv");
      });
      return 0;
    }
    ctx.comm.barrier();
    return 1;
  }

  void remember(DType dtype, View v) {
    for (std::size_t i = 0; i < o_.dtypes.size(); ++i) {
      if (o_.dtypes[i] != dtype) continue;
      if (last_.size() < o_.dtypes.size()) last_.resize(o_.dtypes.size());
      last_[i] = HostBuffer(dtype, v.count);
      std::memcpy(last_[i].view().data, v.data, v.bytes());
    }
  }

  void check(RankContext& ctx, View v, std::int64_t i, double expected, const std::string& what) {
    const double got = comm::load_as_double(v, i);
    std::uint64_t bits;
    std::memcpy(&bits, &got, sizeof bits);
    digest_ = (digest_ ^ bits) * 1099511628211ull;  // every checked output, in check order
    ++checked_;
    HostBuffer rounded(v.dtype, 1);
    comm::store_from_double(rounded.view(), 0, expected);
    const double want = comm::load_as_double(rounded.view(), 0);
    if (got == want) return;
    std::ostringstream os;
    os << what << ' ' << comm::to_string(v.dtype) << " (mix step " << ctx.comm.step()
       << "): rank " << ctx.rank << " element " << i << " is " << got << ", expected " << want;
    throw DiagnosisError(Diagnosis{DiagnosisKind::kResultMismatch, os.str(), ctx.rank, -1});
  }

  Options o_;
  std::vector<HostBuffer> last_;
  std::vector<std::function<void()>> checks_;  // this step's output checks
  std::uint64_t digest_ = 1469598103934665603ull;  // FNV-1a over the checked outputs' values
  std::int64_t checked_ = 0;
};

std::unique_ptr<Workload> make(const scenario::Scenario& s) {
  const scenario::Config& c = s.workload_config;
  Options o;
  (void)c.get_string("kind");
  o.steps = c.get_int("steps", o.steps);
  if (o.steps < 1 || o.steps > 100000) c.fail("steps", "must be in 1..100000, got " + std::to_string(o.steps));
  o.count = c.get_int("count", o.count);
  if (o.count < 1 || o.count > (1 << 26)) c.fail("count", "must be in 1..67108864, got " + std::to_string(o.count));
  o.dtypes.clear();
  for (const auto& d : c.get_string_list("dtypes", {"f32"})) {
    auto dt = comm::dtype_from_string(d);
    if (!dt) c.fail("dtypes", "unknown dtype '" + d + "' (f32, f64, f16, bf16, i8, u8, i32, i64)");
    o.dtypes.push_back(*dt);
  }
  if (o.dtypes.empty()) c.fail("dtypes", "must not be empty");
  o.ops = c.get_string_list("ops", kAllOps);
  for (const auto& op : o.ops) {
    if (std::find(kAllOps.begin(), kAllOps.end(), op) == kAllOps.end()) {
      c.fail("ops", "unknown op '" + op + "' (all_reduce, all_gather, all_to_all, broadcast, send_recv, barrier)");
    }
  }
  o.reduces.clear();
  for (const auto& r : c.get_string_list("reduce", {"sum"})) {
    auto op = comm::reduce_op_from_string(r);
    if (!op || !comm::is_arithmetic(*op)) c.fail("reduce", "unknown reduce op '" + r + "' (sum, max, min, avg)");
    o.reduces.push_back(*op);
  }
  if (o.reduces.empty()) c.fail("reduce", "must not be empty");
  o.compute_ms = c.get_double("compute_ms", 0);
  if (o.compute_ms < 0) c.fail("compute_ms", "must be >= 0");
  for (DType d : o.dtypes) {
    const bool is_float = d == DType::kF32 || d == DType::kF64 || d == DType::kF16 || d == DType::kBF16;
    for (ReduceOp r : o.reduces) {
      if (r == ReduceOp::kAvg && !is_float) c.fail("reduce", "avg needs floating dtypes, got " + std::string(comm::to_string(d)));
    }
  }
  if (s.world_size > 8) c.fail("kind", "collectives keeps exact closed-form values up to world_size 8");
  o.digest_outputs = c.get_bool("digest_outputs", false);
  c.finish();
  return std::make_unique<Collectives>(std::move(o));
}

}  // namespace

WorkloadSpec collectives_spec() {
  return WorkloadSpec{"collectives",
                      "a mix of collectives on closed-form inputs, every output element checked exactly",
                      make, {}, /*gpu_compute_host_exchange=*/false, /*device_exchanges=*/true};
}

}  // namespace lockstep::workloads
