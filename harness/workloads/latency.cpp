// Workload "latency": a tight loop of one blocking collective, for measuring what the
// recorder and the verifier cost (bench/comm_bench.cpp). Rank 0 reports the mean time per
// operation after warm-up; results are checked once at the end (closed form: all ones).
#include <chrono>
#include <sstream>

#include "harness/comm/communicator.h"
#include "harness/comm/dtype.h"
#include "harness/workloads/workload.h"

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
    ctx.comm.set_phase("latency");
    auto one = [&](std::int64_t i) {
      ctx.comm.set_step(i);
      for (std::int64_t k = 0; k < o_.count; ++k) comm::store_from_double(buf.view(), k, 1.0);
      ctx.comm.all_reduce(buf.view(), comm::ReduceOp::kMax);
    };
    for (std::int64_t i = 0; i < o_.warmup; ++i) one(i);
    const auto t0 = std::chrono::steady_clock::now();
    for (std::int64_t i = 0; i < o_.iterations; ++i) one(o_.warmup + i);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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
  return WorkloadSpec{"latency", "a timed loop of one blocking all_reduce (max), for overhead benchmarks", make, {}};
}

}  // namespace lockstep::workloads
