#pragma once
// DistEmbedding: an N x D learnable table sharded over ranks by a partition book, with sparse
// optimizers, as DGL's DistEmbedding, PyTorch's nn.Embedding(sparse=True) + torch.optim and
// WholeGraph's embeddings do. This header defines the semantics; the harness runs it over its
// communicator and checks it against a dense LibTorch computation.
//
// Initialisation. Element (row, col) starts as embedding_init(seed, row, col, scale), a pure
// function of its global coordinates, so it never depends on the sharding, world size or
// storage dtype; it is then rounded once to the storage dtype.
//
// Storage and state. Rows are stored as f32, bf16 or f16. Optimizer state is always f32. One
// update reads the stored row as f32, computes in f32 and rounds the result once to storage.
//
// Gradient reduction. All gradient rows pushed for the same id in one step are reduced to one
// row g before the optimizer sees it, accumulating in global batch-position order from +0.0f:
//   sum  (PyTorch nn.Embedding backward, WholeGraph):  g = ((0 + g_1) + g_2) + ... + g_k
//   mean (DGL's sparse optimizers):                     g = sum / float(k)
// Rows with no gradient in a step are not touched (no decay, no state change).
//
// Optimizers (torch.optim's rules, no weight decay, no momentum; all arithmetic in f32, each
// operation rounded once, in exactly this order; lr, eps and the (1 - beta) factors are
// rounded to f32 once; t is the number of step() calls so far, including this one):
//   SGD:     w <- w - lr * g
//   Adagrad: s <- s + g * g;  w <- w - lr * (g / (sqrt(s) + eps))          s0 = initial_acc
//   Adam:    (torch.optim.SparseAdam: lazy, only touched rows; t counts every step() call,
//            touched or not, as SparseAdam's per-parameter step does)
//            m <- (g - m) * (1 - beta1) + m;   v <- (g * g - v) * (1 - beta2) + v
//            step_size = lr * sqrt(1 - beta2^t) / (1 - beta1^t)     (double, then to f32)
//            w <- w + (-step_size) * (m / (sqrt(v) + eps))
// torch.optim applies these with fused kernels (add_ with alpha, addcmul_, addcdiv_), whose
// vectorised CPU paths may be contracted into fused multiply-adds; the reference pins the
// unfused order above, which the dense LibTorch check reproduces with separate mul, add, sub,
// div and sqrt tensor ops.
//
// Distribution. Rank r holds part r of the book (num_parts == world_size). pull(ids) fetches
// each id's row from its owner (one all_to_all of ids, one of rows, after one of counts);
// accumulate_grad() records gradient rows; step() sends them to the owners (counts, ids,
// gradients: three all_to_alls), which reduce them as above in arrival order (source rank
// order, then each source's recording order) and update their rows. Every rank must call
// pull() and step() the same number of times, with empty inputs when it has no ids.
//
// Devices. A shard may live on a CUDA device (EmbeddingOptions::device): its lookups, row
// gathers and fused reduce-and-update run there as kernels over the per-element functions of
// embedding_one.h, which the host shard runs too, so every pulled row and every stored bit is
// the same on either. Exchanges stay host buffers (the transport's).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "reference/common/device.h"
#include "reference/common/philox.h"
#include "reference/embedding/embedding_one.h"
#include "reference/partition/book.h"

namespace lockstep::ref {

std::string to_string(Storage s);           // "f32", "bf16", "f16"
std::string to_string(DuplicateReduce r);   // "sum", "mean"
std::string to_string(OptimizerKind k);     // "sgd", "adagrad", "adam"
// Parse those names; throw std::invalid_argument naming an unknown one.
Storage storage_from_string(const std::string& name);
DuplicateReduce duplicate_reduce_from_string(const std::string& name);
OptimizerKind optimizer_from_string(const std::string& name);

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kSgd;
  double lr = 0.01;
  double eps = -1;  // < 0: torch's default (Adagrad 1e-10, Adam 1e-8)
  double beta1 = 0.9;
  double beta2 = 0.999;
  double initial_accumulator_value = 0.0;  // Adagrad
  double resolved_eps() const { return eps >= 0 ? eps : (kind == OptimizerKind::kAdam ? 1e-8 : 1e-10); }
};

// Returns the initial value of element (row, col): (2u - 1) * scale rounded to f32, where
// u = uniform01(philox_u64(seed, row, stream_counter(kEmbeddingInit, col))).
inline float embedding_init(std::uint64_t seed, std::int64_t row, std::int64_t col, double scale) {
  const double u = uniform01(philox_u64(seed, static_cast<std::uint64_t>(row),
                                        stream_counter(streams::kEmbeddingInit, static_cast<std::uint32_t>(col))));
  return static_cast<float>((2.0 * u - 1.0) * scale);
}

