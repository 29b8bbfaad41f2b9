// Workload "embedding": DistEmbedding tables (reference/embedding), one per (optimizer,
// storage) pair, sharded over the ranks by a partition book, trained for a few steps with
// sparse optimizers, and checked against a dense single-process LibTorch computation
// (harness/torch/dense_embedding.h).
//
// Every step has a global id batch and output gradients that are pure functions of (seed,
// step, batch position); rank_split gives each rank a contiguous chunk, so owners reduce the
// contributions of each id in global position order and the result is the same for every
// world size. Each step: every rank pulls its chunk's rows from every table, records their
// gradients and calls step(), even with no ids; then one all_gather brings every rank's pulled
// rows and shards to rank 0. After the last step rank 0 replays the global batches through the dense reference
// and compares, step by step, the pulled rows and the whole table: f32 storage must be
// bit-identical, bf16/f16 within ref::storage_tolerance. A difference is result_mismatch
// naming the step, row, column and both values. Digest: every step's table, as f32 bits.
// With run.device = "cuda" (backend gloo) the ids and each rank's shard live on its GPU: the
// lookups, row gathers and sparse optimizer updates run as the reference's CUDA kernels.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "harness/comm/board.h"
#include "harness/comm/communicator.h"
#include "harness/comm/dtype.h"
#include "harness/report/dump.h"
#include "harness/torch/dense_embedding.h"
#include "harness/workloads/digest.h"
#include "harness/kinds/embedding/workload.h"
#include "harness/kinds/embedding/spec.h"
#include "harness/workloads/embedding_transport.h"
#include "harness/workloads/exchange.h"
#include "harness/workloads/graph_spec.h"
#include "harness/workloads/preflight.h"
#include "harness/workloads/workload.h"
#include "reference/common/device.h"
#include "reference/common/philox.h"
#include "reference/embedding/bag.h"
#include "reference/embedding/embedding.h"
#include "reference/split/split.h"

namespace lockstep::workloads {
namespace {

using I64 = std::vector<std::int64_t>;

// The shared keys (EmbeddingSpec; the optimizer's kind is set per table), then lockstep's own.
struct Options : EmbeddingSpec {
  std::vector<ref::OptimizerKind> optimizers = {ref::OptimizerKind::kSgd, ref::OptimizerKind::kAdagrad, ref::OptimizerKind::kAdam};
  std::vector<ref::Storage> storages = {ref::Storage::kF32};
  ref::DuplicateReduce reduce = ref::DuplicateReduce::kSum;
  std::string sharding = "even";
  ref::IdType id_type = ref::IdType::kI64;
  bool ids_on_cuda = false;
  bool shard_on_cuda = false;  // run.device = "cuda": the tables live on the rank's GPU too
  bool mean_instead_of_sum = false;  // [[inject]] bugs
  bool skip_empty_step = false;
  bool lost_update = false;
  bool global_rank_device = false;
};

}  // namespace

std::vector<EmbeddingTable> embedding_tables(const ref::OptimizerOptions& optimizer, const std::vector<ref::OptimizerKind>& kinds,
                                             const std::vector<ref::Storage>& storages, std::uint64_t seed) {
  std::vector<EmbeddingTable> out;
  for (auto k : kinds) {
    for (auto st : storages) {
      EmbeddingTable t{optimizer, st, seed + out.size()};
      t.optimizer.kind = k;
      out.push_back(t);
    }
  }
  return out;
}

std::shared_ptr<const ref::PartitionBook> embedding_book(const std::string& sharding, std::int64_t rows, int parts) {
  if (sharding == "mod") {
    std::vector<std::int32_t> part_of(static_cast<std::size_t>(rows));
    for (std::int64_t i = 0; i < rows; ++i) part_of[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i % parts);
    return std::make_shared<ref::MapPartitionBook>(std::move(part_of), parts);
  }
  if (sharding == "first_empty" && parts > 1) {  // part 0 owns nothing
    std::vector<std::int64_t> offsets{0, 0};
    for (int p = 1; p < parts; ++p) offsets.push_back(offsets.back() + rows / (parts - 1) + (p - 1 < rows % (parts - 1) ? 1 : 0));
    return std::make_shared<ref::RangePartitionBook>(std::move(offsets));
  }
  return ref::even_range_book(rows, parts);
}

namespace {

using Table = EmbeddingTable;

std::int64_t batch_id(std::uint64_t seed, std::int64_t s, std::int64_t p, const Options& o) {
  return ref::embedding_batch_id(seed, s, p, o.rows, o.hot_rows);
}

std::string describe(float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, 4);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g (0x%08x)", static_cast<double>(v), bits);
  return buf;
}

// Samples [lo, hi) of one step's global batch (a sample is an id, or a bag): their ids, and
// each sample's gradient. With bags, offsets covers every bag of the step (bag q holds the
// step's ids [offsets[q], offsets[q + 1])) and weights has one value per id of `ids` (with
// per_sample_weights); without, offsets is empty and every id is its own sample.
struct StepBatch {
  I64 ids, offsets;
  std::vector<float> weights, grads;
  // The step's id position where sample q starts.
  std::int64_t first_id(std::int64_t q) const { return offsets.empty() ? q : offsets[static_cast<std::size_t>(q)]; }
  // Samples [lo, hi)'s bags as offsets into `ids`, from 0.
  I64 local_offsets(std::int64_t lo, std::int64_t hi) const {
    I64 out;
    for (std::int64_t q = lo; q <= hi; ++q) out.push_back(first_id(q) - first_id(lo));
    return out;
  }
};

class Embedding final : public Workload {
 public:
  explicit Embedding(Options o) : o_(std::move(o)) {}

