// NeighborLoader throughput against worker count (threads mode).
//
// BM_NeighborLoader drains one epoch per iteration: 256 batches of 512 uniformly random seeds
// (philox, fixed) on an R-MAT graph with 2^16 nodes and 2^20 drawn edges (duplicates and
// self-loops dropped; generated once), sampling in-neighbors with fanouts {10, 5}. Arg is
// num_workers (0: sampling inside next() on the caller's thread). items/s is sampled edges per
// second, over wall time (the work runs on worker threads). Worker count must never make it
// slower: 1 and 2 workers should match or beat 0.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "reference/common/philox.h"
#include "reference/graph/graph.h"
#include "reference/loader/loader.h"
#include "reference/sampling/neighbor.h"

namespace {

using lockstep::ref::CsrGraph;
using lockstep::ref::LoaderOptions;
using lockstep::ref::NeighborLoader;
using lockstep::ref::SampleKey;
using lockstep::ref::SampleOptions;

constexpr int kScale = 16;
constexpr std::int64_t kEdges = std::int64_t{1} << 20;
constexpr std::int64_t kBatches = 256;
constexpr std::int64_t kBatchSize = 512;

const CsrGraph& loader_rows() {
  static const CsrGraph g = lockstep::ref::sampling_graph(
      lockstep::ref::rmat(kScale, kEdges, /*seed=*/16), /*in_edges=*/true);
  return g;
}

const std::vector<std::vector<std::int64_t>>& loader_batches() {
  static const std::vector<std::vector<std::int64_t>> batches = [] {
    std::vector<std::vector<std::int64_t>> out(kBatches);
    const auto n = static_cast<std::uint64_t>(loader_rows().num_nodes);
    for (std::int64_t b = 0; b < kBatches; ++b) {
      for (std::int64_t i = 0; i < kBatchSize; ++i) {
        out[static_cast<std::size_t>(b)].push_back(static_cast<std::int64_t>(
            lockstep::ref::uniform_below(lockstep::ref::philox_u64(/*key=*/5, b, i), n)));
      }
    }
    return out;
  }();
  return batches;
}

void BM_NeighborLoader(benchmark::State& state) {
  const CsrGraph& rows = loader_rows();
  const auto& batches = loader_batches();
  SampleOptions options;
  options.fanouts = {10, 5};
  LoaderOptions loader_options;
  loader_options.num_workers = static_cast<int>(state.range(0));
  loader_options.mode = LoaderOptions::Mode::kThreads;
  std::int64_t edges = 0;
  for (auto _ : state) {
    NeighborLoader loader(rows, batches, options, SampleKey{/*seed=*/1, /*epoch=*/0, 0, 0},
                          loader_options);
    while (auto sampled = loader.next()) {
      for (const auto& block : sampled->blocks) {
        edges += static_cast<std::int64_t>(block.edge_ids.size());
      }
      benchmark::DoNotOptimize(sampled);
    }
  }
  state.SetItemsProcessed(edges);
}
BENCHMARK(BM_NeighborLoader)->Arg(0)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
