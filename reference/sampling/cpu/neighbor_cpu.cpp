// Host kernels of neighbor sampling (definition in sampling/neighbor.h).
//
// Rows are sampled in passes that each keep many independent memory accesses in flight (a
// node-at-a-time loop stalls on every row it reads): row bounds of all nodes of a chunk, all
// Philox draws (vectorised), positions (Fisher-Yates bookkeeping, no graph access), then one
// gather of neighbors and edge ids.
//
// Per node, the partial Fisher-Yates keeps only the displaced entries of the virtual array
// p = (0, ..., d-1) in a small table: position j reads back j unless an earlier swap wrote it.
//
// Multi-hop: each hop's frontier is cut into fixed chunks of kChunk nodes, each sampled into
// its own buffers. One thread merges the buffers in chunk order, assigning local ids to new
// neighbors through a node -> local id table shared by all hops (hop h+1's src ids extend
// hop h's). With several threads the others sample chunks (claimed in any order) while the
// merging thread follows, sampling chunks itself when the next one is not ready. Per-node
// results are pure and the merge order is fixed, so the output never depends on the thread
// count or on which thread sampled what.
#include <algorithm>
#include <atomic>
#include <bit>
#include <exception>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "reference/common/philox.h"
#include "reference/sampling/sample_one.h"
#include "reference/sampling/neighbor.h"

namespace lockstep::ref::detail {

namespace {

constexpr std::int64_t kChunk = 256;  // frontier nodes per work unit

// sample_count without the argument checks (arguments are checked by the callers).
using sample_one::count;
// Whether a node of degree d needs random draws (otherwise it takes its whole row or nothing).
using sample_one::draws;

// Displaced entries of the virtual array of a partial Fisher-Yates: get(j) is j unless set(j)
// was called since the last reset(). Open addressing on the low bits of j (positions are
// uniform draws, and a row of at most `cap` positions never collides), at most a quarter
// full; entries of earlier resets are told apart by a generation number, so reset() is O(1).
class SwapTable {
 public:
  void reset(std::int64_t fanout) {
    std::size_t cap = 64;
    while (cap < static_cast<std::size_t>(fanout) * 4) cap <<= 1;
    if (slots_.size() < cap) slots_.assign(cap, Entry{0, 0, 0});
    mask_ = cap - 1;
    ++generation_;
  }

  std::int64_t get(std::int64_t j) const {
    for (std::size_t s = static_cast<std::size_t>(j) & mask_;; s = (s + 1) & mask_) {
      const Entry& e = slots_[s];
      if (e.generation != generation_) return j;
      if (e.pos == j) return e.val;
    }
  }

  void set(std::int64_t j, std::int64_t v) {
    for (std::size_t s = static_cast<std::size_t>(j) & mask_;; s = (s + 1) & mask_) {
      Entry& e = slots_[s];
      if (e.generation != generation_ || e.pos == j) {
        e = Entry{j, v, generation_};
        return;
      }
    }
  }

