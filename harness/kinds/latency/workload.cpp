// Workload "latency": a tight loop of one blocking collective, for measuring what the
// recorder and the verifier cost (bench/comm_bench.cpp; on NCCL, bench/gpu_bench.cpp). Rank 0
// reports the mean time per operation after warm-up; results are checked once at the end
// (closed form: all ones). With run.device = "cuda" (backend nccl) the buffer lives on the
// rank's GPU (LOCAL_RANK mod the visible devices), filled once: a max of ones stays ones.
#include <algorithm>
#include <chrono>
#include <sstream>

#include "harness/comm/communicator.h"
#include "harness/comm/dtype.h"
#include "harness/workloads/workload.h"
#include "reference/common/device.h"

namespace lockstep::workloads {
namespace {

struct Options {
  std::int64_t iterations = 1000;
  std::int64_t warmup = 100;
  std::int64_t count = 256;
  comm::DType dtype = comm::DType::kF32;
};

class Latency final : public Workload {
 public:
  explicit Latency(Options o) : o_(o) {}
  void run(RankContext& ctx) override {
    comm::HostBuffer buf(o_.dtype, o_.count);
    for (std::int64_t k = 0; k < o_.count; ++k) comm::store_from_double(buf.view(), k, 1.0);
    const bool cuda = ctx.scenario.device == scenario::Device::kCuda;
    ref::CudaBuffer device_buf;
    comm::View wire = buf.view();
    if (cuda) {
      const int index = ctx.local_rank % std::max(1, ref::cuda_device_count());
      ref::cuda_set_device(index);
      device_buf = ref::CudaBuffer(wire.bytes());
      ref::cuda_copy_to_device(device_buf.data(), wire.data, wire.bytes());
      wire.data = device_buf.data();
      wire.device = comm::DeviceType::kCuda;
      wire.device_index = index;
    }
    ctx.comm.set_phase("latency");
    auto one = [&](std::int64_t i) {
      ctx.comm.set_step(i);
      if (!cuda) {
        for (std::int64_t k = 0; k < o_.count; ++k) comm::store_from_double(buf.view(), k, 1.0);
      }
      ctx.comm.all_reduce(wire, comm::ReduceOp::kMax);
    };
    for (std::int64_t i = 0; i < o_.warmup; ++i) one(i);
    const auto t0 = std::chrono::steady_clock::now();
    for (std::int64_t i = 0; i < o_.iterations; ++i) one(o_.warmup + i);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (cuda) ref::cuda_copy_to_host(buf.view().data, device_buf.data(), wire.bytes());
    for (std::int64_t k = 0; k < o_.count; ++k) {
      if (comm::load_as_double(buf.view(), k) != 1.0) {
        std::ostringstream os;
        os << "latency all_reduce max: element " << k << " is " << comm::load_as_double(buf.view(), k) << ", expected 1";
        throw DiagnosisError(Diagnosis{DiagnosisKind::kResultMismatch, os.str(), ctx.rank, -1});
      }
    }
    ctx.metrics["us_per_op"] = secs * 1e6 / static_cast<double>(o_.iterations);
    ctx.metrics["iterations"] = static_cast<double>(o_.iterations);
  }

 private:
  Options o_;
};

std::unique_ptr<Workload> make(const scenario::Scenario& s) {
  const scenario::Config& c = s.workload_config;
  Options o;
  (void)c.get_string("kind");
  o.iterations = c.get_int("iterations", o.iterations);
  if (o.iterations < 1) c.fail("iterations", "must be >= 1");
  o.warmup = c.get_int("warmup", o.warmup);
  if (o.warmup < 0) c.fail("warmup", "must be >= 0");
  o.count = c.get_int("count", o.count);
  if (o.count < 1) c.fail("count", "must be >= 1");
  const std::string d = c.get_string("dtype", "f32");
  auto dt = comm::dtype_from_string(d);
  if (!dt) c.fail("dtype", "unknown dtype '" + d + "'");
  o.dtype = *dt;
  c.finish();
  return std::make_unique<Latency>(o);
}

}  // namespace

WorkloadSpec latency_spec() {
  return WorkloadSpec{"latency", "a timed loop of one blocking all_reduce (max), for overhead benchmarks (host buffers, or GPU buffers with device cuda and backend nccl)", make, {},
                      /*gpu_compute_host_exchange=*/false, /*device_exchanges=*/true};
}

}  // namespace lockstep::workloads
