// Cost of lockstep's communicator decorators on a 1 KiB all_reduce (256 x f32) over Gloo, at 2
// and 4 real rank processes: verification off (the limit: the bare engine plus sequence
// numbering), record (trace of every call), and verify (cross-rank fingerprint check).
// Each iteration runs the three modes back to back, in a rotating order, so slow drift on
// this shared 2-core machine hits all three alike; the counters are medians over iterations.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>
#include <vector>

#include "bench/bench_util.h"

namespace {

namespace fs = std::filesystem;
using lockstep::bench::median;
using lockstep::bench::temp_dir;

double run_mode(const std::string& dir, const std::string& mode, int ranks, std::int64_t iterations) {
  return lockstep::bench::latency_us(dir, mode, ranks, iterations, 256);
}

void BM_AllReduce1KiB_DecoratorCost(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const std::int64_t iterations = ranks == 2 ? 3000 : 1000;
  const std::string dir = temp_dir();
  std::vector<double> off, record, verify, record_ratio, verify_ratio;
  int round = 0;
  for (auto _ : state) {
    // Rotate the order each round so no mode always runs first (or right after another).
    double t[3] = {0, 0, 0};
    const char* modes[3] = {"off", "record", "verify"};
    for (int k = 0; k < 3; ++k) {
      const int m = (k + round) % 3;
      t[m] = run_mode(dir, modes[m], ranks, iterations);
    }
    ++round;
    const double o = t[0], r = t[1], v = t[2];
    if (o <= 0 || r <= 0 || v <= 0) {
      state.SkipWithError("a latency scenario did not pass");
      break;
    }
    off.push_back(o);
    record.push_back(r);
    verify.push_back(v);
    record_ratio.push_back(r / o);
    verify_ratio.push_back(v / o);
    state.SetIterationTime(o * 1e-6);
  }
  state.counters["off_us"] = median(off);
  state.counters["record_us"] = median(record);
  state.counters["verify_us"] = median(verify);
  state.counters["record_ratio"] = median(record_ratio);
  state.counters["verify_ratio"] = median(verify_ratio);
  fs::remove_all(dir);
}
BENCHMARK(BM_AllReduce1KiB_DecoratorCost)->Arg(2)->Arg(4)->Iterations(9)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace
