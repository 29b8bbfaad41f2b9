// Workload "training": data-parallel GraphSAGE training (reference/train) over real ranks.
// Every step has one global batch of training seeds (the epoch's seed-fixed order, cut into
// batch_size pieces); rank_split gives each rank its contiguous share. Each rank samples its
// share's blocks locally with the reference sampler on the full graph (through the reference
// NeighborLoader, so loader workers sample ahead; the per-node draws are those the distributed
// sampling workload checks), fetches the input rows from a feature store sharded over the
// ranks (owners serve rows through uneven all_to_alls), collates (the one place a batch
// changes precision), runs forward and backward, all-reduces the gradient SUM in buckets of
// at most bucket_bytes, divides it by the global batch size (so the update does not depend on
// the world size) and steps the optimizer. The step's loss is the all-reduced sum of
// per-sample losses over the global batch size; the per-step loss curve is reported as the
// series `loss_curve`, which [matrix] invariance compares across world sizes within a
// tolerance. Before the first step: a parameter checksum exchange (result_mismatch) and the
// step-count pre-flight (uneven_steps).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <sstream>

#include "harness/comm/board.h"
#include "harness/comm/communicator.h"
#include "harness/comm/dtype.h"
#include "harness/report/dump.h"
#include "harness/workloads/digest.h"
#include "harness/workloads/embedding_transport.h"
#include "harness/workloads/exchange.h"
#include "harness/workloads/graph_spec.h"
#include "harness/workloads/preflight.h"
#include "harness/kinds/training/spec.h"
#include "harness/workloads/workload.h"
#include "reference/common/device.h"
#include "reference/common/half.h"
#include "reference/common/philox.h"
#include "reference/loader/loader.h"
#include "reference/partition/partition.h"
#include "reference/sampling/neighbor.h"
#include "reference/split/split.h"
#include "reference/train/sage.h"

namespace lockstep::workloads {
namespace {

using I64 = std::vector<std::int64_t>;
using Clock = std::chrono::steady_clock;
namespace tr = ref::train;

// Default loss-curve tolerances across world sizes (relative, every step); see
// scenarios/README.md. fp32 runs differ only in the order of the gradient sums (about 1e-7);
// in bf16 a rounding-sized weight difference can move a hidden activation across a bf16
// rounding boundary (one bf16 ulp, 2^-8 relative); bf16_reduce also rounds each rank's partial
// gradient sum to bf16 before the reduction.
double default_rtol(tr::Precision p) {
  switch (p) {
    case tr::Precision::kF32: return 1e-5;
    case tr::Precision::kBF16: return 1e-3;
    case tr::Precision::kBF16Reduce: return 5e-3;
  }
  return 0;
}

// The shared keys (TrainingSpec), then how lockstep's own ranks run them.
struct Options : TrainingSpec {
  std::int64_t embedding_dim = 0;   // learnable DistEmbedding columns appended to the features; 0: none
  double embedding_lr = 0.1;        // sparse SGD on the embedding rows
  ref::PartitionMethod method = ref::PartitionMethod::kRange;
  std::int64_t num_eval = 512;
  std::int64_t bucket_bytes = 4096;
  bool gpu_aggregation = false;      // run.device = "cuda": the mean aggregation on the rank's GPU
  bool digest_params = false;        // the digest also covers the final parameters and loss curve bits
  int num_workers = 0;
  bool features_on_cuda = false;
  double curve_rtol = -1;  // -1: default_rtol(precision)
  // [[inject]] bugs
  int cast_rank = -1;            // cast_bf16_at_step, where = "outside_collate": this rank only
  bool cast_in_collate = false;  //   where = "collate": every rank, inside collate
  std::int64_t cast_step = -1;
  bool rank_seeded_init = false;  // rank_seeded_init: `seed_rank` (or every rank) uses seed + rank
  int seed_rank = -1;
  bool floor_split = false;       // floor_division_split
};

// The feature rows of the nodes a rank owns, on the host or on the GPU.
class FeatureStore {
 public:
  FeatureStore(const std::vector<std::int32_t>& part_of, int me, std::uint64_t seed, std::int64_t dim, bool on_cuda)
      : dim_(dim), on_cuda_(on_cuda) {
    I64 owned;
    for (std::size_t v = 0; v < part_of.size(); ++v) {
      if (part_of[v] == me) {
        row_of_.emplace(static_cast<std::int64_t>(v), static_cast<std::int64_t>(owned.size()));
        owned.push_back(static_cast<std::int64_t>(v));
      }
    }
    tr::node_features(seed, dim, owned, host_);
    if (on_cuda_ && !host_.empty()) {
      device_ = ref::CudaBuffer(host_.size() * sizeof(float));
      ref::cuda_copy_to_device(device_.data(), host_.data(), host_.size() * sizeof(float));
      host_.clear();
    }
  }