 private:
  struct Entry {
    std::int64_t pos;
    std::int64_t val;
    std::uint64_t generation;
  };
  std::vector<Entry> slots_;
  std::size_t mask_ = 0;
  std::uint64_t generation_ = 0;
};

// Philox4x32-10 (common/philox.h) of counters (c0[i], stream_counter(kSampleDraw, sub[i])) under
// `key`, as the two 64-bit words w0[i], w1[i]. Written on 32-bit lanes so that it vectorises;
// cloned for AVX2 and AVX-512 (the build targets plain x86-64), the loader picks the clone.
#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define LOCKSTEP_REF_SAMPLE_CLONES __attribute__((target_clones("default", "avx2", "avx512f")))
#endif
#endif
#ifndef LOCKSTEP_REF_SAMPLE_CLONES
#define LOCKSTEP_REF_SAMPLE_CLONES
#endif

LOCKSTEP_REF_SAMPLE_CLONES
void philox_draws(std::uint64_t key, const std::uint64_t* __restrict c0,
                  const std::uint32_t* __restrict sub, std::size_t n, std::uint64_t* __restrict w0,
                  std::uint64_t* __restrict w1) {
  std::uint32_t ka[10];
  std::uint32_t kb[10];
  ka[0] = static_cast<std::uint32_t>(key);
  kb[0] = static_cast<std::uint32_t>(key >> 32);
  for (int r = 1; r < 10; ++r) {
    ka[r] = ka[r - 1] + kPhiloxW0;
    kb[r] = kb[r - 1] + kPhiloxW1;
  }
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t x0 = static_cast<std::uint32_t>(c0[i]);
    std::uint32_t x1 = static_cast<std::uint32_t>(c0[i] >> 32);
    std::uint32_t x2 = sub[i];
    std::uint32_t x3 = streams::kSampleDraw;
#pragma GCC unroll 10
    for (int r = 0; r < 10; ++r) {
      const std::uint64_t p0 = std::uint64_t{kPhiloxM0} * x0;
      const std::uint64_t p1 = std::uint64_t{kPhiloxM1} * x2;
      x0 = static_cast<std::uint32_t>(p1 >> 32) ^ x1 ^ ka[r];
      x1 = static_cast<std::uint32_t>(p1);
      x2 = static_cast<std::uint32_t>(p0 >> 32) ^ x3 ^ kb[r];
      x3 = static_cast<std::uint32_t>(p0);
    }
    w0[i] = x0 | (std::uint64_t{x1} << 32);
    w1[i] = x2 | (std::uint64_t{x3} << 32);
  }
}

// Samples nodes whose CSR rows lie in shared base arrays, in the passes described at the top.
// Holds reusable scratch; one per thread.
class RowSampler {
 public:
  // Plans the sample of nodes i in [0, n), node[i]'s row being positions
  // [row[i], row[i] + degree[i]) of the CSR arrays: writes each node's count to counts[i] and
  // the CSR positions to sample, node after node, to positions(). Returns their number.
  std::size_t plan(const std::int64_t* node, const std::int64_t* row, const std::int64_t* degree,
                   std::size_t n, std::int64_t fanout, bool replace, std::uint64_t hop_key,
                   std::int64_t* counts) {
    const std::int64_t calls_per_node = fanout > 0 ? (fanout + 1) / 2 : 0;
    std::size_t total = 0;
    std::size_t calls = 0;
    for (std::size_t i = 0; i < n; ++i) {
      counts[i] = count(degree[i], fanout, replace);
      total += static_cast<std::size_t>(counts[i]);
      if (draws(degree[i], fanout, replace)) calls += static_cast<std::size_t>(calls_per_node);
    }
    call_node_.resize(calls);
    call_sub_.resize(calls);
    w0_.resize(calls);
    w1_.resize(calls);
    std::size_t c = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (!draws(degree[i], fanout, replace)) continue;
      for (std::int64_t m = 0; m < calls_per_node; ++m, ++c) {
        call_node_[c] = static_cast<std::uint64_t>(node[i]);
        call_sub_[c] = static_cast<std::uint32_t>(m);
      }
    }
    philox_draws(hop_key, call_node_.data(), call_sub_.data(), calls, w0_.data(), w1_.data());

