// Partition-book lookups against the memory-bandwidth limit.
//
// BM_Limit_StreamCopy copies a 256 MiB buffer (far larger than the caches) with memcpy on 1
// and 2 threads; bytes/s counts bytes read plus bytes written. BM_RangeLookup and
// BM_MapLookup run nid2partid on 2^24 random int64 ids of 2^24 nodes in 8 parts, on 1 and
// 2 threads, counting 12 bytes per id (8 read, 4 written): their bytes/s over the stream
// copy's at the same thread count is the fraction of the limit reached. They reuse one
// output array, as a training loop would; the *Alloc variants call the allocating overload
// to show what a fresh result array costs (IdArray zero-fills it first).
// BM_RangeLookup_LimitRatio measures that fraction directly, copy and lookup interleaved.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "reference/partition/book.h"

namespace {

using lockstep::ref::Device;
using lockstep::ref::IdArray;
using lockstep::ref::IdSpan;
using lockstep::ref::IdType;
using lockstep::ref::MapPartitionBook;
using lockstep::ref::PartitionBook;
using lockstep::ref::RangePartitionBook;

constexpr std::int64_t kIds = std::int64_t{1} << 24;
constexpr std::int64_t kNodes = std::int64_t{1} << 24;
constexpr int kParts = 8;
constexpr std::size_t kCopyBytes = std::size_t{256} << 20;

// Copies src to dst on `threads` threads, one contiguous slice each (started per call, as
// the books start theirs).
void stream_copy(const std::vector<unsigned char>& src, std::vector<unsigned char>& dst,
                 int threads) {
  const std::size_t per = src.size() / static_cast<std::size_t>(threads);
  std::vector<std::jthread> workers;
  for (int t = 1; t < threads; ++t) {
    workers.emplace_back([&, t] { std::memcpy(dst.data() + per * t, src.data() + per * t, per); });
  }
  std::memcpy(dst.data(), src.data(), per);
  workers.clear();  // joins
  benchmark::DoNotOptimize(dst.data());
  benchmark::ClobberMemory();
}

void BM_Limit_StreamCopy(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  std::vector<unsigned char> src(kCopyBytes, 1), dst(kCopyBytes, 0);
  for (auto _ : state) stream_copy(src, dst, threads);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(2 * kCopyBytes));
}
BENCHMARK(BM_Limit_StreamCopy)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

const IdArray& random_ids() {
  static const IdArray ids = [] {
    std::mt19937_64 rng(42);
    std::vector<std::int64_t> v(static_cast<std::size_t>(kIds));
    for (auto& id : v) id = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(kNodes));
    return IdArray::from_host(v, IdType::kI64, Device{});
  }();
  return ids;
}

std::vector<std::int64_t> equal_offsets() {
  std::vector<std::int64_t> offsets;
  for (int p = 0; p <= kParts; ++p) offsets.push_back(kNodes * p / kParts);
  return offsets;
}

std::vector<std::int32_t> equal_part_of() {
  std::vector<std::int32_t> part_of(static_cast<std::size_t>(kNodes));
  for (std::int64_t v = 0; v < kNodes; ++v) {
    part_of[static_cast<std::size_t>(v)] = static_cast<std::int32_t>(v * kParts / kNodes);
  }
  return part_of;
}

void run_lookup(benchmark::State& state, PartitionBook& book, bool reuse) {
  book.set_threads(static_cast<int>(state.range(0)));
  const IdSpan ids = random_ids().span();
  IdArray out;
  for (auto _ : state) {
    if (reuse) {
      book.nid2partid(ids, out);
    } else {
      out = book.nid2partid(ids);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kIds);
  state.SetBytesProcessed(state.iterations() * kIds * 12);
}

void BM_RangeLookup(benchmark::State& state) {
  RangePartitionBook book(equal_offsets());
  run_lookup(state, book, /*reuse=*/true);
}
BENCHMARK(BM_RangeLookup)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_RangeLookupAlloc(benchmark::State& state) {
  RangePartitionBook book(equal_offsets());
  run_lookup(state, book, /*reuse=*/false);
}
BENCHMARK(BM_RangeLookupAlloc)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

using lockstep::bench::median;

// The ratio itself, robust to other jobs on the machine: each iteration runs the stream copy
// and the range lookup back to back, so drift hits both alike; counters are medians over
// iterations of GB/s (10^9 bytes) and of lookup bytes/s over copy bytes/s.
void BM_RangeLookup_LimitRatio(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  const int threads = static_cast<int>(state.range(0));
  RangePartitionBook book(equal_offsets());
  book.set_threads(threads);
  const IdSpan ids = random_ids().span();
  IdArray out;
  std::vector<unsigned char> src(kCopyBytes, 1), dst(kCopyBytes, 0);
  std::vector<double> copy_gbs, lookup_gbs, ratio;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    stream_copy(src, dst, threads);
    const auto t1 = Clock::now();
    book.nid2partid(ids, out);
    benchmark::DoNotOptimize(out.data());
    const auto t2 = Clock::now();
    const double copy_s = std::chrono::duration<double>(t1 - t0).count();
    const double lookup_s = std::chrono::duration<double>(t2 - t1).count();
    copy_gbs.push_back(2.0 * static_cast<double>(kCopyBytes) / copy_s / 1e9);
    lookup_gbs.push_back(12.0 * static_cast<double>(kIds) / lookup_s / 1e9);
    ratio.push_back(lookup_gbs.back() / copy_gbs.back());
    state.SetIterationTime(lookup_s);
  }
  state.counters["copy_GBps"] = median(copy_gbs);
  state.counters["lookup_GBps"] = median(lookup_gbs);
  state.counters["ratio"] = median(ratio);
}
BENCHMARK(BM_RangeLookup_LimitRatio)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->Iterations(40)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

void BM_MapLookup(benchmark::State& state) {
  static MapPartitionBook book(equal_part_of(), kParts);
  run_lookup(state, book, /*reuse=*/true);
}
BENCHMARK(BM_MapLookup)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_MapLookupAlloc(benchmark::State& state) {
  static MapPartitionBook book(equal_part_of(), kParts);
  run_lookup(state, book, /*reuse=*/false);
}
BENCHMARK(BM_MapLookupAlloc)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