  void run(RankContext& ctx) override {
    const int ws = ctx.world_size;
    const int me = ctx.rank;
    const std::int64_t d = o_.dim;
    check_device(ctx);
    batch_seed_ = ctx.scenario.seed;

    const auto book = embedding_book(o_.sharding, o_.rows, ws);
    const auto tables = embedding_tables(o_.optimizer, o_.optimizers, o_.storages, ctx.scenario.seed);
    const auto nt = static_cast<std::int64_t>(tables.size());
    CommTransport transport(ctx.comm);
    std::vector<std::unique_ptr<ref::DistEmbedding>> embs;
    for (const auto& t : tables) {
      ref::EmbeddingOptions eo;
      eo.dim = d;
      eo.storage = t.storage;
      eo.reduce = o_.mean_instead_of_sum ? ref::DuplicateReduce::kMean : o_.reduce;
      // The two bugs change a row's update only where it has duplicate gradients in a step
      // (mean) or gradients from two ranks (lost_update): marked as changing when step() met one.
      if (o_.mean_instead_of_sum) comm::mark_fired_unchanged("mean_instead_of_sum");
      eo.optimizer = t.optimizer;
      eo.seed = t.seed;
      eo.init_scale = o_.init_scale;
      eo.lost_update_bug = o_.lost_update;
      if (o_.lost_update) comm::mark_fired_unchanged("lost_update");
      if (o_.shard_on_cuda) eo.device = ref::Device{ref::DeviceKind::kCuda, device_index(ctx)};
      embs.push_back(std::make_unique<ref::DistEmbedding>(book, eo, transport));
    }

    std::int64_t max_part = 1;
    for (int p = 0; p < ws; ++p) max_part = std::max(max_part, book->part_size(p));
    const ref::Device ids_device = o_.ids_on_cuda ? ref::Device{ref::DeviceKind::kCuda, device_index(ctx)} : ref::Device{};

    ctx.comm.set_phase("preflight");
    preflight_steps(ctx.comm, o_.steps, "embedding steps");
    std::vector<std::vector<float>> gathered;  // rank 0: per step, every rank's per table [pulled | shard]
    std::int64_t pulled_rows = 0;
    double pull_s = 0;
    for (std::int64_t s = 0; s < o_.steps; ++s) {
      ctx.comm.set_step(s);
      const std::int64_t batch = batch_size(s);  // samples: ids, or bags
      const auto [lo, hi] = chunk(batch, ws, me);
      const StepBatch part = step_batch(ctx.scenario.seed, s, lo, hi);
      const I64& mine = part.ids;
      const I64 bag_offsets = o_.bags() ? part.local_offsets(lo, hi) : I64{};  // this rank's bags, from 0
      const float* weights = o_.per_sample_weights ? part.weights.data() : nullptr;
      // With bags, each id's gradient row is its bag's (bag.h's backward).
      const std::vector<float> id_grads =
          o_.bags() ? ref::bag_backward(part.grads.data(), bag_offsets.data(), hi - lo, d, o_.pooling, weights) : part.grads;
      const auto ids = ref::IdArray::from_host(mine, o_.id_type, ids_device);
      const std::int64_t max_chunk = (batch + ws - 1) / ws;  // samples: pulled rows, or pooled bags
      const std::int64_t per_table = (max_chunk + max_part) * d;
      std::vector<float> mine_buf(static_cast<std::size_t>(nt * per_table), 0.0f);
      for (std::int64_t t = 0; t < nt; ++t) {
        ctx.comm.set_phase("pull");
        const auto t0 = std::chrono::steady_clock::now();
        const auto rows = embs[static_cast<std::size_t>(t)]->pull(ids.span());
        pull_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        pulled_rows += rows.rows();
        if (!(rows.device() == ids.device())) {
          fail_with(DiagnosisKind::kDeviceMismatch, me, "rank " + std::to_string(me) + ": pull of ids on " + ref::to_string(ids.device()) +
                                                            " returned rows on " + ref::to_string(rows.device()));
        }
        auto pulled = rows.to_host();
        if (o_.bags()) pulled = ref::pool_bags(pulled.data(), bag_offsets.data(), hi - lo, d, o_.pooling, weights);
        std::copy(pulled.begin(), pulled.end(), mine_buf.begin() + t * per_table);
        embs[static_cast<std::size_t>(t)]->accumulate_grad(ids.span(), id_grads.data());
      }
      for (std::int64_t t = 0; t < nt; ++t) {
        ctx.comm.set_phase("push");
        // The injected bug: a rank with no ids this step does not call step().
        if (!(o_.skip_empty_step && mine.empty())) embs[static_cast<std::size_t>(t)]->step();
        else comm::mark_fired("skip_empty_step");
        const auto& e = *embs[static_cast<std::size_t>(t)];
        if (o_.mean_instead_of_sum && e.reduced_duplicate_rows() > 0) comm::mark_fired("mean_instead_of_sum");
        if (o_.lost_update && e.multi_source_rows() > 0) comm::mark_fired("lost_update");
        const auto shard = embs[static_cast<std::size_t>(t)]->shard().to_f32();
        std::copy(shard.begin(), shard.end(), mine_buf.begin() + t * per_table + max_chunk * d);
      }
      ctx.comm.set_phase("check");
      std::vector<float> all(mine_buf.size() * static_cast<std::size_t>(ws));
      ctx.comm.all_gather(comm::view_of(mine_buf), comm::view_of(all));
      if (me == 0) gathered.push_back(std::move(all));
    }
    std::int64_t pulled_bytes = 0;  // the tables' own count (DistEmbedding::pulled_bytes)
    for (const auto& e : embs) pulled_bytes += e->pulled_bytes();
    ctx.metrics["pulled_bytes_per_s"] = pull_s > 0 ? static_cast<double>(pulled_bytes) / pull_s : 0;
    ctx.metrics["pulled_rows"] = static_cast<double>(pulled_rows);
    ctx.metrics["steps"] = static_cast<double>(o_.steps);
    ctx.metrics["tables"] = static_cast<double>(nt);
    for (std::int64_t t = 0; t < nt; ++t) {
      ctx.dump.write("embedding_shard_" + tables[static_cast<std::size_t>(t)].name().replace(tables[static_cast<std::size_t>(t)].name().find('/'), 1, "_"),
                     embs[static_cast<std::size_t>(t)]->shard().to_f32(),
                     "this rank's rows of the table after the last step, f32, row-major (local ids, ascending global ids)");
    }
    if (me == 0) {
      I64 canonical;
      for (std::int64_t t = 0; t < nt; ++t) check(ctx, *book, max_part, gathered, tables, t, canonical);
      ctx.digest = digest_hex(canonical);
    }
  }

