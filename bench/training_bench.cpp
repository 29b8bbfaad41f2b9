// Single-process GraphSAGE training throughput (reference/train) per precision mode, against
// the machine's fp32 multiply-add rate measured in the same iteration.
//
// BM_TrainStep/<mode> runs one full training step per iteration on one process: sample the
// blocks of 512 seeds (fanouts {10, 5}) on an Erdős–Rényi graph of 2^15 nodes and 2^19 edges,
// gather the input rows (64 features) from a host table, collate (fp32 / bf16 / bf16_reduce:
// 0 / 1 / 2), forward and backward (hidden 128, 16 classes), round the gradient to bf16 where
// the mode reduces in bf16, and an SGD step. items/s is training samples/s (manual time: the
// step only). In the same
// iteration it times kLimitFlops of the model's inner loop shape (z[o] += a * w[o] + b * v[o]
// over a cache-resident 128 x 128 pair of matrices, vectorised by the compiler): `limit_ratio`
// is the step's dense FLOP rate (2 FLOPs per multiply-add of the layers' matmuls, forward and
// backward) over that rate, a bound no scalar-loop implementation can exceed.
//
// BM_TrainRanks/<ranks>/<mode> runs the `training` workload (same model and batch, 20 steps,
// verify off) as real rank processes through the launcher, and in the same iteration the same
// scenario at world size 1: counters samples_per_s (the workload's metric, global samples over
// training wall time), samples_per_s_1rank and `scaling` = their ratio (ideal: ranks, on a
// machine with a free core per rank; gradient all-reduces over Gloo cost milliseconds here).
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "harness/launch/launcher.h"
#include "harness/scenario/scenario.h"

#include "reference/common/philox.h"
#include "reference/graph/graph.h"
#include "reference/sampling/neighbor.h"
#include "reference/train/sage.h"

namespace {

namespace tr = lockstep::ref::train;
using lockstep::ref::CsrGraph;

constexpr std::int64_t kNodes = std::int64_t{1} << 15;
constexpr std::int64_t kEdges = std::int64_t{1} << 19;
constexpr std::int64_t kBatch = 512;
constexpr std::int64_t kDim = 64;

const CsrGraph& rows() {
  static const CsrGraph g = lockstep::ref::sampling_graph(lockstep::ref::erdos_renyi(kNodes, kEdges, /*seed=*/3), /*in_edges=*/true);
  return g;
}

const std::vector<float>& feature_table() {
  static const std::vector<float> t = [] {
    std::vector<std::int64_t> all(static_cast<std::size_t>(kNodes));
    for (std::int64_t v = 0; v < kNodes; ++v) all[static_cast<std::size_t>(v)] = v;
    std::vector<float> out;
    tr::node_features(3, kDim, all, out);
    return out;
  }();
  return t;
}

const std::vector<std::int32_t>& labels() {
  static const std::vector<std::int32_t> l = tr::node_labels(rows(), 3, kDim, 16);
  return l;
}

// Seconds for `flops` FLOPs of the model's inner-loop shape.
double time_limit_kernel(double flops) {
  constexpr std::size_t n = 128;
  static std::vector<float> w(n * n, 0.001f), v(n * n, 0.002f), z(n, 0.0f);
  const auto rounds = static_cast<std::int64_t>(flops / (4.0 * n * n));
  const auto t0 = std::chrono::steady_clock::now();
  for (std::int64_t r = 0; r < rounds; ++r) {
    for (std::size_t j = 0; j < n; ++j) {
      const float a = 1e-3f * static_cast<float>(j), b = 2e-3f;
      for (std::size_t o = 0; o < n; ++o) z[o] += a * w[j * n + o] + b * v[j * n + o];
    }
    benchmark::DoNotOptimize(z.data());
    benchmark::ClobberMemory();
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void BM_TrainStep(benchmark::State& state) {
  const auto precision = static_cast<tr::Precision>(state.range(0));
  tr::SageConfig c;
  c.in_dim = kDim;
  c.hidden = 128;
  c.num_classes = 16;
  c.activation = tr::SageConfig::Activation::kSilu;
  auto params = tr::init_params(c, 3);
  tr::Optimizer opt;
  lockstep::ref::SampleOptions so;
  so.fanouts = {10, 5};
  so.num_threads = 1;
  const auto& table = feature_table();
  const auto& y_all = labels();
  std::int64_t step = 0, samples = 0;
  double flops_total = 0, step_s = 0, limit_s = 0, limit_flops = 0;
  std::vector<double> ratios;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::int64_t> seeds;
    for (std::int64_t i = 0; i < kBatch; ++i) {
      seeds.push_back(static_cast<std::int64_t>(lockstep::ref::uniform_below(lockstep::ref::philox_u64(9, static_cast<std::uint64_t>(step), static_cast<std::uint64_t>(i)), kNodes)));
    }
    auto blocks = lockstep::ref::sample_neighbors(rows(), seeds, so, lockstep::ref::SampleKey{3, 0, step, 0});
    std::vector<float> x;
    x.reserve(blocks.blocks.back().src_nodes.size() * kDim);
    for (auto v : blocks.blocks.back().src_nodes) x.insert(x.end(), table.begin() + v * kDim, table.begin() + (v + 1) * kDim);
    std::vector<std::int32_t> y;
    for (auto v : seeds) y.push_back(y_all[static_cast<std::size_t>(v)]);
    double flops = 0;
    for (int l = 0; l < c.num_layers; ++l) {
      const auto nd = static_cast<double>(blocks.blocks[static_cast<std::size_t>(c.num_layers - 1 - l)].dst_nodes.size());
      const double in = l == 0 ? kDim : c.hidden, out = l == c.num_layers - 1 ? c.num_classes : c.hidden;
      flops += 3 * 2 * 2 * nd * in * out;  // (self + neigh) multiply-adds; forward + 2x backward
    }
    const tr::Batch batch = tr::collate(std::move(blocks), std::move(x), kDim, std::move(y), precision);
    std::vector<float> grads(params.size(), 0.0f);
    benchmark::DoNotOptimize(tr::train_step_grads(c, params, batch, grads));
    for (auto& g : grads) {
      if (batch.grad_sync == tr::BatchDType::kBF16) g = tr::round_bf16(g);
      g /= static_cast<float>(kBatch);
    }
    opt.step(params, grads);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(s);
    const double ls = time_limit_kernel(flops);
    ratios.push_back((flops / s) / (flops / ls));
    step_s += s;
    limit_s += ls;
    limit_flops += flops;
    flops_total += flops;
    samples += kBatch;
    ++step;
  }
  std::sort(ratios.begin(), ratios.end());
  state.SetItemsProcessed(samples);
  state.counters["step_gflops"] = flops_total / step_s * 1e-9;
  state.counters["limit_gflops"] = limit_flops / limit_s * 1e-9;
  state.counters["limit_ratio"] = ratios.empty() ? 0 : ratios[ratios.size() / 2];
  state.SetLabel(tr::to_string(precision));
}

std::string temp_dir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "lockstep-train-bench-XXXXXX").string();
  return mkdtemp(tmpl.data());
}

// Runs the training scenario at `ranks` and returns its samples_per_s metric, or -1.
double scenario_samples_per_s(const std::string& dir, int ranks, const std::string& precision) {
  const std::string file = dir + "/train_" + precision + "_" + std::to_string(ranks) + ".toml";
  std::ofstream(file) << "name = \"bench.train_" << precision << "_" << ranks << "\"\n"
                      << "[run]\nworld_size = " << ranks << "\nverify = \"off\"\ntimeout_s = 300\n"
                      << "[workload]\nkind = \"training\"\ngraph = \"erdos_renyi\"\nnodes = " << kNodes << "\nedges = " << kEdges
                      << "\nfeature_dim = " << kDim << "\nhidden = 128\nnum_classes = 16\nfanouts = [10, 5]\nbatch_size = " << kBatch
                      << "\nnum_train = 10240\nnum_eval = 0\nsteps = 20\nbucket_bytes = 262144\nprecision = \"" << precision
                      << "\"\n[expect]\noutcome = \"pass\"\n";
  auto scenarios = lockstep::scenario::load_file(file);
  lockstep::launch::LaunchOptions opts;
  opts.binary = LOCKSTEP_BINARY;
  opts.report_dir = dir + "/report";
  const auto res = lockstep::launch::run_scenario(scenarios.at(0), opts);
  if (res.status != lockstep::report::Status::kPass) return -1;
  return res.metrics.at("samples_per_s");
}

void BM_TrainRanks(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const std::string precision = tr::to_string(static_cast<tr::Precision>(state.range(1)));
  const std::string dir = temp_dir();
  std::vector<double> multi, single, scaling;
  for (auto _ : state) {
    const double m = scenario_samples_per_s(dir, ranks, precision);
    const double s = scenario_samples_per_s(dir, 1, precision);
    if (m <= 0 || s <= 0) {
      state.SkipWithError("a training scenario did not pass");
      break;
    }
    multi.push_back(m);
    single.push_back(s);
    scaling.push_back(m / s);
    state.SetIterationTime(static_cast<double>(kBatch) * 20 / m);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  state.counters["samples_per_s"] = median(multi);
  state.counters["samples_per_s_1rank"] = median(single);
  state.counters["scaling"] = median(scaling);
  state.SetLabel(precision);
  std::filesystem::remove_all(dir);
}

BENCHMARK(BM_TrainRanks)->Args({2, 0})->Args({2, 1})->Iterations(3)->UseManualTime()->Unit(benchmark::kMillisecond);

BENCHMARK(BM_TrainStep)->Arg(0)->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace
