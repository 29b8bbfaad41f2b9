// Neighbor sampling against the random-access limit.
//
// BM_Limit_RandomGather sums 8-byte words at 2^24 precomputed random indices into a 512 MiB
// buffer (16x the 32 MiB L3), on 1 and 2 threads; items/s is loads per second.
// BM_SampleNeighbors' items/s is sampled edges per second; over the gather's items/s at the
// same thread count it is the fraction of that limit reached. A sampled edge costs at least two
// such loads (its neighbor and its edge id, in separate CSR arrays), a share of a row-bounds
// load per frontier node, and one node -> local id table access for the relabelling, so the
// ratio cannot exceed about 0.45.
//
// BM_SampleNeighbors_LimitRatio measures that fraction directly, gather and sampling
// interleaved on one thread (medians of per-iteration ratios).
//
// BM_SampleNeighbors samples in-neighbors on an R-MAT graph with 2^20 nodes and 16M drawn
// edges (duplicates and self-loops dropped), 1024 uniformly random seeds per iteration (a new
// batch index and seed set each time), fanouts {15,10,5} or {25,10}, on 1 and 2 threads. The
// graph is generated once (several seconds).
#include <benchmark/benchmark.h>

#include <chrono>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "reference/common/philox.h"
#include "reference/graph/graph.h"
#include "reference/sampling/neighbor.h"

namespace {

using lockstep::ref::CsrGraph;
using lockstep::ref::SampledBlocks;
using lockstep::ref::SampleKey;
using lockstep::ref::SampleOptions;

constexpr std::size_t kGatherWords = (std::size_t{512} << 20) / sizeof(std::uint64_t);
constexpr std::size_t kGatherLoads = std::size_t{1} << 24;
constexpr int kScale = 20;
constexpr std::int64_t kEdges = std::int64_t{16} << 20;
constexpr std::int64_t kBatchSize = 1024;
constexpr std::int64_t kSeedBatches = 64;

const std::vector<std::uint64_t>& gather_buffer() {
  static const std::vector<std::uint64_t> buffer = [] {
    std::vector<std::uint64_t> b(kGatherWords);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = i * 0x9E3779B97F4A7C15ull;
    return b;
  }();
  return buffer;
}

const std::vector<std::uint64_t>& gather_indices() {
  static const std::vector<std::uint64_t> indices = [] {
    std::vector<std::uint64_t> idx(kGatherLoads);
    for (std::size_t i = 0; i < idx.size(); ++i) {
      idx[i] =
          lockstep::ref::uniform_below(lockstep::ref::philox_u64(/*key=*/1, i, 0), kGatherWords);
    }
    return idx;
  }();
  return indices;
}

std::uint64_t gather(const std::uint64_t* buffer, const std::uint64_t* idx, std::size_t n) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum += buffer[idx[i]];
  return sum;
}