// Returns f rounded once to `s` and widened back to f32 (f itself for kF32).
float round_to_storage(float f, Storage s);
// The unit roundoff of `s`: 2^-24 (f32), 2^-8 (bf16), 2^-11 (f16).
double unit_roundoff(Storage s);

// The tolerance of a stored element against the f32 dense reference, after `roundings`
// roundings to storage (1 for initialisation + 1 per step that touched the row), where
// max_abs bounds |reference value| over the element's trajectory so far:
//   tol = r * (u * (1 + r * u) + 2^-22) * max_abs + r * a,   a = 2^-25 for f16 (its
//   subnormal spacing / 2), 0 otherwise.
// Valid when the gradients do not depend on the weights (then the optimizer state is the same
// in both computations and each rounding adds at most u * |value| + a, and the f32 update
// itself at most 2^-24 relative on each side). For kF32 it returns 0: f32 must be exact.
double storage_tolerance(Storage s, std::int64_t roundings, double max_abs);

// The id at batch position p of step s of the harness's embedding batches: half from the
// first `hot_rows` rows (duplicates within and across ranks), half uniform over `rows`.
// w = philox_u64x2(seed, p, stream_counter(kEmbeddingIds, s)); the range is hot_rows when the
// top bit of w[0] is set, else rows; the id is uniform_below(w[1], range).
inline std::int64_t embedding_batch_id(std::uint64_t seed, std::int64_t s, std::int64_t p, std::int64_t rows,
                                       std::int64_t hot_rows) {
  const auto w = philox_u64x2(seed, static_cast<std::uint64_t>(p), stream_counter(streams::kEmbeddingIds, static_cast<std::uint32_t>(s)));
  const auto range = (w[0] >> 63) ? std::min(hot_rows, rows) : rows;
  return static_cast<std::int64_t>(uniform_below(w[1], static_cast<std::uint64_t>(range)));
}

// The output gradient at batch position p, column c of step s: uniform in [-1, 1), from
// philox_u64(seed, p << 16 | c, stream_counter(kEmbeddingGrads, s)).
inline float embedding_batch_grad(std::uint64_t seed, std::int64_t s, std::int64_t p, std::int64_t c) {
  const auto bits = philox_u64(seed, (static_cast<std::uint64_t>(p) << 16) | static_cast<std::uint64_t>(c),
                               stream_counter(streams::kEmbeddingGrads, static_cast<std::uint32_t>(s)));
  return static_cast<float>(2.0 * uniform01(bits) - 1.0);
}

// Gradient rows grouped by id: ids (distinct, ascending); the contributions of ids[k] are
// rows order[ptr[k]] .. order[ptr[k + 1] - 1] of the input, in input order.
struct GradGroups {
  std::vector<std::int64_t> ids, ptr, order;
};
// Groups n ids (a stable sort of positions by id). Throws std::invalid_argument when n < 0.
GradGroups group_duplicates(const std::int64_t* ids, std::int64_t n);

// Gradient rows reduced by id.
struct ReducedGrads {
  std::vector<std::int64_t> ids;     // distinct ids, ascending
  std::vector<std::int64_t> counts;  // contributions per id
  std::vector<float> grads;          // ids.size() x dim
};
// Reduces n gradient rows (n x dim, row i for ids[i]) by id, accumulating each id's rows in
// input order from +0.0f, then dividing by the count for kMean (group_duplicates, then
// reduce_element per element). Throws std::invalid_argument when dim < 1 or n < 0.
ReducedGrads reduce_duplicates(const std::int64_t* ids, const float* grads, std::int64_t n, std::int64_t dim,
                               DuplicateReduce mode);

// Step t's constants of `opt` (t >= 1), rounded to f32 as embedding.h's order says.
UpdateRule update_rule(const OptimizerOptions& opt, std::int64_t t);

// Applies one optimizer update to a row of `dim` f32 values, in place: w (the stored row
// widened to f32), s1 (Adagrad: sum; Adam: m), s2 (Adam: v); t is the step count (>= 1).
void apply_update(const OptimizerOptions& opt, std::int64_t t, std::int64_t dim, const float* g, float* w, float* s1,
                  float* s2);