    pos_.resize(total);
    std::int64_t* pos = pos_.data();
    c = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t d = degree[i];
      const std::int64_t r = row[i];
      if (!draws(d, fanout, replace)) {
        for (std::int64_t e = 0; e < counts[i]; ++e) *pos++ = r + e;
        continue;
      }
      const auto bits = [&](std::int64_t k) {
        const std::size_t at = c + static_cast<std::size_t>(k >> 1);
        return (k & 1) != 0 ? w1_[at] : w0_[at];
      };
      const auto ud = static_cast<std::uint64_t>(d);
      if (replace) {
        for (std::int64_t k = 0; k < fanout; ++k) {
          *pos++ = r + static_cast<std::int64_t>(uniform_below(bits(k), ud));
        }
      } else {
        table_.reset(fanout);
        for (std::int64_t k = 0; k < fanout; ++k) {
          const std::int64_t j = k + static_cast<std::int64_t>(uniform_below(
                                         bits(k), ud - static_cast<std::uint64_t>(k)));
          *pos++ = r + table_.get(j);
          if (j != k) table_.set(j, table_.get(k));
        }
      }
      c += static_cast<std::size_t>(calls_per_node);
    }
    return total;
  }

  // The positions of the last plan().
  const std::int64_t* positions() const { return pos_.data(); }

  // Writes the neighbors and edge ids at the planned positions to out_nbrs / out_eids.
  void gather(const std::int64_t* nbrs, const std::int64_t* eids, std::int64_t* __restrict out_nbrs,
              std::int64_t* __restrict out_eids) const {
    const std::int64_t* pos = pos_.data();
    for (std::size_t t = 0; t < pos_.size(); ++t) {
      out_nbrs[t] = nbrs[pos[t]];
      out_eids[t] = eids[pos[t]];
    }
  }

 private:
  std::vector<std::uint64_t> call_node_;
  std::vector<std::uint32_t> call_sub_;
  std::vector<std::uint64_t> w0_;
  std::vector<std::uint64_t> w1_;
  std::vector<std::int64_t> pos_;
  SwapTable table_;
};

// Node id -> local id, open addressing with linear probing from the top bits of a Fibonacci
// hash; grows at half load. U is uint32_t when every node id fits below its all-ones value
// (halving the table, which is what the merge waits on), else uint64_t.
template <class U>
class NodeIndex {
 public:
  explicit NodeIndex(std::size_t expected) {
    std::size_t cap = 1024;
    while (cap < expected * 2) cap <<= 1;
    resize(cap);
  }

  void prefetch(std::int64_t node) const { __builtin_prefetch(&slots_[home(node)]); }

  // Makes room for `entries` entries in all, so that inserting up to that many never grows the
  // table (growing mid-merge costs a rehash of everything so far).
  void reserve(std::size_t entries) {
    if (entries * 2 <= slots_.size()) return;
    std::size_t cap = slots_.size();
    while (cap < entries * 2) cap <<= 1;
    rehash(cap);
  }

  // Returns the local id of `node` (>= 0), giving it the next one (and appending it to `nodes`)
  // when it is new.
  std::int64_t insert(std::int64_t node, std::vector<std::int64_t>& nodes) {
    const auto key = static_cast<U>(node);
    for (std::size_t s = home(node);; s = (s + 1) & mask_) {
      Slot& slot = slots_[s];
      if (slot.node == key) return static_cast<std::int64_t>(slot.local);
      if (slot.node == kEmpty) {
        const auto local = static_cast<std::int64_t>(nodes.size());
        slot = Slot{key, static_cast<U>(local)};
        nodes.push_back(node);
        if (++size_ * 2 > slots_.size()) rehash(slots_.size() * 2);
        return local;
      }
    }
  }

 private:
  static constexpr U kEmpty = std::numeric_limits<U>::max();
  struct Slot {
    U node;
    U local;
  };

  std::size_t home(std::int64_t node) const {
    return static_cast<std::size_t>((static_cast<std::uint64_t>(node) * 0x9E3779B97F4A7C15ull) >>
                                    shift_);
  }

  void resize(std::size_t cap) {
    slots_.assign(cap, Slot{kEmpty, 0});
    mask_ = cap - 1;
    shift_ = 64 - std::countr_zero(cap);
  }

  void rehash(std::size_t cap) {
    std::vector<Slot> old = std::move(slots_);
    resize(cap);
    for (const Slot& o : old) {
      if (o.node == kEmpty) continue;
      for (std::size_t s = home(static_cast<std::int64_t>(o.node));; s = (s + 1) & mask_) {
        if (slots_[s].node == kEmpty) {
          slots_[s] = o;
          break;
        }
      }
    }
  }

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  int shift_ = 64;
  std::size_t size_ = 0;
};