  // Appends node v's row; false when this rank does not own v.
  bool append_row(std::int64_t v, std::vector<float>& out) const {
    const auto it = row_of_.find(v);
    if (it == row_of_.end()) return false;
    const auto at = static_cast<std::size_t>(it->second * dim_);
    if (on_cuda_) {
      const std::size_t n = out.size();
      out.resize(n + static_cast<std::size_t>(dim_));
      ref::cuda_copy_to_host(out.data() + n, static_cast<const float*>(device_.data()) + at, static_cast<std::size_t>(dim_) * sizeof(float));
    } else {
      out.insert(out.end(), host_.begin() + static_cast<std::ptrdiff_t>(at), host_.begin() + static_cast<std::ptrdiff_t>(at) + dim_);
    }
    return true;
  }

 private:
  std::int64_t dim_;
  bool on_cuda_;
  std::map<std::int64_t, std::int64_t> row_of_;
  std::vector<float> host_;
  ref::CudaBuffer device_;
};

struct StepTimes {
  double sampling = 0, fetch = 0, forward = 0, backward = 0, grad_sync = 0, optimizer = 0;
};

double since(Clock::time_point& t) {
  const auto now = Clock::now();
  const double s = std::chrono::duration<double>(now - t).count();
  t = now;
  return s;
}

class Training final : public Workload {
 public:
  explicit Training(Options o) : o_(std::move(o)) {}

