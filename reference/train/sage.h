#pragma once
// GraphSAGE (mean aggregation) over sampled blocks, with its forward and backward written by
// hand: deterministic loops in a fixed summation order, no threads, so a sample's logits never
// depend on which other samples share its batch, and the gradient of a batch is exactly (in
// real arithmetic) the sum of the gradients of any split of it. Plus the data it trains on
// (Philox features, a learnable label function of the graph), the collate step (the ONE place
// where a batch changes precision), softmax cross-entropy and SGD / Adam on fp32 master
// weights. Everything here is on the host and a pure function of its arguments.
//
// Layer l (l = 0 .. L-1) runs on block h = L-1-l (blocks go from the seeds outwards, layers
// from the input inwards, as DGL's blocks reversed) with input H (one row per src node):
//   agg[d] = mean over the block's edges e with edge_dst[e] = d of H[edge_src[e]]  (0 if none)
//   z[d]   = H[d] W_self + agg[d] W_neigh + b        (dst node d is src node d)
//   out[d] = act(z[d]) for l < L-1 (ReLU or SiLU, SageConfig), z[d] for the last layer (logits)
// Weights are row-major [in][out]; sums run over the input index in increasing order, edges in
// block order.
#include <cstdint>
#include <string>
#include <vector>

#include "reference/common/device.h"
#include "reference/graph/graph.h"
#include "reference/sampling/neighbor.h"

