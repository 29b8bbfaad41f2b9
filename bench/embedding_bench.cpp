// DistEmbedding local pull against LibTorch's row gather.
//
// A 2^20-row f32 table (D = 16: 64 MiB; D = 128: 512 MiB, far larger than the caches) is
// held by one DistEmbedding at world size 1 (every row local; the transport's exchanges are
// empty). Each iteration pulls one batch of 2^16 uniformly random int64 ids; 16 batches rotate
// (2^20 ids), so the rows gathered are spread over the whole table rather than cached from the
// previous iteration. bytes/s counts the rows returned (ids x D x 4).
//   BM_EmbeddingPull/D           pull(ids): book lookups, gather, result allocation
//   BM_Limit_IndexSelect/D       at::index_select(table, 0, ids) on the same memory (a tensor
//                                wrapping the shard's rows), the same ids, a fresh result
//   BM_EmbeddingPull_LimitRatio/D  both back to back in each iteration on two different
//                                batches (so neither finds the other's rows in cache), alternating
//                                which goes first; every batch is gathered by both over the run;
//                                counter `ratio` = median(index_select time / pull time), the
//                                fraction of the limit reached (target >= 0.6)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "harness/torch/row_gather.h"
#include "reference/embedding/embedding.h"

namespace {

using lockstep::ref::DistEmbedding;
using lockstep::ref::EmbeddingOptions;
using lockstep::ref::IdSpan;
using lockstep::ref::IdType;

constexpr std::int64_t kRows = std::int64_t{1} << 20;
constexpr std::int64_t kIds = std::int64_t{1} << 16;
constexpr std::int64_t kBatches = 16;

// World size 1: every exchange is with this rank itself, and a pull never sends anything.
class SelfTransport final : public lockstep::ref::EmbeddingTransport {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::vector<std::int64_t> exchange_ids(const std::vector<std::int64_t>& data, const std::vector<std::int64_t>& send_counts,
                                         std::vector<std::int64_t>& recv_counts) override {
    recv_counts = send_counts;
    return data;
  }
  std::vector<float> exchange_values(const std::vector<float>& data, const std::vector<std::int64_t>&,
                                     const std::vector<std::int64_t>&) override {
    return data;
  }
};

struct Fixture {
  explicit Fixture(std::int64_t dim) {
    EmbeddingOptions eo;
    eo.dim = dim;
    emb = std::make_unique<DistEmbedding>(lockstep::ref::even_range_book(kRows, 1), eo, transport);
    gather = std::make_unique<lockstep::torchref::TorchRowGather>(emb->shard().f32_data(), kRows, dim);
    std::mt19937_64 rng(1);
    std::uniform_int_distribution<std::int64_t> pick(0, kRows - 1);
    ids.resize(kIds * kBatches);
    for (auto& id : ids) id = pick(rng);
  }
  const std::int64_t* batch(std::int64_t b) const { return ids.data() + (b % kBatches) * kIds; }
  IdSpan span(std::int64_t b) const { return IdSpan{batch(b), kIds, IdType::kI64, {}}; }
  SelfTransport transport;
  std::unique_ptr<DistEmbedding> emb;
  std::unique_ptr<lockstep::torchref::TorchRowGather> gather;
  std::vector<std::int64_t> ids;
};

Fixture& fixture(std::int64_t dim) {
  static std::unique_ptr<Fixture> f;
  if (!f || f->emb->shard().dim() != dim) {
    f.reset();
    f = std::make_unique<Fixture>(dim);
  }
  return *f;
}

void BM_EmbeddingPull(benchmark::State& state) {
  auto& f = fixture(state.range(0));
  std::int64_t b = 0;
  for (auto _ : state) {
    auto rows = f.emb->pull(f.span(b++));
    benchmark::DoNotOptimize(rows.host_data());
  }
  state.SetBytesProcessed(state.iterations() * kIds * state.range(0) * 4);
}
BENCHMARK(BM_EmbeddingPull)->Arg(16)->Arg(128)->Unit(benchmark::kMicrosecond);

void BM_Limit_IndexSelect(benchmark::State& state) {
  auto& f = fixture(state.range(0));
  std::int64_t b = 0;
  for (auto _ : state) benchmark::DoNotOptimize(f.gather->gather(f.batch(b++), kIds));
  state.SetBytesProcessed(state.iterations() * kIds * state.range(0) * 4);
}
BENCHMARK(BM_Limit_IndexSelect)->Arg(16)->Arg(128)->Unit(benchmark::kMicrosecond);

void BM_EmbeddingPull_LimitRatio(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  auto& f = fixture(state.range(0));
  std::vector<double> ratio;
  bool pull_first = true;
  std::int64_t b = 0;
  for (auto _ : state) {
    double pull_s = 0, limit_s = 0;
    for (int k = 0; k < 2; ++k) {
      const auto t0 = Clock::now();
      if ((k == 0) == pull_first) {
        auto rows = f.emb->pull(f.span(b));
        benchmark::DoNotOptimize(rows.host_data());
        pull_s = std::chrono::duration<double>(Clock::now() - t0).count();
      } else {
        benchmark::DoNotOptimize(f.gather->gather(f.batch(b + 1), kIds));
        limit_s = std::chrono::duration<double>(Clock::now() - t0).count();
      }
    }
    pull_first = !pull_first;
    b += pull_first ? 1 : 2;  // batches (b, b + 1), then (b + 1, b + 2) the other way round, ...
    ratio.push_back(limit_s / pull_s);
  }
  std::sort(ratio.begin(), ratio.end());
  state.counters["ratio"] = ratio.empty() ? 0 : ratio[ratio.size() / 2];
  state.SetBytesProcessed(state.iterations() * 2 * kIds * state.range(0) * 4);
}
BENCHMARK(BM_EmbeddingPull_LimitRatio)->Arg(16)->Arg(128)->Unit(benchmark::kMicrosecond);

}  // namespace