  void run(RankContext& ctx) override {
    const int ws = ctx.world_size;
    const int me = ctx.rank;
    const std::uint64_t seed = ctx.scenario.seed;
    if (o_.gpu_aggregation) aggregate_on_ = ref::Device{ref::DeviceKind::kCuda, ctx.local_rank % std::max(1, ref::cuda_device_count())};
    const auto graph = build_graph(o_.graph);
    rows_ = ref::sampling_graph(graph, /*in_edges=*/true);
    part_of_ = ref::partition_graph(graph, ws, o_.method, o_.graph.seed).part_of;
    labels_ = tr::node_labels(rows_, seed, o_.feature_dim, static_cast<int>(o_.model.num_classes));
    store_ = std::make_unique<FeatureStore>(part_of_, me, seed, o_.feature_dim, o_.features_on_cuda);
    if (o_.embedding_dim > 0) {
      // Learnable input features: a DistEmbedding over all nodes, sharded in even ranges,
      // trained with sparse SGD on the input-feature gradient of the first layer.
      transport_ = std::make_unique<CommTransport>(ctx.comm);
      ref::EmbeddingOptions eo;
      eo.dim = o_.embedding_dim;
      eo.seed = seed;
      eo.init_scale = 0.1;
      eo.optimizer.kind = ref::OptimizerKind::kSgd;
      eo.optimizer.lr = o_.embedding_lr;
      embedding_ = std::make_unique<ref::DistEmbedding>(ref::even_range_book(graph.num_nodes, ws), eo, *transport_);
    }
    if (o_.features_on_cuda) ref::mark_cuda_initialised();
    I64 train, eval;
    tr::train_eval_split(graph.num_nodes, seed, o_.num_train, o_.num_eval, train, eval);
    sample_.fanouts = o_.fanouts;
    sample_.num_threads = 1;

    // Start: identical parameters on every rank, checked by an all_gather of a checksum.
    ctx.comm.set_phase("start");
    ctx.comm.set_step(0);
    const bool reseeded = o_.rank_seeded_init && (o_.seed_rank < 0 || o_.seed_rank == me);
    if (reseeded && me != 0) comm::mark_fired("rank_seeded_init");
    params_ = tr::init_params(o_.model, reseeded ? seed + static_cast<std::uint64_t>(me) : seed);
    const std::uint64_t checksum = tr::param_checksum(params_);
    check_start_checksum(ctx, checksum);

    // The global schedule, then each rank's share of every step.
    std::vector<I64> global(static_cast<std::size_t>(o_.steps)), mine(static_cast<std::size_t>(o_.steps));
    const std::int64_t per_epoch = (o_.num_train + o_.batch_size - 1) / o_.batch_size;
    I64 order;
    for (std::int64_t s = 0; s < o_.steps; ++s) {
      const std::int64_t e = s / per_epoch, b = s % per_epoch;
      if (b == 0) order = epoch_order(train, seed, e);
      global[static_cast<std::size_t>(s)].assign(order.begin() + b * o_.batch_size,
                                                 order.begin() + std::min(o_.num_train, (b + 1) * o_.batch_size));
      mine[static_cast<std::size_t>(s)] = ref::rank_split(global[static_cast<std::size_t>(s)], ws)[static_cast<std::size_t>(me)];
    }
    if (ctx.dump.enabled()) {
      I64 sizes, nodes;
      for (const auto& batch : mine) {
        sizes.push_back(static_cast<std::int64_t>(batch.size()));
        nodes.insert(nodes.end(), batch.begin(), batch.end());
      }
      ctx.dump.write("schedule_sizes", sizes, "per step: how many training nodes this rank holds of the step's global batch");
      ctx.dump.write("schedule_nodes", nodes, "this rank's training nodes of every step, in step order (schedule_sizes splits them)");
    }

    ctx.comm.set_phase("train");
    if (o_.floor_split) {
      comm::mark_fired("floor_division_split");
      // The injected bug (PyG's multi-GPU examples): the train set is cut with
      // split(n // world_size), the extra chunk goes round-robin to rank 0, and each rank counts
      // the local batches (batch_size / world_size) of its own chunk for one epoch.
      const auto chunks = ref::floor_division_split(train, ws);
      std::int64_t held = 0;
      for (std::size_t c = 0; c < chunks.size(); ++c) {
        if (static_cast<int>(c % static_cast<std::size_t>(ws)) == me) held += static_cast<std::int64_t>(chunks[c].size());
      }
      const std::int64_t local = std::max<std::int64_t>(1, o_.batch_size / ws);
      preflight_steps(ctx.comm, (held + local - 1) / local, "per-rank batches of a floor-division split, local batch " + std::to_string(local));
    } else {
      preflight_steps(ctx.comm, o_.steps, "global batches of " + std::to_string(o_.batch_size));
    }

    const double acc0 = evaluate(ctx, eval, "eval_start");
    ctx.comm.set_phase("train");
    ref::LoaderOptions lo;
    lo.num_workers = o_.num_workers;
    ref::NeighborLoader loader(rows_, mine, sample_, ref::SampleKey{seed, 0, 0, 0}, lo);
    tr::Optimizer opt;
    opt.kind = o_.optimizer;
    opt.lr = static_cast<float>(o_.lr);
    opt.momentum = static_cast<float>(o_.momentum);
    StepTimes t;
    std::vector<double> curve;
    const auto start = Clock::now();
    for (std::int64_t s = 0; s < o_.steps; ++s) {
      ctx.comm.set_step(s);
      auto clock = Clock::now();
      auto sampled = loader.next();
      if (!sampled) fail_with(DiagnosisKind::kResultMismatch, me, "the loader ended after " + std::to_string(s) + " of " + std::to_string(o_.steps) + " batches");
      t.sampling += since(clock);
      const I64 input_ids = embedding_ ? sampled->blocks.back().src_nodes : I64{};
      auto rows = inputs(ctx, sampled->blocks.back().src_nodes);
      t.fetch += since(clock);
      std::vector<std::int32_t> labels;
      for (auto v : sampled->seeds) labels.push_back(labels_[static_cast<std::size_t>(v)]);
      const bool cast_now = o_.cast_step >= 0 && s >= o_.cast_step;
      // The fix: the cast lives in collate, the same place on every rank.
      const tr::Precision precision = cast_now && o_.cast_in_collate ? tr::Precision::kBF16Reduce : o_.precision;
      tr::Batch batch = tr::collate(std::move(*sampled), std::move(rows), o_.model.in_dim, std::move(labels), precision);
      if (cast_now && me == o_.cast_rank) cast_outside_collate(batch);  // the injected bug
      if (cast_now && (me == o_.cast_rank || o_.cast_in_collate)) comm::mark_fired("cast_bf16_at_step");
      clock = Clock::now();
      double loss_sum = 0;
      std::vector<float> grads(params_.size(), 0.0f);
      std::vector<float> dinputs;
      if (!batch.blocks.seeds.empty()) {
        const auto acts = tr::forward(o_.model, params_, batch.blocks, batch.inputs, batch.compute == tr::BatchDType::kBF16,
                                      aggregate_on_);
        std::vector<float> dlogits;
        const auto losses = tr::cross_entropy(o_.model, batch.blocks, acts.logits, batch.labels, dlogits);
        for (float x : losses) loss_sum += x;
        t.forward += since(clock);
        tr::backward(o_.model, params_, batch.blocks, acts, dlogits, grads, embedding_ ? &dinputs : nullptr, aggregate_on_);
        t.backward += since(clock);
      }
      sync_gradients(ctx, grads, batch.grad_sync);
      std::vector<double> loss{loss_sum};
      ctx.comm.all_reduce(comm::view_of(loss));
      const auto global_size = static_cast<float>(global[static_cast<std::size_t>(s)].size());
      for (auto& g : grads) g /= global_size;
      t.grad_sync += since(clock);
      opt.step(params_, grads);
      if (embedding_) step_embedding(input_ids, dinputs, global_size);
      t.optimizer += since(clock);
      curve.push_back(loss[0] / static_cast<double>(global_size));
    }
    const double train_s = std::chrono::duration<double>(Clock::now() - start).count();
    const double acc = evaluate(ctx, eval, "eval");

    std::int64_t samples = 0;
    for (const auto& g : global) samples += static_cast<std::int64_t>(g.size());
    const double steps = static_cast<double>(std::max<std::int64_t>(1, o_.steps));
    auto& m = ctx.metrics;
    m["samples_per_s"] = train_s > 0 ? static_cast<double>(samples) / train_s : 0;
    m["accuracy"] = acc;
    m["accuracy_initial"] = acc0;
    m["final_loss"] = curve.empty() ? 0 : curve.back();
    m["initial_loss"] = curve.empty() ? 0 : curve.front();
    m["steps"] = static_cast<double>(o_.steps);
    m["parameters"] = static_cast<double>(params_.size());
    m["step_time_sampling_s"] = t.sampling / steps;
    m["step_time_feature_fetch_s"] = t.fetch / steps;
    m["step_time_forward_s"] = t.forward / steps;
    m["step_time_backward_s"] = t.backward / steps;
    m["step_time_grad_sync_s"] = t.grad_sync / steps;
    m["step_time_optimizer_s"] = t.optimizer / steps;
    ctx.series["loss_curve"] = report::Series{curve, o_.curve_rtol >= 0 ? o_.curve_rtol : default_rtol(o_.precision), {}};
    ctx.dump.write("loss_curve", curve, "per step: all-reduced sum of per-sample losses / global batch size");
    ctx.dump.write("final_params", params_, "the parameters after the last step (flat, reference/train/sage.h layout)");
    if (me == 0) {
      // What every variant must agree on exactly: the schedule and the start parameters.
      I64 canonical{static_cast<std::int64_t>(checksum)};
      for (const auto& g : global) {
        canonical.push_back(static_cast<std::int64_t>(g.size()));
        canonical.insert(canonical.end(), g.begin(), g.end());
      }
      canonical.insert(canonical.end(), eval.begin(), eval.end());
      if (o_.digest_params) {  // for device invariance at one world size: every bit
        for (const float p : params_) canonical.push_back(static_cast<std::int64_t>(ref::float_bits(p)));
        for (const double l : curve) {
          std::int64_t bits;
          std::memcpy(&bits, &l, sizeof bits);
          canonical.push_back(bits);
        }
      }
      ctx.digest = digest_hex(canonical);
    }
  }

 private:
  // The injected bug (the step-27 incident): this rank casts its batch to bf16 after collate,
  // and its model follows its inputs' dtype, so its gradient buckets go out as bf16 while the
  // other ranks' go out as f32.
  static void cast_outside_collate(tr::Batch& batch) {
    for (auto& x : batch.inputs) x = tr::round_bf16(x);
    batch.compute = tr::BatchDType::kBF16;
    batch.grad_sync = tr::BatchDType::kBF16;
  }

  I64 epoch_order(const I64& train, std::uint64_t seed, std::int64_t epoch) const {
    std::vector<std::pair<std::uint64_t, std::int64_t>> keyed;
    for (auto v : train) keyed.emplace_back(ref::philox_u64(seed, static_cast<std::uint64_t>(v), ref::stream_counter(ref::streams::kTrainOrder, static_cast<std::uint32_t>(epoch))), v);
    std::sort(keyed.begin(), keyed.end());
    I64 out;
    for (const auto& [k, v] : keyed) out.push_back(v);
    return out;
  }

  void check_start_checksum(RankContext& ctx, std::uint64_t checksum) {
    I64 mine{static_cast<std::int64_t>(checksum)}, all(static_cast<std::size_t>(ctx.world_size));
    ctx.comm.all_gather(comm::view_of(mine), comm::view_of(all));
    std::map<std::int64_t, int> votes;
    for (auto c : all) ++votes[c];
    if (votes.size() == 1) return;
    std::int64_t common = all[0];  // the most common checksum; rank 0's on a tie
    for (const auto& [c, n] : votes) {
      if (n > votes[common]) common = c;
    }
    int blamed = -1;
    std::ostringstream os;
    os << "parameter checksum at the start of training differs across ranks (parameters must be initialised identically from run.seed):";
    for (std::size_t r = 0; r < all.size(); ++r) {
      os << (r ? "," : "") << " rank " << r << " 0x" << std::hex << static_cast<std::uint64_t>(all[r]) << std::dec;
      if (blamed < 0 && all[r] != common) blamed = static_cast<int>(r);
    }
    fail_with(DiagnosisKind::kResultMismatch, blamed, os.str());
  }

  // Returns the fp32 rows of `nodes`, served by their owners. Three all_to_alls, on every rank.
  std::vector<float> fetch(RankContext& ctx, const I64& nodes) {
    const int ws = ctx.world_size;
    const auto dim = static_cast<std::size_t>(o_.feature_dim);
    std::vector<std::vector<std::size_t>> asked(static_cast<std::size_t>(ws));
    for (std::size_t i = 0; i < nodes.size(); ++i) asked[static_cast<std::size_t>(part_of_[static_cast<std::size_t>(nodes[i])])].push_back(i);
    I64 send(static_cast<std::size_t>(ws)), request;
    for (int r = 0; r < ws; ++r) {
      send[static_cast<std::size_t>(r)] = static_cast<std::int64_t>(asked[static_cast<std::size_t>(r)].size());
      for (auto i : asked[static_cast<std::size_t>(r)]) request.push_back(nodes[i]);
    }
    const I64 recv = exchange_counts(ctx.comm, send);
    const I64 incoming = exchange(ctx.comm, std::move(request), send, recv);
    std::vector<float> reply;
    for (auto v : incoming) {
      if (!store_->append_row(v, reply)) {
        fail_with(DiagnosisKind::kInvariantViolation, ctx.rank, "rank " + std::to_string(ctx.rank) + " was asked for the features of node " +
                                                                    std::to_string(v) + ", owned by rank " + std::to_string(part_of_[static_cast<std::size_t>(v)]));
      }
    }
    I64 reply_send(recv), reply_recv(send);
    for (auto& c : reply_send) c *= static_cast<std::int64_t>(dim);
    for (auto& c : reply_recv) c *= static_cast<std::int64_t>(dim);
    const auto got = exchange(ctx.comm, std::move(reply), reply_send, reply_recv);
    std::vector<float> out(nodes.size() * dim);
    std::size_t at = 0;
    for (int r = 0; r < ws; ++r) {
      for (auto i : asked[static_cast<std::size_t>(r)]) {
        std::copy(got.begin() + static_cast<std::ptrdiff_t>(at), got.begin() + static_cast<std::ptrdiff_t>(at + dim), out.begin() + static_cast<std::ptrdiff_t>(i * dim));
        at += dim;
      }
    }
    return out;
  }

  // Sums `grads` over the ranks in buckets of at most bucket_bytes, in `dtype` on the wire.
  void sync_gradients(RankContext& ctx, std::vector<float>& grads, tr::BatchDType dtype) {
    const bool bf16 = dtype == tr::BatchDType::kBF16;
    const std::size_t per_bucket = std::max<std::size_t>(1, static_cast<std::size_t>(o_.bucket_bytes) / (bf16 ? 2 : 4));
    for (std::size_t off = 0; off < grads.size(); off += per_bucket) {
      const std::size_t n = std::min(per_bucket, grads.size() - off);
      if (bf16) {
        std::vector<comm::BFloat16> buf(n);
        for (std::size_t i = 0; i < n; ++i) buf[i] = comm::to_bfloat16(grads[off + i]);
        ctx.comm.all_reduce(comm::view_of(buf));
        for (std::size_t i = 0; i < n; ++i) grads[off + i] = comm::to_float(buf[i]);
      } else {
        std::vector<float> buf(grads.begin() + static_cast<std::ptrdiff_t>(off), grads.begin() + static_cast<std::ptrdiff_t>(off + n));
        ctx.comm.all_reduce(comm::view_of(buf));
        std::copy(buf.begin(), buf.end(), grads.begin() + static_cast<std::ptrdiff_t>(off));
      }
    }
  }

  // The model's input rows for `nodes`: the fixed features from the feature store, then (with
  // embedding_dim > 0) the nodes' learnable DistEmbedding rows, pulled from their owners.
  // Collective on every rank.
  std::vector<float> inputs(RankContext& ctx, const I64& nodes) {
    std::vector<float> fixed = fetch(ctx, nodes);
    if (!embedding_) return fixed;
    const std::vector<float> learned = embedding_->pull(ref::IdSpan{nodes.data(), static_cast<std::int64_t>(nodes.size()), ref::IdType::kI64, ref::Device{}}).to_host();
    const auto f = static_cast<std::size_t>(o_.feature_dim), e = static_cast<std::size_t>(o_.embedding_dim);
    std::vector<float> rows(nodes.size() * (f + e));
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      std::copy_n(fixed.begin() + static_cast<std::ptrdiff_t>(i * f), f, rows.begin() + static_cast<std::ptrdiff_t>(i * (f + e)));
      std::copy_n(learned.begin() + static_cast<std::ptrdiff_t>(i * e), e, rows.begin() + static_cast<std::ptrdiff_t>(i * (f + e) + f));
    }
    return rows;
  }

