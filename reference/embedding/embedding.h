#pragma once
// DistEmbedding: an N x D learnable table sharded over ranks by a partition book, with sparse
// optimizers, as DGL's DistEmbedding, PyTorch's nn.Embedding(sparse=True) + torch.optim and
// WholeGraph's embeddings do. The harness runs it over its communicator and checks it against a
// dense LibTorch computation.
//
// The semantics are in three headers: optimizer.h (storage rounding, gradient reduction and
// the optimizers' update order), shard.h (initialisation and one part's rows on the host or a
// CUDA device) and this one (the distribution).
//
// Distribution. Rank r holds part r of the book (num_parts == world_size). pull(ids) fetches
// each id's row from its owner (one all_to_all of ids, one of rows, after one of counts);
// accumulate_grad() records gradient rows; step() sends them to the owners (counts, ids,
// gradients: three all_to_alls), which reduce them (optimizer.h) in arrival order (source rank
// order, then each source's recording order) and update their rows. Every rank must call
// pull() and step() the same number of times, with empty inputs when it has no ids.
// Rows pulled for ids on a CUDA device come back on that device; exchanges stay host buffers.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "reference/common/device.h"
#include "reference/common/philox.h"
#include "reference/embedding/optimizer.h"
#include "reference/embedding/shard.h"
#include "reference/partition/book.h"

namespace lockstep::ref {

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
  // Row updates of this rank's shard so far whose gradient was reduced from two or more
  // gradient rows of one step (duplicate ids): the updates where the duplicate reduction
  // (sum or mean) makes a difference.
  std::int64_t reduced_duplicate_rows() const { return reduced_duplicate_rows_; }
  // With lost_update_bug, the row updates of this rank's shard so far with gradients from two
  // or more ranks in one step: those applied racily (update_row_racy). 0 without the bug.
  std::int64_t multi_source_rows() const { return multi_source_rows_; }

 private:
  std::shared_ptr<const PartitionBook> book_;
  EmbeddingOptions opts_;
  EmbeddingTransport& tp_;
  EmbeddingShard shard_;
  std::int64_t t_ = 0;
  std::vector<std::int64_t> pending_ids_;
  std::vector<float> pending_grads_;
  std::int64_t pulled_bytes_ = 0;
  std::int64_t reduced_duplicate_rows_ = 0, multi_source_rows_ = 0;
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