 private:
  // The devices of this rank's node: the visible CUDA devices when the ids live there, else
  // one per local rank (no GPU is used: the check runs on the layout alone).
  int node_devices(const RankContext& ctx) const {
    const int cuda = o_.ids_on_cuda ? ref::cuda_device_count() : 0;
    return cuda > 0 ? cuda : std::max(1, ctx.local_world_size);
  }
  // This rank's device, as DGL's sparse optimizer should pick it: from LOCAL_RANK (ranks share
  // devices when the node has fewer than its ranks). The injected bug takes the global rank.
  int device_index(const RankContext& ctx) const {
    return o_.global_rank_device ? ctx.rank : ctx.local_rank % node_devices(ctx);
  }

  // A device index that is not this rank's local device is device_mismatch.
  void check_device(const RankContext& ctx) const {
    const int devices = node_devices(ctx);
    const int want = ctx.local_rank % devices;
    const int pick = device_index(ctx);
    if (o_.global_rank_device && pick != want) comm::mark_fired("global_rank_device");
    if (pick != want || pick >= devices) {
      std::ostringstream os;
      os << "rank " << ctx.rank << " (local rank " << ctx.local_rank << " of " << ctx.local_world_size
         << " on its node) selected device " << pick << (o_.global_rank_device ? " from its global rank" : "")
         << "; its device is " << want << " (the node has " << devices << " device" << (devices == 1 ? "" : "s")
         << (o_.ids_on_cuda && ref::cuda_device_count() > 0 ? "" : ", one per local rank: no GPU in use") << ")";
      fail_with(DiagnosisKind::kDeviceMismatch, ctx.rank, os.str());
    }
    if (o_.ids_on_cuda) ref::cuda_set_device(pick);
  }