void BM_Limit_RandomGather(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const std::uint64_t* buffer = gather_buffer().data();
  const std::uint64_t* idx = gather_indices().data();
  const std::size_t per = kGatherLoads / static_cast<std::size_t>(threads);
  std::vector<std::uint64_t> sums(static_cast<std::size_t>(threads));
  for (auto _ : state) {
    std::vector<std::jthread> workers;
    for (int t = 1; t < threads; ++t) {
      workers.emplace_back([&, t] { sums[t] = gather(buffer, idx + per * t, per); });
    }
    sums[0] = gather(buffer, idx, per);
    workers.clear();  // joins
    benchmark::DoNotOptimize(sums.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(kGatherLoads));
}
BENCHMARK(BM_Limit_RandomGather)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The in-neighbor CSR of the R-MAT graph, built once.
const CsrGraph& bench_graph() {
  static const CsrGraph g = lockstep::ref::sampling_graph(
      lockstep::ref::rmat(kScale, kEdges, /*seed=*/42), /*in_edges=*/true);
  return g;
}

const std::vector<std::int64_t>& seed_pool() {
  static const std::vector<std::int64_t> pool = [] {
    std::vector<std::int64_t> p(static_cast<std::size_t>(kBatchSize * kSeedBatches));
    for (std::size_t i = 0; i < p.size(); ++i) {
      p[i] = static_cast<std::int64_t>(lockstep::ref::uniform_below(
          lockstep::ref::philox_u64(/*key=*/2, i, 0), std::uint64_t{1} << kScale));
    }
    return p;
  }();
  return pool;
}

void BM_SampleNeighbors(benchmark::State& state) {
  static const std::vector<std::vector<std::int64_t>> kFanouts{{15, 10, 5}, {25, 10}};
  const auto& fanouts = kFanouts[static_cast<std::size_t>(state.range(0))];
  const CsrGraph& g = bench_graph();
  const std::vector<std::int64_t>& pool = seed_pool();
  SampleOptions options;
  options.fanouts = fanouts;
  options.num_threads = static_cast<int>(state.range(1));
  std::int64_t batch = 0;
  std::int64_t edges = 0;
  for (auto _ : state) {
    const auto first = pool.begin() + (batch % kSeedBatches) * kBatchSize;
    const std::vector<std::int64_t> seeds(first, first + kBatchSize);
    const SampledBlocks s =
        lockstep::ref::sample_neighbors(g, seeds, options, SampleKey{7, 0, batch, 0});
    for (const auto& b : s.blocks) edges += static_cast<std::int64_t>(b.edge_ids.size());
    ++batch;
    benchmark::DoNotOptimize(s.blocks.data());
  }
  state.SetItemsProcessed(edges);
  std::string label = "fanouts";
  for (const auto f : fanouts) {
    label.push_back(' ');
    label.append(std::to_string(f));
  }
  label.append(", edges/batch ");
  label.append(std::to_string(batch > 0 ? edges / batch : 0));
  state.SetLabel(label);
}
BENCHMARK(BM_SampleNeighbors)
    ->ArgsProduct({{0, 1}, {1, 2}})
    ->ArgNames({"fanouts", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The ratio itself, robust to other jobs on the machine: each iteration runs a random gather of
// 2^22 loads and the sampling of 4 batches back to back on one thread, so drift hits both
// alike. Counters are medians over iterations: loads/s, sampled edges/s and their ratio
// (target >= 0.3).
void BM_SampleNeighbors_LimitRatio(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  static const std::vector<std::vector<std::int64_t>> kFanouts{{15, 10, 5}, {25, 10}};
  constexpr std::size_t kLoads = std::size_t{1} << 22;
  constexpr int kBatches = 4;
  const CsrGraph& g = bench_graph();
  const std::vector<std::int64_t>& pool = seed_pool();
  const std::uint64_t* buffer = gather_buffer().data();
  const std::uint64_t* idx = gather_indices().data();
  SampleOptions options;
  options.fanouts = kFanouts[static_cast<std::size_t>(state.range(0))];
  options.num_threads = 1;
  std::vector<double> loads_per_s, edges_per_s, ratio;
  std::int64_t batch = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    benchmark::DoNotOptimize(gather(buffer, idx + (static_cast<std::size_t>(batch) * kLoads) % kGatherLoads, kLoads));
    const auto t1 = Clock::now();
    std::int64_t edges = 0;
    for (int k = 0; k < kBatches; ++k, ++batch) {
      const auto first = pool.begin() + (batch % kSeedBatches) * kBatchSize;
      const std::vector<std::int64_t> seeds(first, first + kBatchSize);
      const SampledBlocks s = lockstep::ref::sample_neighbors(g, seeds, options, SampleKey{7, 0, batch, 0});
      for (const auto& b : s.blocks) edges += static_cast<std::int64_t>(b.edge_ids.size());
      benchmark::DoNotOptimize(s.blocks.data());
    }
    const auto t2 = Clock::now();
    const double gather_s = std::chrono::duration<double>(t1 - t0).count();
    const double sample_s = std::chrono::duration<double>(t2 - t1).count();
    loads_per_s.push_back(static_cast<double>(kLoads) / gather_s);
    edges_per_s.push_back(static_cast<double>(edges) / sample_s);
    ratio.push_back(edges_per_s.back() / loads_per_s.back());
    state.SetIterationTime(sample_s);
  }
  state.counters["loads_per_s"] = lockstep::bench::median(loads_per_s);
  state.counters["edges_per_s"] = lockstep::bench::median(edges_per_s);
  state.counters["ratio"] = lockstep::bench::median(ratio);
}
BENCHMARK(BM_SampleNeighbors_LimitRatio)
    ->Arg(0)
    ->Arg(1)
    ->ArgName("fanouts")
    ->Iterations(40)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