namespace lockstep::ref::train {

// ---- data ----------------------------------------------------------------------------------

// Feature j of node v: uniform in [-1, 1) from
// philox_u64x2(seed, c0 = v, stream_counter(streams::kTrainFeature, j / 2))[j % 2].
float node_feature(std::uint64_t seed, std::int64_t v, std::int64_t j);

// Appends the `dim` features of each node in `nodes` to `out` (row-major).
void node_features(std::uint64_t seed, std::int64_t dim, const std::vector<std::int64_t>& nodes,
                   std::vector<float>& out);

// The label of every node: argmax over classes c of sum_j P[c][j] * (x_v[j] + m_v[j]), where
// x_v are v's features, m_v the mean of the features of v's rows in `rows` (its in-neighbors
// for sampling_graph(g, true); 0 when it has none), and P[c][j] uniform in [-1, 1) from
// philox_u64(seed, c0 = c * dim + j, stream_counter(streams::kTrainLabel, 0)). Sums in double,
// ties to the lowest class. Learnable by a 1-hop GraphSAGE layer; roughly balanced classes.
// Throws std::invalid_argument when dim < 1 or num_classes < 2.
std::vector<std::int32_t> node_labels(const CsrGraph& rows, std::uint64_t seed, std::int64_t dim,
                                      int num_classes);

// The train and eval nodes: nodes sorted by (philox_u64(seed, v, stream_counter(
// streams::kTrainSplit, 0)), v); the first num_train are train, the next num_eval eval.
// Throws std::invalid_argument when num_train or num_eval is negative or together they exceed
// num_nodes.
void train_eval_split(std::int64_t num_nodes, std::uint64_t seed, std::int64_t num_train,
                      std::int64_t num_eval, std::vector<std::int64_t>& train,
                      std::vector<std::int64_t>& eval);

// ---- precision and collate -----------------------------------------------------------------

// fp32: everything in fp32. bf16: collate rounds the input features to bf16, the model rounds
// its hidden activations to bf16 (what a bf16 kernel stores), matmuls accumulate in fp32,
// master weights and the gradient all-reduce stay fp32. bf16_reduce: bf16, and the gradient
// all-reduce carries bf16 (rounded from the fp32 local sums).
enum class Precision { kF32, kBF16, kBF16Reduce };
std::string to_string(Precision p);  // "fp32", "bf16", "bf16_reduce"
// Throws std::invalid_argument naming an unknown name.
Precision precision_from_string(const std::string& name);

// Returns v rounded to the nearest bfloat16 (ties to even; NaN stays NaN), as a float.
float round_bf16(float v);

enum class BatchDType { kF32, kBF16 };

// A minibatch ready for the model: its blocks, the input rows in `compute` precision, the
// labels of its seeds, and the dtype its gradients are synchronised in.
struct Batch {
  SampledBlocks blocks;
  std::vector<float> inputs;            // |blocks.back().src_nodes| x dim, row-major
  std::vector<std::int32_t> labels;     // per seed (blocks.seeds)
  BatchDType compute = BatchDType::kF32;
  BatchDType grad_sync = BatchDType::kF32;
};

// THE collate step: the one place where a batch changes precision. Takes the fetched fp32
// input rows (one per blocks.back().src_nodes, or per seed when there are no blocks) and
// rounds them to bf16 for Precision::kBF16 / kBF16Reduce, setting compute and grad_sync as the
// mode says. Throws std::invalid_argument when the row count does not match.
Batch collate(SampledBlocks blocks, std::vector<float> fp32_rows, std::int64_t dim,
              std::vector<std::int32_t> labels, Precision precision);

// ---- model ---------------------------------------------------------------------------------

struct SageConfig {
  std::int64_t in_dim = 16;
  std::int64_t hidden = 32;
  std::int64_t num_classes = 4;
  int num_layers = 2;  // 1 .. 3 (layers beyond the first have in_dim = hidden)
  // Between layers. kRelu: max(z, 0). kSilu: z * sigmoid(z), whose gradient is continuous, so
  // a rounding-sized change of the weights never flips a unit's gradient on or off (with ReLU
  // it can: a z within rounding of 0 changes the gradient by a finite amount).
  enum class Activation { kRelu, kSilu } activation = Activation::kRelu;
};

// Offsets of one layer's tensors in the flat parameter vector: w_self [in][out], then
// w_neigh [in][out], then bias [out].
struct LayerShape {
  std::int64_t in = 0, out = 0;
  std::int64_t w_self = 0, w_neigh = 0, bias = 0;  // offsets
};

// Returns the layers' shapes and offsets. Throws std::invalid_argument for a bad config.
std::vector<LayerShape> layer_shapes(const SageConfig& config);
// Returns the number of parameters.
std::int64_t num_params(const SageConfig& config);

// Glorot-uniform weights, zero biases: parameter i of a weight matrix with fan_in + fan_out =
// s is (2 u - 1) * sqrt(6 / s), u = uniform01(philox_u64(seed, c0 = i,
// stream_counter(streams::kTrainInit, 0))), i the flat index. Identical on every rank.
std::vector<float> init_params(const SageConfig& config, std::uint64_t seed);

// Activations kept by forward for backward.
template <class T>
struct Activations {
  std::vector<std::vector<T>> inputs;  // per layer: its input rows (src nodes x in)
  std::vector<std::vector<T>> agg;     // per layer: mean-aggregated rows (dst x in)
  std::vector<std::vector<T>> pre;     // per layer: z (dst x out)
  std::vector<T> logits;               // per unique seed (blocks[0].dst_nodes) x classes
};

// Runs the model on `blocks` (blocks.size() == num_layers) with input rows `inputs`
// (|blocks.back().src_nodes| x in_dim). With round_bf16_hidden, hidden activations are
// rounded to bf16 after the ReLU. aggregate_on: where the mean aggregation runs, the host or a
// CUDA device (lockstep's kernels, aggregate.h; T = float only), with the same bits either
// way. Throws std::invalid_argument on a shape mismatch or a CUDA device for double,
// std::runtime_error without the CUDA kernels or on a CUDA error.
template <class T>
Activations<T> forward(const SageConfig& config, const std::vector<T>& params,
                       const SampledBlocks& blocks, const std::vector<T>& inputs,
                       bool round_bf16_hidden = false, Device aggregate_on = {});

// Softmax cross-entropy of each seed's logits (row seed_to_output[i]) against labels[i]:
// returns per-seed losses (log-sum-exp with the max subtracted) and writes d(sum of losses) /
// d(logits) into dlogits (same shape as logits).
template <class T>
std::vector<T> cross_entropy(const SageConfig& config, const SampledBlocks& blocks,
                             const std::vector<T>& logits, const std::vector<std::int32_t>& labels,
                             std::vector<T>& dlogits);

// Accumulates d(sum of losses) / d(params) into grads (num_params entries; not zeroed here).
// With dinputs, also writes d(sum of losses) / d(inputs) there (|blocks.back().src_nodes| x
// in_dim, overwritten): the gradient of learnable input features. Rounding to bf16 in forward
// is treated as the identity (straight-through). aggregate_on: as forward's, for the mean's
// gradient.
template <class T>
void backward(const SageConfig& config, const std::vector<T>& params, const SampledBlocks& blocks,
              const Activations<T>& acts, const std::vector<T>& dlogits, std::vector<T>& grads,
              std::vector<T>* dinputs = nullptr, Device aggregate_on = {});

// Per seed: argmax of its logits (ties to the lowest class).
template <class T>
std::vector<std::int32_t> predictions(const SageConfig& config, const SampledBlocks& blocks,
                                      const std::vector<T>& logits);

// Runs collate's batch through forward, cross_entropy and backward in fp32: adds the batch's
// summed gradient to grads and returns the sum of its per-seed losses (in double, in seed
// order). The hidden rounding follows batch.compute.
double train_step_grads(const SageConfig& config, const std::vector<float>& params,
                        const Batch& batch, std::vector<float>& grads);

// ---- optimizer -----------------------------------------------------------------------------

// SGD with momentum (v = momentum v + g; p -= lr v) or Adam (beta1 0.9, beta2 0.999, eps 1e-8,
// bias-corrected), on fp32 master weights, element by element.
struct Optimizer {
  enum class Kind { kSgd, kAdam } kind = Kind::kSgd;
  float lr = 0.1f;
  float momentum = 0.9f;
  std::int64_t t = 0;
  std::vector<float> m, v;

  // Applies one update with the (already averaged) gradient. Throws std::invalid_argument when
  // sizes differ.
  void step(std::vector<float>& params, const std::vector<float>& grads);
};

// FNV-1a 64 over the parameters' bit patterns: the start-of-training checksum.
std::uint64_t param_checksum(const std::vector<float>& params);

}  // namespace lockstep::ref::train