  // Pushes d(mean loss) / d(embedding rows) of this rank's input nodes to their owners, which
  // sum the contributions of every rank and apply sparse SGD. Every rank calls it every step.
  void step_embedding(const I64& ids, const std::vector<float>& dinputs, float global_size) {
    const auto f = static_cast<std::size_t>(o_.feature_dim), e = static_cast<std::size_t>(o_.embedding_dim);
    if (!dinputs.empty()) {
      std::vector<float> g(ids.size() * e);
      for (std::size_t i = 0; i < ids.size(); ++i) {
        for (std::size_t j = 0; j < e; ++j) g[i * e + j] = dinputs[i * (f + e) + f + j] / global_size;
      }
      embedding_->accumulate_grad(ref::IdSpan{ids.data(), static_cast<std::int64_t>(ids.size()), ref::IdType::kI64, ref::Device{}}, g.data());
    }
    embedding_->step();
  }

  // Accuracy on the eval nodes (each rank its rank_split share), in the training precision.
  double evaluate(RankContext& ctx, const I64& eval, const std::string& phase) {
    ctx.comm.set_phase(phase);
    ctx.comm.set_step(0);
    const I64 mine = ref::rank_split(eval, ctx.world_size)[static_cast<std::size_t>(ctx.rank)];
    auto sampled = ref::sample_neighbors(rows_, mine, sample_, ref::SampleKey{ctx.scenario.seed, 1, 0, 0});
    auto rows = inputs(ctx, sampled.blocks.back().src_nodes);
    std::vector<std::int32_t> labels;
    for (auto v : mine) labels.push_back(labels_[static_cast<std::size_t>(v)]);
    const tr::Batch batch = tr::collate(std::move(sampled), std::move(rows), o_.model.in_dim, std::move(labels), o_.precision);
    I64 correct{0};
    if (!mine.empty()) {
      const auto acts = tr::forward(o_.model, params_, batch.blocks, batch.inputs, batch.compute == tr::BatchDType::kBF16,
                                    aggregate_on_);
      const auto pred = tr::predictions(o_.model, batch.blocks, acts.logits);
      for (std::size_t i = 0; i < pred.size(); ++i) correct[0] += pred[i] == batch.labels[i];
    }
    ctx.comm.all_reduce(comm::view_of(correct));
    return eval.empty() ? 0 : static_cast<double>(correct[0]) / static_cast<double>(eval.size());
  }