// Node id -> local id in a flat array over all node ids (one 4-byte slot per node, cached per
// thread and sized to the largest graph seen), for graphs of at most kFlatMaxNodes nodes:
// one access per lookup in an array a quarter the size of NodeIndex's, so more of it stays in
// cache. The destructor empties the slots it filled, so the next use starts clean.
constexpr std::int64_t kFlatMaxNodes = std::int64_t{1} << 26;

class FlatIndex {
 public:
  explicit FlatIndex(std::int64_t num_nodes) : slots_(storage()) {
    if (slots_.size() < static_cast<std::size_t>(num_nodes)) slots_.resize(static_cast<std::size_t>(num_nodes), kEmpty);
  }
  ~FlatIndex() {
    for (const std::int64_t node : touched_) slots_[static_cast<std::size_t>(node)] = kEmpty;
  }
  FlatIndex(const FlatIndex&) = delete;
  FlatIndex& operator=(const FlatIndex&) = delete;

  void prefetch(std::int64_t node) const { __builtin_prefetch(&slots_[static_cast<std::size_t>(node)]); }
  void reserve(std::size_t entries) { touched_.reserve(entries); }

  std::int64_t insert(std::int64_t node, std::vector<std::int64_t>& nodes) {
    std::uint32_t& slot = slots_[static_cast<std::size_t>(node)];
    if (slot != kEmpty) return slot;
    const auto local = static_cast<std::uint32_t>(nodes.size());
    slot = local;
    nodes.push_back(node);
    touched_.push_back(node);
    return local;
  }

 private:
  static constexpr std::uint32_t kEmpty = std::numeric_limits<std::uint32_t>::max();
  static std::vector<std::uint32_t>& storage() {
    thread_local std::vector<std::uint32_t> slots;
    return slots;
  }
  std::vector<std::uint32_t>& slots_;
  std::vector<std::int64_t> touched_;
};

struct ChunkSample {
  std::vector<std::int64_t> counts;  // per node of the chunk
  std::vector<std::int64_t> nbrs;
  std::vector<std::int64_t> eids;
};

// Per-thread scratch.
struct Worker {
  std::vector<std::int64_t> row;
  std::vector<std::int64_t> degree;
  RowSampler sampler;
};

// Plans frontier nodes [begin, end) of one chunk (w.sampler holds the positions), sizes
// out's buffers and returns the number of sampled pairs.
std::size_t plan_chunk(const CsrGraph& g, const std::vector<std::int64_t>& frontier,
                       std::int64_t begin, std::int64_t end, std::int64_t fanout, bool replace,
                       std::uint64_t hop_key, ChunkSample& out, Worker& w) {
  const auto n = static_cast<std::size_t>(end - begin);
  const std::int64_t* node = frontier.data() + begin;
  w.row.resize(n);
  w.degree.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto v = static_cast<std::size_t>(node[i]);
    w.row[i] = g.indptr[v];
    w.degree[i] = g.indptr[v + 1] - w.row[i];
  }
  // Start fetching the first line of every row now, so the draws below overlap with the
  // memory traffic and the gather finds most rows in cache (rows of low-degree nodes fit).
  for (std::size_t i = 0; i < n; ++i) {
    if (w.degree[i] == 0) continue;
    __builtin_prefetch(g.indices.data() + w.row[i], 0, 2);
    __builtin_prefetch(g.edge_ids.data() + w.row[i], 0, 2);
  }
  out.counts.resize(n);
  const std::size_t total = w.sampler.plan(node, w.row.data(), w.degree.data(), n, fanout, replace,
                                           hop_key, out.counts.data());
  out.nbrs.resize(total);
  out.eids.resize(total);
  return total;
}