  std::int64_t batch_size(std::int64_t s) const { return o_.batch_sizes[static_cast<std::size_t>(s) % o_.batch_sizes.size()]; }

  // Samples [lo, hi) of step s's global batch (hi < 0: to the end), the same functions of the
  // seed as the systems' capability; a rank draws only its own.
  StepBatch step_batch(std::uint64_t seed, std::int64_t s, std::int64_t lo = 0, std::int64_t hi = -1) const {
    StepBatch b;
    const std::int64_t n = batch_size(s);
    if (hi < 0) hi = n;
    if (o_.bags()) {
      b.offsets.push_back(0);
      for (std::int64_t q = 0; q < n; ++q) b.offsets.push_back(b.offsets.back() + o_.bag_sizes[static_cast<std::size_t>(q) % o_.bag_sizes.size()]);
    }
    for (std::int64_t p = b.first_id(lo); p < b.first_id(hi); ++p) {
      b.ids.push_back(batch_id(seed, s, p, o_));
      if (o_.per_sample_weights) b.weights.push_back(ref::embedding_bag_weight(seed, s, p));
    }
    for (std::int64_t q = lo; q < hi; ++q) {
      for (std::int64_t c = 0; c < o_.dim; ++c) b.grads.push_back(ref::embedding_batch_grad(seed, s, q, c));
    }
    return b;
  }

  // Batch positions [lo, hi) of rank r: rank_split's contiguous chunks.
  static std::pair<std::int64_t, std::int64_t> chunk(std::int64_t n, int ws, int r) {
    std::int64_t lo = 0;
    for (int q = 0; q < r; ++q) lo += n / ws + (q < n % ws ? 1 : 0);
    return {lo, lo + n / ws + (r < n % ws ? 1 : 0)};
  }

