// The reference's CUDA kernels against device limits measured in the same run (issue 15's
// targets). Without a CUDA device, or in a build without nvcc, every benchmark here skips with
// the reason (an error line in Google Benchmark's output, exit code 0).
//
// BM_CudaLookup_LimitRatio/{range,map}: nid2partid on 2^26 random int64 CUDA ids of 2^26 nodes
// in 8 parts (12 bytes an id: 8 read, 4 written), against its limit, back to back in each
// iteration; `ratio` is the median of lookup GB/s over the limit's (target >= 0.6). The range
// book streams (its offsets stay in the cache), so its limit is a device-to-device cudaMemcpy
// of 256 MiB (bytes read plus written). The map book reads its 256 MiB part_of table once per id
// at a random place, so its limit is a gather of those int32 entries at the same ids
// (out[i] = part_of[ids[i]]); `copy_GBps` is reported beside it.
// BM_CudaSampleHop_LimitRatio: sample_hop on the device for 2^22 random nodes of an
// Erdős–Rényi graph with 2^22 nodes and 2^26 edges, fanout 10 without replacement, against a
// gather kernel (out[i] = table[index[i]], uniformly random index over the graph's 2^26
// neighbor ids) of as many int64 values as the sample gathers (a neighbor and an edge id a
// pair); `ratio` is the median of gather time over sample time (target >= 0.5). The sample's
// time includes its output allocations, as a caller pays them.
// BM_NcclAllReduce_RecordCost/{count}: the "latency" workload on two rank processes (one where
// the machine has one GPU: `ranks`) with backend nccl and each buffer on its rank's GPU, all_reduce of `count` f32 (256: 1 KiB; 8M: 32 MiB, a DDP
// gradient bucket), verification off (the limit: NCCL plus sequence numbering) and record
// (every call traced), in alternating order; `record_ratio` is the median of record's time
// per operation over off's (target <= 1.02 at 32 MiB on two ranks; the 1 KiB figure is reported
// only). On one rank NCCL runs an all_reduce as a local copy without its task path (in place:
// no data moves, NCCL 2.28 ncclLaunchOneRank), so there the ratio is record's cost over a launch.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "lockstep/config.h"
#include "reference/common/device.h"
#include "reference/graph/graph.h"
#include "reference/partition/book.h"
#include "reference/sampling/device_sample.h"
#if LOCKSTEP_HAVE_CUDA_KERNELS
#include "bench/cuda/limits.h"
#endif

