#pragma once
// DistEmbedding's optimizer rules and storage rounding (the distribution is in embedding.h,
// the shard that applies these rules in shard.h).
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
#include <cstdint>
#include <string>
#include <vector>

#include "reference/embedding/embedding_one.h"

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

// Step t's constants of `opt` (t >= 1), rounded to f32 as the order above says.
UpdateRule update_rule(const OptimizerOptions& opt, std::int64_t t);

// Applies one optimizer update to a row of `dim` f32 values, in place: w (the stored row
// widened to f32), s1 (Adagrad: sum; Adam: m), s2 (Adam: v); t is the step count (>= 1).
void apply_update(const OptimizerOptions& opt, std::int64_t t, std::int64_t dim, const float* g, float* w, float* s1,
                  float* s2);

// Row-wise Adagrad (FBGEMM's and TorchRec's default sparse optimizer,
// EmbOptimType.EXACT_ROWWISE_ADAGRAD): one f32 state value per row, the running sum of the
// mean of g^2 over the row. In f32, each operation rounded once, in this order:
//   q <- ((0 + g_0 * g_0) + g_1 * g_1) + ... + g_{dim-1} * g_{dim-1};  q <- q / float(dim)
//   s <- s + q;   m <- lr / (sqrt(s) + eps);   w_c <- w_c - m * g_c
// (lr and eps rounded to f32 once). A host rule for checking systems: DistEmbedding's shard and
// its kernels do not apply it.
void apply_rowwise_adagrad(float lr, float eps, std::int64_t dim, const float* g, float* w, float* state);

}  // namespace lockstep::ref