  // Checks table `ti` against its dense reference, step by step; appends every step's table
  // (f32 bits) to `canonical`.
  void check(RankContext& ctx, const ref::PartitionBook& book, std::int64_t max_part, const std::vector<std::vector<float>>& gathered,
             const std::vector<Table>& tables, std::int64_t ti, I64& canonical) {
    const int ws = ctx.world_size;
    const std::int64_t d = o_.dim, n = o_.rows;
    const auto seed = ctx.scenario.seed;
    const Table& table = tables[static_cast<std::size_t>(ti)];
    const auto nt = static_cast<std::int64_t>(tables.size());
    const std::string tname = "table " + std::to_string(ti) + " (" + table.name() + ")";
    std::vector<I64> part_rows(static_cast<std::size_t>(ws));
    for (int p = 0; p < ws; ++p) part_rows[static_cast<std::size_t>(p)] = book.partid2nids(p, ref::Device{}).to_host();
    auto owner = [&](std::int64_t row) { return static_cast<int>(book.nid2partid(ref::IdSpan{&row, 1, ref::IdType::kI64, ref::Device{}}).to_host()[0]); };

    std::vector<float> init(static_cast<std::size_t>(n * d));
    for (std::int64_t r = 0; r < n; ++r) {
      for (std::int64_t c = 0; c < d; ++c) init[static_cast<std::size_t>(r * d + c)] = ref::embedding_init(table.seed, r, c, o_.init_scale);
    }
    torchref::DenseEmbedding dense(n, d, init, table.optimizer, o_.reduce);
    std::vector<double> max_abs(init.size());
    for (std::size_t i = 0; i < init.size(); ++i) max_abs[i] = std::fabs(init[i]);
    I64 roundings(static_cast<std::size_t>(n), 1);
    auto tol = [&](std::int64_t row, std::size_t elem) { return ref::storage_tolerance(table.storage, roundings[static_cast<std::size_t>(row)], max_abs[elem]); };
    auto differs = [&](float got, float want, double t) {
      if (table.storage == ref::Storage::kF32) return std::memcmp(&got, &want, 4) != 0;
      return !(std::fabs(static_cast<double>(got) - static_cast<double>(want)) <= t);
    };
    const std::string how = table.storage == ref::Storage::kF32 ? "bit-identical" : "within the " + ref::to_string(table.storage) + " tolerance";

    for (std::int64_t s = 0; s < o_.steps; ++s) {
      const auto& all = gathered[static_cast<std::size_t>(s)];
      const std::int64_t batch = batch_size(s);
      const std::int64_t max_chunk = (batch + ws - 1) / ws;
      const auto width = static_cast<std::size_t>(nt * (max_chunk + max_part) * d);
      const auto base = static_cast<std::size_t>(ti * (max_chunk + max_part) * d);
      const StepBatch global = step_batch(seed, s);
      const I64& ids = global.ids;
      const auto before = dense_step(dense, global);
      auto pushers = [&](std::int64_t row) {  // the ranks that pushed gradients for `row`
        std::string out;
        for (int r = 0; r < ws; ++r) {
          const auto [lo, hi] = chunk(batch, ws, r);
          const auto a = ids.begin() + global.first_id(lo), b = ids.begin() + global.first_id(hi);
          if (std::find(a, b, row) != b) out += (out.empty() ? "" : ", ") + std::to_string(r);
        }
        return out.empty() ? std::string("none") : out;
      };
      // 1. Pulled rows (or pooled bags), in global batch order.
      for (int r = 0; o_.bags() && r < ws; ++r) {
        const auto [lo, hi] = chunk(batch, ws, r);
        for (std::int64_t q = lo; q < hi; ++q) {
          for (std::int64_t c = 0; c < d; ++c) {
            const float got = all[static_cast<std::size_t>(r) * width + base + static_cast<std::size_t>((q - lo) * d + c)];
            const float want = before[static_cast<std::size_t>(q * d + c)];
            if (std::memcmp(&got, &want, 4) != 0) {
              std::ostringstream os;
              os << tname << ", step " << s << ": rank " << r << " pooled bag " << q << " (ids [";
              for (auto p = global.first_id(q); p < global.first_id(q + 1); ++p) os << (p > global.first_id(q) ? ", " : "") << ids[static_cast<std::size_t>(p)];
              os << "], " << ref::to_string(o_.pooling) << (o_.per_sample_weights ? " with per-sample weights" : "") << "), column " << c
                 << ": got " << describe(got) << ", dense LibTorch at::embedding_bag " << describe(want) << " (" << how << " expected)";
              fail_with(DiagnosisKind::kResultMismatch, r, os.str());
            }
          }
        }
      }
      for (int r = 0; !o_.bags() && r < ws; ++r) {
        const auto [lo, hi] = chunk(batch, ws, r);
        for (std::int64_t p = lo; p < hi; ++p) {
          for (std::int64_t c = 0; c < d; ++c) {
            const float got = all[static_cast<std::size_t>(r) * width + base + static_cast<std::size_t>((p - lo) * d + c)];
            const float want = before[static_cast<std::size_t>(p * d + c)];
            const std::int64_t row = ids[static_cast<std::size_t>(p)];
            if (differs(got, want, tol(row, static_cast<std::size_t>(row * d + c)))) {
              std::ostringstream os;
              os << tname << ", step " << s << ": rank " << r << " pulled row " << row << " (batch position " << p << "), column " << c << ": got "
                 << describe(got) << ", dense LibTorch reference " << describe(want) << " (" << how << " expected)";
              fail_with(DiagnosisKind::kResultMismatch, owner(row), os.str());
            }
          }
        }
      }
      // 2. The table after the step.
      I64 touched = ids;
      std::sort(touched.begin(), touched.end());
      touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
      for (const auto id : touched) ++roundings[static_cast<std::size_t>(id)];  // one rounding per touched row
      const auto want_table = dense.weights();
      for (std::size_t i = 0; i < want_table.size(); ++i) max_abs[i] = std::max(max_abs[i], static_cast<double>(std::fabs(want_table[i])));
      std::vector<float> got_table(want_table.size());
      for (int p = 0; p < ws; ++p) {
        const auto& rows = part_rows[static_cast<std::size_t>(p)];
        const float* src = all.data() + static_cast<std::size_t>(p) * width + base + static_cast<std::size_t>(max_chunk * d);
        for (std::size_t l = 0; l < rows.size(); ++l) {
          std::copy_n(src + l * static_cast<std::size_t>(d), d, got_table.begin() + static_cast<std::ptrdiff_t>(rows[l] * d));
        }
      }
      for (std::int64_t row = 0; row < n; ++row) {
        for (std::int64_t c = 0; c < d; ++c) {
          const auto i = static_cast<std::size_t>(row * d + c);
          if (differs(got_table[i], want_table[i], tol(row, i))) {
            std::ostringstream os;
            os << tname << ", step " << s << ": row " << row << ", column " << c << " after the update: got " << describe(got_table[i])
               << ", dense LibTorch reference " << describe(want_table[i]) << " (" << how << " expected)"
               << "; ranks that pushed gradients for this row in this step: " << pushers(row)
               << semantics_hint(table, s, row, c, got_table[i]);
            fail_with(DiagnosisKind::kResultMismatch, owner(row), os.str());
          }
        }
      }
      for (float v : got_table) {
        std::uint32_t bits;
        std::memcpy(&bits, &v, 4);
        canonical.push_back(bits);
      }
    }
  }

  // One step of the dense reference on a global batch; returns its forward output (the rows,
  // or the pooled bags).
  std::vector<float> dense_step(torchref::DenseEmbedding& dense, const StepBatch& b) const {
    if (!o_.bags()) return dense.step(b.ids, b.grads);
    return dense.step_bags(b.ids, b.offsets, b.weights, o_.pooling, b.grads);
  }

  // When the table differs from the reference, replays the dense reference with the other
  // duplicate-id reduction; if that one explains the value, says so.
  std::string semantics_hint(const Table& table, std::int64_t step, std::int64_t row, std::int64_t col, float got) const {
    const auto seed = table.seed;
    const auto batch_seed = batch_seed_;
    const std::int64_t d = o_.dim;
    std::vector<float> init(static_cast<std::size_t>(o_.rows * d));
    for (std::int64_t r = 0; r < o_.rows; ++r) {
      for (std::int64_t c = 0; c < d; ++c) init[static_cast<std::size_t>(r * d + c)] = ref::embedding_init(seed, r, c, o_.init_scale);
    }
    const auto other = o_.reduce == ref::DuplicateReduce::kSum ? ref::DuplicateReduce::kMean : ref::DuplicateReduce::kSum;
    torchref::DenseEmbedding alt(o_.rows, d, init, table.optimizer, other);
    for (std::int64_t s = 0; s <= step; ++s) dense_step(alt, step_batch(batch_seed, s));
    const float want = alt.weights()[static_cast<std::size_t>(row * d + col)];
    const bool match = table.storage == ref::Storage::kF32 ? std::memcmp(&want, &got, 4) == 0
                                                           : std::fabs(static_cast<double>(want) - got) <= ref::unit_roundoff(table.storage) * 8 * std::fabs(want);
    if (!match) return "";
    return o_.reduce == ref::DuplicateReduce::kSum
               ? "; the value is what the mean of the duplicate ids' gradients gives (DGL semantics), but this table sums them "
                 "(PyTorch, WholeGraph semantics): duplicate-id reduction differs (mean instead of sum)"
               : "; the value is what the sum of the duplicate ids' gradients gives (PyTorch, WholeGraph semantics), but this table "
                 "averages them (DGL semantics): duplicate-id reduction differs (sum instead of mean)";
  }