namespace {

namespace ref = lockstep::ref;
using lockstep::bench::median;
using Clock = std::chrono::steady_clock;

const ref::Device kGpu{ref::DeviceKind::kCuda, 0};

// Whether a GPU benchmark cannot run here; if so it is marked skipped with the reason.
bool skipped(benchmark::State& state) {
  const char* reason = !LOCKSTEP_HAVE_CUDA_KERNELS ? "requires CUDA kernels: this build has no nvcc"
                       : ref::cuda_device_count() == 0 ? "requires CUDA: no CUDA device is visible"
                                                       : nullptr;
  if (reason != nullptr) state.SkipWithError(reason);
  return reason != nullptr;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void BM_CudaLookup_LimitRatio(benchmark::State& state) {
  if (skipped(state)) return;
#if LOCKSTEP_HAVE_CUDA_KERNELS
  constexpr std::int64_t kIds = std::int64_t{1} << 26;
  constexpr int kParts = 8;
  constexpr std::size_t kCopyBytes = std::size_t{256} << 20;
  std::vector<std::int64_t> offsets;
  for (int p = 0; p <= kParts; ++p) offsets.push_back(kIds * p / kParts);
  std::vector<std::int32_t> part_of(static_cast<std::size_t>(kIds));
  for (std::int64_t v = 0; v < kIds; ++v) {
    part_of[static_cast<std::size_t>(v)] = static_cast<std::int32_t>(v * kParts / kIds);
  }
  const ref::RangePartitionBook range(offsets);
  const ref::MapPartitionBook map(part_of, kParts);
  const ref::PartitionBook& book =
      state.range(0) == 0 ? static_cast<const ref::PartitionBook&>(range) : map;
  std::mt19937_64 rng(42);
  std::vector<std::int64_t> host(static_cast<std::size_t>(kIds));
  for (auto& id : host) id = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(kIds));
  const ref::IdArray ids = ref::IdArray::from_host(host, ref::IdType::kI64, kGpu);
  ref::IdArray out;
  book.nid2partid(ids.span(), out);  // warm-up: tables to the device, output allocated
  ref::CudaBuffer src(kCopyBytes), dst(kCopyBytes);
  const bool is_map = state.range(0) != 0;
  ref::CudaBuffer table(is_map ? part_of.size() * sizeof(std::int32_t) : 0);
  ref::CudaBuffer gathered(is_map ? part_of.size() * sizeof(std::int32_t) : 0);
  if (is_map) ref::cuda_copy_to_device(table.data(), part_of.data(), part_of.size() * sizeof(std::int32_t));
  std::vector<double> copy_gbs, gather_gbs, lookup_gbs, ratio;
  for (auto _ : state) {
    const double copy_s = lockstep::bench::cuda::copy_seconds(dst.data(), src.data(), kCopyBytes);
    copy_gbs.push_back(2.0 * static_cast<double>(kCopyBytes) / copy_s / 1e9);
    double limit_gbs = copy_gbs.back();
    if (is_map) {
      const double gather_s = lockstep::bench::cuda::gather_seconds(
          static_cast<const std::int32_t*>(table.data()), static_cast<const std::int64_t*>(ids.data()), kIds,
          static_cast<std::int32_t*>(gathered.data()));
      gather_gbs.push_back(12.0 * static_cast<double>(kIds) / gather_s / 1e9);
      limit_gbs = gather_gbs.back();
    }
    const auto t0 = Clock::now();
    book.nid2partid(ids.span(), out);  // returns after the kernel
    const double lookup_s = seconds_since(t0);
    lookup_gbs.push_back(12.0 * static_cast<double>(kIds) / lookup_s / 1e9);
    ratio.push_back(lookup_gbs.back() / limit_gbs);
    state.SetIterationTime(lookup_s);
  }
  state.counters["copy_GBps"] = median(copy_gbs);
  if (is_map) state.counters["gather_GBps"] = median(gather_gbs);
  state.counters["lookup_GBps"] = median(lookup_gbs);
  state.counters["ratio"] = median(ratio);
#endif
}
BENCHMARK(BM_CudaLookup_LimitRatio)
    ->Arg(0)
    ->Arg(1)
    ->ArgName("map")
    ->Iterations(40)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

void BM_CudaSampleHop_LimitRatio(benchmark::State& state) {
  if (skipped(state)) return;
#if LOCKSTEP_HAVE_CUDA_KERNELS
  constexpr std::int64_t kNodes = std::int64_t{1} << 22;
  constexpr std::int64_t kEdges = std::int64_t{1} << 26;
  constexpr std::int64_t kFanout = 10;
  static const ref::CsrGraph rows = ref::erdos_renyi(kNodes, kEdges, 9);
  const ref::SampleRows device_rows(rows);
  std::mt19937_64 rng(43);
  std::vector<std::int64_t> nodes(static_cast<std::size_t>(kNodes));
  for (auto& v : nodes) v = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(kNodes));
  const ref::IdArray in = ref::IdArray::from_host(nodes, ref::IdType::kI64, kGpu);
  const ref::SampleKey key{1, 0, 0, 0};
  const std::int64_t pairs = ref::sample_hop(device_rows, in.span(), kFanout, false, key).nbrs.size();
  // The limit: as many int64 gathers as the sample makes, at random over the neighbor ids.
  const std::int64_t gathers = 2 * pairs;
  std::vector<std::int64_t> index(static_cast<std::size_t>(gathers));
  for (auto& i : index) i = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(kEdges));
  const ref::IdArray table = ref::IdArray::from_host(rows.indices, ref::IdType::kI64, kGpu);
  const ref::IdArray gather_index = ref::IdArray::from_host(index, ref::IdType::kI64, kGpu);
  ref::IdArray gathered(ref::IdType::kI64, gathers, kGpu);
  std::vector<double> ratio, sample_s_all, gather_s_all;
  for (auto _ : state) {
    const double gather_s = lockstep::bench::cuda::gather_seconds(
        static_cast<const std::int64_t*>(table.data()),
        static_cast<const std::int64_t*>(gather_index.data()), gathers,
        static_cast<std::int64_t*>(gathered.data()));
    const auto t0 = Clock::now();
    const ref::DeviceHopSample s = ref::sample_hop(device_rows, in.span(), kFanout, false, key);
    const double sample_s = seconds_since(t0);
    benchmark::DoNotOptimize(s.nbrs.data());
    sample_s_all.push_back(sample_s);
    gather_s_all.push_back(gather_s);
    ratio.push_back(gather_s / sample_s);
    state.SetIterationTime(sample_s);
  }
  state.counters["pairs"] = static_cast<double>(pairs);
  state.counters["gather_Gps"] = static_cast<double>(gathers) / median(gather_s_all) / 1e9;
  state.counters["sample_Gpairs_ps"] = static_cast<double>(pairs) / median(sample_s_all) / 1e9;
  state.counters["ratio"] = median(ratio);
#endif
}
BENCHMARK(BM_CudaSampleHop_LimitRatio)->Iterations(20)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_NcclAllReduce_RecordCost(benchmark::State& state) {
  const char* reason = !LOCKSTEP_HAVE_NCCL ? "requires NCCL: this build has none"
                       : ref::cuda_device_count() == 0 ? "requires CUDA: no CUDA device is visible"
                                                       : nullptr;
  if (reason != nullptr) {
    state.SkipWithError(reason);
    return;
  }
  const std::int64_t count = state.range(0);
  const int ranks = std::min(2, ref::cuda_device_count());
  const std::int64_t iterations = count <= 256 ? 5000 : 1000;
  const std::string dir = lockstep::bench::temp_dir();
  const std::string nccl = "device = \"cuda\"\nbackend = \"nccl\"\n";
  std::vector<double> off, record, ratio;
  int round = 0;
  for (auto _ : state) {
    double t[2] = {0, 0};
    const char* modes[2] = {"off", "record"};
    for (int k = 0; k < 2; ++k) {
      const int m = (k + round) % 2;  // alternate which mode runs first
      t[m] = lockstep::bench::latency_us(dir, modes[m], ranks, iterations, count, nccl);
    }
    ++round;
    if (t[0] <= 0 || t[1] <= 0) {
      state.SkipWithError("a latency scenario on NCCL did not pass");
      break;
    }
    off.push_back(t[0]);
    record.push_back(t[1]);
    ratio.push_back(t[1] / t[0]);
    state.SetIterationTime(t[0] * 1e-6);
  }
  state.counters["off_us"] = median(off);
  state.counters["record_us"] = median(record);
  state.counters["record_ratio"] = median(ratio);
  state.counters["ranks"] = ranks;
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_NcclAllReduce_RecordCost)->Arg(256)->Arg(std::int64_t{8} << 20)->Iterations(7)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace
