#pragma once
// The dense single-process reference for DistEmbedding, computed with LibTorch: one
// torch::nn::Embedding over the whole f32 table, forward and backward on the concatenated
// global batch (its backward sums duplicate ids in batch order), then the update of
// reference/embedding/embedding.h on the touched rows with one separate tensor op per
// arithmetic operation (mul, add, sub, div, sqrt), never a fused one; sqrt is taken in double
// and rounded once to f32 (correctly rounded, which at::sqrt on f32 is not on every line).
// Torch-free header; the
// one translation unit that includes LibTorch is compiled into lockstep_c10d.
#include <cstdint>
#include <memory>
#include <vector>

#include "reference/embedding/bag.h"
#include "reference/embedding/embedding.h"

namespace lockstep::torchref {

class DenseEmbedding {
 public:
  // init: rows x dim f32 values, row-major. Throws std::invalid_argument on a size mismatch.
  DenseEmbedding(std::int64_t rows, std::int64_t dim, const std::vector<float>& init, const ref::OptimizerOptions& opt,
                 ref::DuplicateReduce reduce);
  ~DenseEmbedding();
  DenseEmbedding(const DenseEmbedding&) = delete;
  DenseEmbedding& operator=(const DenseEmbedding&) = delete;

  // One training step on the global batch `ids` with output gradient grad_output
  // (ids.size() x dim): forward, backward, update. Returns the forward output (the rows before
  // the update), host f32.
  std::vector<float> step(const std::vector<std::int64_t>& ids, const std::vector<float>& grad_output);
  // One training step on a batch of bags (reference/embedding/bag.h): bag b holds
  // ids[offsets[b], offsets[b + 1]) (offsets: bags + 1 values from 0), weights one per id or
  // empty, bag_grads bags x dim. Pools with LibTorch's at::embedding_bag, spreads bag_grads to
  // the ids as torch's sparse embedding_bag backward does (gathered per id, times
  // 1 / float(size) for mean, times the weight) with separate tensor ops, then step(). Returns
  // the pooled rows (bags x dim, before the update), host f32.
  std::vector<float> step_bags(const std::vector<std::int64_t>& ids, const std::vector<std::int64_t>& offsets,
                               const std::vector<float>& weights, ref::BagPooling pooling, const std::vector<float>& bag_grads);
  // The table, rows x dim, host f32.
  std::vector<float> weights() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep::torchref