  Options o_;
  std::uint64_t batch_seed_ = 0;  // run.seed: ids and gradients
};

std::unique_ptr<Workload> make(const scenario::Scenario& s) {
  const scenario::Config& c = s.workload_config;
  Options o;
  (void)c.get_string("kind");
  static_cast<EmbeddingSpec&>(o) = EmbeddingSpec::read(c);
  o.optimizers.clear();
  for (const auto& name : c.get_string_list("optimizers", {"sgd", "adagrad", "adam"})) {
    try {
      o.optimizers.push_back(ref::optimizer_from_string(name));
    } catch (const std::invalid_argument& e) {
      c.fail("optimizers", e.what());
    }
  }
  if (o.optimizers.empty()) c.fail("optimizers", "must not be empty");
  try {
    o.reduce = ref::duplicate_reduce_from_string(c.get_string("reduce", "sum"));
  } catch (const std::invalid_argument& e) {
    c.fail("reduce", e.what());
  }
  o.storages.clear();
  for (const auto& name : c.get_string_list("storages", {"f32"})) {
    try {
      o.storages.push_back(ref::storage_from_string(name));
    } catch (const std::invalid_argument& e) {
      c.fail("storages", e.what());
    }
  }
  if (o.storages.empty()) c.fail("storages", "must not be empty");
  if (o.bags() && (o.storages.size() != 1 || o.storages[0] != ref::Storage::kF32)) {
    c.fail("storages", "bags (bag_sizes) are checked with f32 storage in this version");
  }
  o.sharding = c.get_string("sharding", "even");
  if (o.sharding != "even" && o.sharding != "mod" && o.sharding != "first_empty") {
    c.fail("sharding", "must be 'even', 'mod' or 'first_empty', got '" + o.sharding + "'");
  }
  o.id_type = o.int32_ids ? ref::IdType::kI32 : ref::IdType::kI64;
  const std::string dev = c.get_string("ids_device", "cpu");
  if (dev != "cpu" && dev != "cuda") c.fail("ids_device", "must be 'cpu' or 'cuda', got '" + dev + "'");
  o.ids_on_cuda = dev == "cuda";
  if (o.ids_on_cuda && !s.requires_cuda) c.fail("ids_device", "ids_device = 'cuda' needs [requires] cuda = true");
  if (s.device == scenario::Device::kCuda) {
    o.ids_on_cuda = true;
    o.shard_on_cuda = true;
  }
  c.finish();
  o.mean_instead_of_sum = has_switch_injection(s, "mean_instead_of_sum");
  o.skip_empty_step = has_switch_injection(s, "skip_empty_step");
  o.lost_update = has_switch_injection(s, "lost_update");
  o.global_rank_device = has_switch_injection(s, "global_rank_device");
  // Refused when the settings leave a bug nothing to change (it would fire and test nothing).
  const bool one_id_per_step = std::all_of(o.batch_sizes.begin(), o.batch_sizes.end(), [](std::int64_t b) { return b <= 1; });
  if (o.mean_instead_of_sum && o.reduce == ref::DuplicateReduce::kMean) {
    refuse_injection(s, "mean_instead_of_sum", "the table already averages duplicates (workload.reduce = \"mean\")");
  }
  if (o.mean_instead_of_sum && one_id_per_step) {
    refuse_injection(s, "mean_instead_of_sum",
                     "every batch has at most one id (workload.batch_sizes), so no row ever has duplicate gradients to average");
  }
  if (o.lost_update && s.world_size == 1) {
    refuse_injection(s, "lost_update", "with run.world_size = 1 every row's gradients come from one rank; it needs two ranks pushing the same row");
  }
  if (o.lost_update && one_id_per_step) {
    refuse_injection(s, "lost_update",
                     "every batch has at most one id (workload.batch_sizes), so no row ever has gradients from two ranks in one step");
  }
  return std::make_unique<Embedding>(std::move(o));
}

}  // namespace

WorkloadSpec embedding_spec() {
  return WorkloadSpec{"embedding",
                      "DistEmbedding pull/step with sparse SGD, Adagrad or Adam over sharded rows, checked against a dense LibTorch nn::Embedding",
                      make, {"mean_instead_of_sum", "skip_empty_step", "lost_update", "global_rank_device"},
                      /*gpu_compute_host_exchange=*/true};
}

}  // namespace lockstep::workloads