// Samples frontier nodes [begin, end) of one chunk into `out`.
void sample_chunk(const CsrGraph& g, const std::vector<std::int64_t>& frontier, std::int64_t begin,
                  std::int64_t end, std::int64_t fanout, bool replace, std::uint64_t hop_key,
                  ChunkSample& out, Worker& w) {
  plan_chunk(g, frontier, begin, end, fanout, replace, hop_key, out, w);
  w.sampler.gather(g.indices.data(), g.edge_ids.data(), out.nbrs.data(), out.eids.data());
}

// Appends a chunk (frontier nodes from `begin`) to block `b`, assigning local src ids. Table
// slots are prefetched kPrefetch edges ahead, so that lookups overlap. Throws
// std::out_of_range naming the first neighbor outside [0, num_nodes).
template <class Index>
void merge_chunk(const ChunkSample& chunk, std::int64_t begin, std::int64_t num_nodes, int hop,
                 Index& index, Block& b) {
  constexpr std::size_t kPrefetch = 8;
  const std::size_t m = chunk.nbrs.size();
  const std::int64_t* nbrs = chunk.nbrs.data();
  bool bad = false;
  for (std::size_t e = 0; e < m; ++e) {
    bad |= static_cast<std::uint64_t>(nbrs[e]) >= static_cast<std::uint64_t>(num_nodes);
  }
  if (bad) {
    std::size_t e = 0;
    for (std::size_t i = 0; i < chunk.counts.size(); ++i) {
      for (std::int64_t k = 0; k < chunk.counts[i]; ++k, ++e) {
        if (nbrs[e] >= 0 && nbrs[e] < num_nodes) continue;
        throw std::out_of_range("sample_neighbors: hop " + std::to_string(hop) + ", node " +
                                std::to_string(b.dst_nodes[static_cast<std::size_t>(begin) + i]) +
                                ": neighbor " + std::to_string(nbrs[e]) + " (edge id " +
                                std::to_string(chunk.eids[e]) + ") is out of range [0, " +
                                std::to_string(num_nodes) + ")");
      }
    }
  }
  const std::size_t base = b.edge_src.size();
  b.edge_src.resize(base + m);
  b.edge_dst.resize(base + m);
  std::int64_t* src = b.edge_src.data() + base;
  std::int64_t* dst = b.edge_dst.data() + base;
  for (std::size_t e = 0; e < std::min(m, kPrefetch); ++e) index.prefetch(nbrs[e]);
  std::size_t e = 0;
  for (std::size_t i = 0; i < chunk.counts.size(); ++i) {
    const std::int64_t local_dst = begin + static_cast<std::int64_t>(i);
    for (std::int64_t k = 0; k < chunk.counts[i]; ++k, ++e) {
      if (e + kPrefetch < m) index.prefetch(nbrs[e + kPrefetch]);
      src[e] = index.insert(nbrs[e], b.src_nodes);
      dst[e] = local_dst;
    }
  }
  b.edge_ids.insert(b.edge_ids.end(), chunk.eids.begin(), chunk.eids.end());
}

