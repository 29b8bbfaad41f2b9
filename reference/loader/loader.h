#pragma once
// A minibatch loader over sample_neighbors: it yields the SampledBlocks of batches
// 0 .. num_batches-1 of one epoch, in order, with worker threads or forked worker processes
// sampling ahead. Batch b is exactly sample_neighbors(rows, batches[b], options, key) with
// key = base but key.batch = b, so the worker count and mode never change the result.
//
// Process mode forks its workers in the constructor. A forked child must never touch CUDA
// (the GraphBolt num_workers > 0 crash: a CUDA call in a child forked after the parent
// initialised CUDA). Workers only run host sampling, run with CUDA_VISIBLE_DEVICES="" as a
// backstop, and the constructor refuses to fork once cuda_initialised() is true.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "reference/common/device.h"
#include "reference/graph/graph.h"
#include "reference/sampling/neighbor.h"

namespace lockstep::ref {

// mark_cuda_initialised() / cuda_initialised(): see reference/common/device.h.


struct LoaderOptions {
  int num_workers = 0;  // 0: sample on the caller's thread, inside next()
  int prefetch = 2;     // batches sampled ahead per worker (>= 1), including undelivered ones
  enum class Mode { kThreads, kProcesses } mode = Mode::kThreads;
};

// Serialises `sampled` as the int64 sequence digest() hashes: seeds.size(), seeds...,
// seed_to_output.size(), ..., blocks.size(), then per block dst_nodes, src_nodes, edge_src,
// edge_dst, edge_ids, each as size followed by values.
std::vector<std::int64_t> serialise(const SampledBlocks& sampled);
// Inverse of serialise(). Throws std::runtime_error when `words` is truncated, has a negative
// size or trailing words.
SampledBlocks deserialise(const std::vector<std::int64_t>& words);

// Yields one epoch of sampled minibatches in batch order. Not copyable or movable; next() is
// for one thread at a time. `rows` (see sampling_graph) must outlive the loader; the seed
// lists are copied. Worker threads (kThreads) or processes (kProcesses) claim batches ahead
// of delivery: at most num_workers * prefetch batches are sampled but not yet returned. When
// options.num_threads == 0 and num_workers > 0, each worker samples with
// max(1, hardware_concurrency / num_workers) threads, so workers never oversubscribe the
// cores (the thread count never changes the result).
// For tests only: when set, every forked worker process calls it first, with its parent's
// pid, before it ties its life to the parent with PR_SET_PDEATHSIG. That is the window in
// which the parent can die unnoticed; the worker then checks that its parent is still the
// one that forked it and otherwise exits with code 3 at once. A test holds the workers here
// until their parent is gone, which makes that race deterministic. Set it before
// constructing a loader.
extern void (*loader_worker_start_hook)(int parent_pid);

class NeighborLoader {
 public:
  // Starts the workers (forks them in process mode). Throws std::invalid_argument for
  // num_workers < 0 or prefetch < 1, std::runtime_error when process mode is asked for after
  // cuda_initialised() or a pipe/fork fails (no child is left behind). Process mode: the
  // children die with the thread that constructed the loader (PR_SET_PDEATHSIG), so construct
  // it on a thread that outlives it.
  NeighborLoader(const CsrGraph& rows, std::vector<std::vector<std::int64_t>> batches,
                 SampleOptions options, SampleKey base, LoaderOptions loader = {});
  // Threads: stops and joins every worker (waits for at most one batch per worker in flight).
  // Processes: SIGKILLs and reaps every child. Never leaves a thread or process behind.
  ~NeighborLoader();
  NeighborLoader(const NeighborLoader&) = delete;
  NeighborLoader& operator=(const NeighborLoader&) = delete;

  // Returns the next batch's SampledBlocks (on the host), or nullopt after the last one.
  // Rethrows sample_neighbors' exception for a batch when that batch is reached (later
  // batches are still delivered); throws std::runtime_error when a worker process died.
  std::optional<SampledBlocks> next();

  std::int64_t num_batches() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace lockstep::ref