// One part's rows: storage and optimizer state, local ids [0, rows), on the host or in the
// memory of one CUDA device, where reference/embedding/cuda's kernels gather and update them
// with the per-element functions the host runs (embedding_one.h), so the rows are the same
// bits on either.
class EmbeddingShard {
 public:
  // Initialises local row l (global id global_ids[l]) with embedding_init, rounded to storage,
  // then moves rows and state to `device`. Throws std::invalid_argument when dim < 1, and
  // std::runtime_error for a CUDA device that is not visible or on a build without the CUDA
  // kernels (LOCKSTEP_HAVE_CUDA_KERNELS).
  EmbeddingShard(std::vector<std::int64_t> global_ids, std::int64_t dim, Storage storage, std::uint64_t seed,
                 double init_scale, const OptimizerOptions& opt, Device device = {});

  std::int64_t rows() const { return static_cast<std::int64_t>(global_ids_.size()); }
  std::int64_t dim() const { return dim_; }
  Storage storage() const { return storage_; }
  Device device() const { return device_; }
  const std::vector<std::int64_t>& global_ids() const { return global_ids_; }

  // Writes local row l as f32 into host out[0, dim). l must be in [0, rows()) (unchecked).
  void read_row(std::int64_t l, float* out) const;
  // Writes every row as f32, row-major (rows() x dim), on the host.
  std::vector<float> to_f32() const;
  // The rows themselves for kF32 storage on the host (rows() x dim, row-major), else null.
  const float* f32_data() const { return storage_ == Storage::kF32 && !device_.is_cuda() ? f32_.data() : nullptr; }
  // out[i * dim + c] = element c of local row locals[i], for i in [0, n) with part null or
  // part[i] == me. locals (int32 or int64), part and out live where the shard does; locals
  // must be in [0, rows()) (unchecked).
  void gather(const void* locals, IdType type, const std::int32_t* part, int me, std::int64_t n, float* out) const;
  // Applies the update of reduced gradient row g (host) to local row l at step t.
  void update_row(std::int64_t l, const float* g, std::int64_t t);
  // Applies every group's update at step t: local row locals[k] gets the reduction (`mode`) of
  // its contributions, grads (host, n x dim) rows groups.order[ptr[k] .. ptr[k + 1]), element
  // by element (update_from_contributions). locals must be in [0, rows()) (unchecked).
  void update_rows(const std::vector<std::int64_t>& locals, const GradGroups& groups, const float* grads,
                   std::int64_t n, DuplicateReduce mode, std::int64_t t);
  // THE KNOWN BUG, kept for fault injection (DGL #3561): the updates of one row from several
  // sources applied as concurrent read-modify-writes of its state and weights; each source
  // computes its update from the same snapshot and the last writer wins, so every other
  // source's update is lost. groups: the per-source reduced gradient rows (k x dim), in
  // source order.
  void update_row_racy(std::int64_t l, const std::vector<std::vector<float>>& groups, std::int64_t t);

 private:
  // Row l's weights (as f32) and state, to and from host buffers of dim values each (s1, s2
  // may be empty when the optimizer has no such state).
  void load_state(std::int64_t l, float* w, std::vector<float>& s1, std::vector<float>& s2) const;
  void save_state(std::int64_t l, const float* w, const std::vector<float>& s1, const std::vector<float>& s2);
  std::size_t element_bytes() const { return storage_ == Storage::kF32 ? 4 : 2; }
  const void* table() const;
  void* table() { return const_cast<void*>(static_cast<const EmbeddingShard*>(this)->table()); }
  float* state(int which);  // 1: s1, 2: s2; null when the optimizer has none

  std::vector<std::int64_t> global_ids_;
  std::int64_t dim_;
  Storage storage_;
  OptimizerOptions opt_;
  Device device_;
  bool has_s1_ = false, has_s2_ = false;
  std::vector<float> f32_;  // host storage and state
  std::vector<std::uint16_t> half_;
  std::vector<float> s1_, s2_;
  CudaBuffer table_d_, s1_d_, s2_d_;  // CUDA storage and state
};

// How a DistEmbedding talks to the other ranks: the harness implements it over its
// communicator. Every call is collective: every rank must make it, in the same order, even with
// nothing to send.
class EmbeddingTransport {
 public:
  virtual ~EmbeddingTransport() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Sends send_counts[r] consecutive elements of `data` to rank r; returns what arrived, in
  // rank order, and sets recv_counts[r] to the number from rank r (two all_to_alls: counts,
  // data).
  virtual std::vector<std::int64_t> exchange_ids(const std::vector<std::int64_t>& data,
                                                 const std::vector<std::int64_t>& send_counts,
                                                 std::vector<std::int64_t>& recv_counts) = 0;
  // As above for f32 values whose recv_counts both sides already know (one all_to_all).
  virtual std::vector<float> exchange_values(const std::vector<float>& data, const std::vector<std::int64_t>& send_counts,
                                             const std::vector<std::int64_t>& recv_counts) = 0;
};