// Samples and merges one hop whose block `b` has its dst_nodes (and src_nodes = dst_nodes)
// set, on `workers.size()` threads.
template <class Index>
void sample_hop(const CsrGraph& graph, std::int64_t fanout, bool replace, std::uint64_t hop_key,
                int hop, Index& index, Block& b, std::vector<Worker>& workers,
                std::vector<ChunkSample>& chunks) {
  const auto n = static_cast<std::int64_t>(b.dst_nodes.size());
  const std::int64_t num_chunks = (n + kChunk - 1) / kChunk;
  const auto sample = [&](std::int64_t c, Worker& w) {
    sample_chunk(graph, b.dst_nodes, c * kChunk, std::min(n, (c + 1) * kChunk), fanout, replace,
                 hop_key, chunks[static_cast<std::size_t>(c)], w);
  };
  const auto merge = [&](std::int64_t c) {
    merge_chunk(chunks[static_cast<std::size_t>(c)], c * kChunk, graph.num_nodes, hop, index, b);
  };
  const auto helpers = static_cast<int>(
      std::min<std::int64_t>(static_cast<std::int64_t>(workers.size()) - 1, num_chunks - 1));
  if (helpers <= 0) {
    // Sample and merge each chunk in turn, while its buffers are still in cache. (Interleaving
    // the merge of one chunk with the gather of the next, as loads or as prefetches, was
    // measured slower: the gather reaches its memory-level parallelism only as a tight loop.)
    chunks.resize(1);
    for (std::int64_t c = 0; c < num_chunks; ++c) {
      sample_chunk(graph, b.dst_nodes, c * kChunk, std::min(n, (c + 1) * kChunk), fanout, replace,
                   hop_key, chunks[0], workers[0]);
      merge_chunk(chunks[0], c * kChunk, graph.num_nodes, hop, index, b);
    }
    return;
  }
  chunks.resize(static_cast<std::size_t>(num_chunks));
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(num_chunks));
  const auto ready = std::make_unique<std::atomic<int>[]>(static_cast<std::size_t>(num_chunks));
  std::atomic<std::int64_t> next{0};
  const auto claim_and_sample = [&](Worker& w) {
    const std::int64_t c = next.fetch_add(1, std::memory_order_relaxed);
    if (c >= num_chunks) return false;
    try {
      sample(c, w);
    } catch (...) {
      errors[static_cast<std::size_t>(c)] = std::current_exception();
    }
    ready[static_cast<std::size_t>(c)].store(1, std::memory_order_release);
    ready[static_cast<std::size_t>(c)].notify_one();
    return true;
  };
  {
    // Helpers stop claiming once the merge ends (or throws); jthreads join on scope exit.
    struct StopClaims {
      std::atomic<std::int64_t>& next;
      std::int64_t end;
      ~StopClaims() { next.store(end, std::memory_order_relaxed); }
    };
    std::vector<std::jthread> pool;
    pool.reserve(static_cast<std::size_t>(helpers));
    for (int t = 1; t <= helpers; ++t) {
      pool.emplace_back([&, t] {
        while (claim_and_sample(workers[static_cast<std::size_t>(t)])) {
        }
      });
    }
    const StopClaims stop{next, num_chunks};
    for (std::int64_t c = 0; c < num_chunks; ++c) {
      std::atomic<int>& flag = ready[static_cast<std::size_t>(c)];
      while (flag.load(std::memory_order_acquire) == 0) {
        if (!claim_and_sample(workers[0])) flag.wait(0, std::memory_order_acquire);
      }
      if (errors[static_cast<std::size_t>(c)]) {
        std::rethrow_exception(errors[static_cast<std::size_t>(c)]);
      }
      merge(c);
    }
  }
}

template <class Index>
SampledBlocks sample_blocks(const CsrGraph& graph, const std::vector<std::int64_t>& seeds,
                            const SampleOptions& options, const SampleKey& key, int num_threads,
                            Index& index) {
  SampledBlocks out;
  out.seeds = seeds;
  out.seed_to_output.reserve(seeds.size());
  std::vector<std::int64_t> frontier;
  for (const std::int64_t s : seeds) out.seed_to_output.push_back(index.insert(s, frontier));

  std::vector<Worker> workers(static_cast<std::size_t>(num_threads));
  std::vector<ChunkSample> chunks;
  out.blocks.reserve(options.fanouts.size());
  for (std::size_t h = 0; h < options.fanouts.size(); ++h) {
    SampleKey at_hop = key;
    at_hop.hop = static_cast<std::int64_t>(h);
    Block b;
    b.dst_nodes = frontier;
    b.src_nodes = std::move(frontier);
    const std::int64_t fanout = options.fanouts[h];
    if (fanout > 0) {
      // Room for every sampled neighbor being new, up to 2^22 of them (the table grows past
      // that) and never more than the graph has nodes.
      constexpr std::uint64_t kMaxReserve = std::uint64_t{1} << 22;
      const auto n = static_cast<std::uint64_t>(b.dst_nodes.size());
      const auto f = static_cast<std::uint64_t>(fanout);
      const std::uint64_t extra = n > kMaxReserve / f ? kMaxReserve : n * f;
      index.reserve(static_cast<std::size_t>(
          std::min(n + extra, static_cast<std::uint64_t>(graph.num_nodes))));
    }
    sample_hop(graph, fanout, options.replace, sample_hop_key(at_hop), static_cast<int>(h), index,
               b, workers, chunks);
    frontier = b.src_nodes;
    out.blocks.push_back(std::move(b));
  }
  return out;
}

}  // namespace