  Options o_;
  ref::CsrGraph rows_;
  std::vector<std::int32_t> part_of_;
  std::vector<std::int32_t> labels_;
  std::unique_ptr<FeatureStore> store_;
  ref::SampleOptions sample_;
  std::vector<float> params_;
  ref::Device aggregate_on_;  // where the mean aggregation runs: the host, or the rank's GPU (run.device = "cuda")
  std::unique_ptr<CommTransport> transport_;
  std::unique_ptr<ref::DistEmbedding> embedding_;
};

std::unique_ptr<Workload> make(const scenario::Scenario& s) {
  const scenario::Config& c = s.workload_config;
  Options o;
  (void)c.get_string("kind");
  static_cast<TrainingSpec&>(o) = TrainingSpec::read(c, s.seed);
  o.method = read_partition_method(c);
  o.embedding_dim = c.get_int("embedding_dim", 0);
  if (o.embedding_dim < 0 || o.embedding_dim > 1024) c.fail("embedding_dim", "must be in 0..1024, got " + std::to_string(o.embedding_dim));
  o.model.in_dim = o.feature_dim + o.embedding_dim;
  o.embedding_lr = scenario::read_double(c, "embedding_lr", 0.1, scenario::Interval{0, 100, /*lo_open=*/true});
  o.num_eval = scenario::read_int(c, "num_eval", o.num_eval, 0);
  const std::int64_t nodes = o.graph.kind == "rmat" ? std::int64_t{1} << o.graph.scale
                             : o.graph.kind.rfind("tiny:", 0) == 0 ? build_graph(o.graph).num_nodes
                                                                   : o.graph.nodes;
  if (o.num_train + o.num_eval > nodes) {
    c.fail(c.has("num_eval") ? "num_eval" : "num_train", "num_train " + std::to_string(o.num_train) + " + num_eval " + std::to_string(o.num_eval) +
                                                             " exceed the graph's " + std::to_string(nodes) + " nodes");
  }
  o.bucket_bytes = c.get_int("bucket_bytes", o.bucket_bytes);
  if (o.bucket_bytes < 4 || o.bucket_bytes > (std::int64_t{1} << 30)) c.fail("bucket_bytes", "must be in [4, 2^30], got " + std::to_string(o.bucket_bytes));
  o.num_workers = static_cast<int>(c.get_int("num_workers", 0));
  if (o.num_workers < 0 || o.num_workers > 16) c.fail("num_workers", "must be in 0..16, got " + std::to_string(o.num_workers));
  const std::string fdev = c.get_string("feature_device", "cpu");
  if (fdev != "cpu" && fdev != "cuda") c.fail("feature_device", "must be 'cpu' or 'cuda', got '" + fdev + "'");
  o.features_on_cuda = fdev == "cuda";
  if (o.features_on_cuda && !s.requires_cuda) c.fail("feature_device", "'cuda' needs [requires] cuda = true");
  o.digest_params = c.get_bool("digest_params", false);
  o.gpu_aggregation = s.device == scenario::Device::kCuda;
  o.curve_rtol = c.get_double("curve_rtol", -1);
  if (c.has("curve_rtol") && !(o.curve_rtol >= 0 && o.curve_rtol <= 1)) c.fail("curve_rtol", "must be in [0, 1]");
  c.finish();

  for (const auto& inj : s.injections) {
    if (inj.kind == "cast_bf16_at_step") {
      (void)inj.config.get_string("kind");
      o.cast_step = inj.config.get_int("step", 27);
      if (o.cast_step < 0) inj.config.fail("step", "must be >= 0");
      const std::string where = inj.config.get_string("where", "outside_collate");
      if (where != "outside_collate" && where != "collate") inj.config.fail("where", "must be 'outside_collate' or 'collate', got '" + where + "'");
      o.cast_in_collate = where == "collate";
      if (!o.cast_in_collate) {
        o.cast_rank = static_cast<int>(inj.config.get_int("rank"));
        if (o.cast_rank < 0 || o.cast_rank >= s.world_size) inj.config.fail("rank", "must be in [0, world_size)");
      } else if (inj.config.has("rank")) {
        inj.config.fail("rank", "where = 'collate' casts on every rank; remove rank");
      }
      inj.config.finish();
    } else if (inj.kind == "rank_seeded_init") {
      (void)inj.config.get_string("kind");
      o.rank_seeded_init = true;
      o.seed_rank = static_cast<int>(inj.config.get_int("rank", -1));
      if (o.seed_rank == 0 || o.seed_rank < -1 || o.seed_rank >= s.world_size) inj.config.fail("rank", "must be in [1, world_size) (rank 0 keeps run.seed)");
      inj.config.finish();
    }
  }
  o.floor_split = has_switch_injection(s, "floor_division_split");
  return std::make_unique<Training>(std::move(o));
}

}  // namespace

WorkloadSpec training_spec() {
  return WorkloadSpec{"training",
                      "data-parallel GraphSAGE training: sharded feature store, bucketed gradient all-reduce, fp32/bf16 precision modes, loss curve invariant across world sizes",
                      make, {"cast_bf16_at_step", "rank_seeded_init", "floor_division_split"},
                      /*gpu_compute_host_exchange=*/true};
}

}  // namespace lockstep::workloads
