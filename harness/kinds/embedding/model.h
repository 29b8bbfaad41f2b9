#pragma once
// The "embedding" capability's model, shared by its two checks: capability.cpp replays the
// steps and judges the system's outputs; bad_ids.cpp
// judges rank 0's extra steps on ids outside the table.
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "harness/scenario/config.h"
#include "harness/sut/capability.h"
#include "harness/kinds/embedding/spec.h"
#include "reference/embedding/embedding.h"

namespace lockstep::sut::embedding {

using I64 = std::vector<std::int64_t>;
using F32 = std::vector<float>;

// What a system does with an id outside [0, N) in a pull and its step: reject it (the
// reference), read and update row 0 in its place (FBGEMM's BoundsCheckMode.WARNING), clamp it
// to [0, N - 1], or ignore it (zeros pulled, no update).
enum class BadIds { kReject, kRowZero, kClamp, kIgnore };
// In BadIds order; the one list of the `bad_ids` rules (read_choice takes it as it is).
constexpr std::initializer_list<const char*> kBadIdNames = {"reject", "row_zero", "clamp", "ignore"};
// past_end: N, N+1, N+7, 2N; negative: -1, -2, -N, -(N+1); mixed: valid ids beside bad ones,
// min(1, N-1), -1, N-1, N.
const std::vector<std::string> kBadIdGroups = {"past_end", "negative", "mixed"};

// How a system applies the updates. The reference's own semantics are the defaults.
struct Semantics {
  ref::DuplicateReduce reduce = ref::DuplicateReduce::kSum;
  bool adam_per_row = false;   // Adam's t counts the steps that touched the row
  bool stale = false;          // gradients never cleared: step t applies steps 0..t's (the defect)
  bool sqrt_state = false;     // Adagrad's stored state becomes sqrt(state) + eps (the defect)
  bool adam_dgl = false;       // DGL's Adam formula: bias-corrected m and v, eps added to sqrt(v_hat)
  bool divide_by_ws = false;   // every gradient row divided by float(world size) before the reduction
                               // (TorchRec: torchrec.distributed.comm_ops' GRADIENT_DIVISION, on by default)
  BadIds bad = BadIds::kReject;  // what the system does with ids outside [0, N)
  // Bags (from [workload], not the profile): how the system pools, as replayed.
  bool pool_mean = false;      // mean pooling (forward sum / k, backward g * (1 / k))
  bool weights = false;        // per-sample weights applied (forward w * r, backward g * w)
  // A weighted bag's mean (mean pooling with per-sample weights): divided by the sum of its
  // weights plus mean_eps (declared: [system.profile] mean_weights_eps), or by its length (the
  // defect that forgets the weights in the divisor).
  float mean_eps = 0.0f;
  bool mean_by_count = false;
  bool operator==(const Semantics&) const = default;
};

// The shared keys (EmbeddingSpec) with the one optimizer's kind, and the declared profile.
struct Options : workloads::EmbeddingSpec {
  Semantics declared;          // [system.profile]
  double tolerance_ulps = 0;   // per step
  bool rowwise = false;        // optimizer = "rowwise_adagrad": Adagrad with one state value per row
  std::vector<std::string> bad_groups;  // bad_id_groups, fed to rank 0 after the steps
};

// The whole trajectory under one semantics: per step, the table before the step (what a pull
// returns), and the table and optimizer state after it.
struct Trajectory {
  std::vector<F32> before, after, s1, s2;
};

// The optimizer state's columns per row: dim, or 1 for row-wise Adagrad.
std::int64_t state_cols(const Options& o);
// DGL's SparseAdam (dgl.distributed.optim) on one row (t 1-based), each tensor operation
// rounded to f32 in its order (the profile's adam_form = "dgl"); m and v point at the row's state.
void dgl_adam_update(const ref::OptimizerOptions& opt, std::int64_t t, std::int64_t dim, const float* g, float* w, float* m, float* v);
// One row's update under o's optimizer (t 1-based): s1 and s2 point at the row's state.
void update_row(const Options& o, std::int64_t t, const float* g, float* w, float* s1, float* s2);
// Whether got is within `ulps` units of 2^-23 * max(scale, 2^-6) of want; scale is |want|
// unless given (a pooled bag's: the pooling of its rows' magnitudes, which bounds how far a
// rounding in any of them moves the result).
bool close(float want, float got, double ulps, double scale = -1);
// How many of those units got is from want: 0 when bit-identical, infinity when either is not
// finite (and they differ).
double units(float want, float got, double scale = -1);
// The worst deviation each check saw (`worst`: check -> units per step), as metrics
// worst_ulps.<check> and a note that says which tolerance_ulps the run needs, beside the one
// declared (`declared`, 0 none).
void note_worst_deviation(const std::map<std::string, double>& worst, double declared, CheckResult& res);

// What rule `b` does with ids outside [0, N), in words ("clamped to [0, N - 1] (bad_ids = ...)").
std::string bad_rule(BadIds b);
// The profile `s` in words ("duplicate ids summed, gradients divided by the world size, ...").
std::string describe_semantics(const Semantics& s, const Options& o);

// One group of ids outside [0, N) that rank 0 pulls and steps after the last step, with their
// gradient rows (a pure function of the seed, the group and the position).
struct BadGroup {
  I64 ids;
  F32 grads;
};
// `step`: a group ("negative") or one of its ids alone ("negative.1": the id at position 1).
BadGroup bad_group(const Options& o, std::uint64_t seed, const std::string& step);
// Rank 0's extra steps for bad_id_groups, in order: each group, then each of its ids alone
// ("past_end", "past_end.0", ..., "negative", "negative.0", ...), so that a system that rejects a
// group for one id is still judged on what it does with every other id on its own.
std::vector<std::string> bad_steps(const Options& o);

// Judges rank 0's extra steps on ids outside [0, N) (bad_id_groups), after the steps matched:
// under the declared rule, a rejection (reject) or exactly the rule's pulls and updates; an
// undeclared acceptance that moved a row is result_mismatch naming the row and the rule whose
// replay explains it, one that moved nothing invariant_violation. Under a declared tolerance_ulps
// each group starts from the system's own table after the last step (it may differ from the
// reference's by rounding) and its pulls and update are judged within one step's tolerance.
// `tr` is the reference's trajectory under the declared profile.
void check_bad_ids(const Options& o, const scenario::Scenario& s, const SystemOutputs& out, const Trajectory& tr, CheckResult& res);

}  // namespace lockstep::sut::embedding