void sample_node_cpu(const std::int64_t* neighbors, const std::int64_t* edge_ids,
                     std::int64_t degree, std::int64_t fanout, bool replace, std::uint64_t hop_key,
                     std::int64_t node, std::int64_t* out_nbrs, std::int64_t* out_eids) {
  // The per-node function the CUDA kernels share (sampling/sample_one.h): positions go to
  // out_nbrs first, displaced entries to out_eids and a scratch row.
  const std::int64_t n = count(degree, fanout, replace);
  thread_local std::vector<std::int64_t> swap_val;
  if (sample_one::draws(degree, fanout, replace) && !replace) {
    swap_val.resize(static_cast<std::size_t>(fanout));
  }
  sample_one::positions(degree, fanout, replace, hop_key, node, out_nbrs, out_eids,
                        swap_val.data());
  for (std::int64_t t = 0; t < n; ++t) {
    const std::int64_t p = out_nbrs[t];
    out_nbrs[t] = neighbors[p];
    out_eids[t] = edge_ids[p];
  }
}

HopSample sample_hop_cpu(const CsrGraph& rows, const std::vector<std::int64_t>& nodes,
                         std::int64_t fanout, bool replace, std::uint64_t hop_key) {
  HopSample out;
  out.counts.reserve(nodes.size());
  Worker w;
  ChunkSample chunk;
  const auto n = static_cast<std::int64_t>(nodes.size());
  for (std::int64_t begin = 0; begin < n; begin += kChunk) {
    sample_chunk(rows, nodes, begin, std::min(n, begin + kChunk), fanout, replace, hop_key, chunk, w);
    out.counts.insert(out.counts.end(), chunk.counts.begin(), chunk.counts.end());
    out.nbrs.insert(out.nbrs.end(), chunk.nbrs.begin(), chunk.nbrs.end());
    out.eids.insert(out.eids.end(), chunk.eids.begin(), chunk.eids.end());
  }
  return out;
}

SampledBlocks sample_neighbors_cpu(const CsrGraph& graph, const std::vector<std::int64_t>& seeds,
                                   const SampleOptions& options, const SampleKey& key,
                                   int num_threads) {
  // Node ids are < num_nodes, so 32-bit slots hold them (and the empty marker) when
  // num_nodes <= 2^32 - 1.
  const bool flat = options.id_table == SampleOptions::IdTable::kFlat ||
                    (options.id_table == SampleOptions::IdTable::kAuto && graph.num_nodes <= kFlatMaxNodes);
  if (flat) {
    FlatIndex index(graph.num_nodes);
    return sample_blocks(graph, seeds, options, key, num_threads, index);
  }
  if (graph.num_nodes <= static_cast<std::int64_t>(std::numeric_limits<std::uint32_t>::max())) {
    NodeIndex<std::uint32_t> index(seeds.size());
    return sample_blocks(graph, seeds, options, key, num_threads, index);
  }
  NodeIndex<std::uint64_t> index(seeds.size());
  return sample_blocks(graph, seeds, options, key, num_threads, index);
}

}  // namespace lockstep::ref::detail