// Rows returned by pull(): rows x dim f32 values, on `device` (the ids' device).
class EmbeddingRows {
 public:
  EmbeddingRows() = default;
  // Takes rows x dim host values and moves them to `device` (a copy for CUDA).
  EmbeddingRows(std::int64_t rows, std::int64_t dim, std::unique_ptr<float[]> host, Device device);
  // Takes rows x dim values already in the memory of CUDA device `device`.
  EmbeddingRows(std::int64_t rows, std::int64_t dim, CudaBuffer values, Device device);
  std::int64_t rows() const { return rows_; }
  std::int64_t dim() const { return dim_; }
  Device device() const { return device_; }
  // The values on the host (copied from the device when needed).
  std::vector<float> to_host() const;
  const float* host_data() const { return host_.get(); }  // null for CUDA rows

 private:
  std::int64_t rows_ = 0, dim_ = 0;
  Device device_;
  std::unique_ptr<float[]> host_;  // uninitialised until pull() fills every value
  CudaBuffer cuda_;
};

struct EmbeddingOptions {
  std::int64_t dim = 16;
  Storage storage = Storage::kF32;
  DuplicateReduce reduce = DuplicateReduce::kSum;
  OptimizerOptions optimizer;
  std::uint64_t seed = 0;
  double init_scale = 0.5;
  bool lost_update_bug = false;  // owners apply each source's update racily (see update_row_racy)
  // Where this rank's shard lives: the host, or a CUDA device (lookups, gathers and updates on
  // that device; the transport still exchanges host buffers).
  Device device;
};

class DistEmbedding {
 public:
  // Builds this rank's shard of a book.num_nodes() x opts.dim table. Throws
  // std::invalid_argument when book.num_parts() != transport.world_size() or dim < 1.
  DistEmbedding(std::shared_ptr<const PartitionBook> book, EmbeddingOptions opts, EmbeddingTransport& transport);

  // Returns the current rows of `ids` (int32 or int64, host or CUDA) as f32, on the ids'
  // device. Collective. Throws std::out_of_range on an id outside [0, num_rows()).
  EmbeddingRows pull(IdSpan ids);
  // Records gradient rows (host, ids.size x dim) for `ids`, to be pushed at step().
  void accumulate_grad(IdSpan ids, const float* grads);
  // Pushes the recorded gradients to their owners, which reduce and apply them; clears them.
  // Collective: every rank calls it every iteration, with no gradients if it had no ids.
  void step();

  std::int64_t num_rows() const { return book_->num_nodes(); }
  std::int64_t steps() const { return t_; }
  const EmbeddingShard& shard() const { return shard_; }
  const PartitionBook& book() const { return *book_; }
  // Bytes of row data this rank received from pull() so far (local rows included).
  std::int64_t pulled_bytes() const { return pulled_bytes_; }

 private:
  std::shared_ptr<const PartitionBook> book_;
  EmbeddingOptions opts_;
  EmbeddingTransport& tp_;
  EmbeddingShard shard_;
  std::int64_t t_ = 0;
  std::vector<std::int64_t> pending_ids_;
  std::vector<float> pending_grads_;
  std::int64_t pulled_bytes_ = 0;
  IdArray parts_, locals_;  // reused lookup outputs

  EmbeddingRows pull_on_device(IdSpan ids);  // pull() for a shard on a CUDA device

  // The remote half of a pull, for both: positions i in [0, n) with part[i] != this rank ask
  // their owner for local row local[i] (of `type`), grouped by owner in position order
  // (send_counts: per owner); this rank answers what it was asked for with serve(asked local
  // rows, reply: asked.size() x dim host floats) after checking their range. Returns the
  // asking positions and, in their order, the rows that came back.
  struct RemoteRows {
    std::vector<std::int64_t> where;
    std::vector<float> rows;
  };
  using ServeRows = std::function<void(const std::vector<std::int64_t>&, float*)>;
  RemoteRows fetch_remote(const std::int32_t* part, const void* local, IdType type, std::int64_t n,
                          std::vector<std::int64_t> send_counts, const ServeRows& serve);
};

// Returns an even range book: part p owns [p*N/P rounded as rank_split does).
std::shared_ptr<const PartitionBook> even_range_book(std::int64_t rows, int parts);

}  // namespace lockstep::ref
