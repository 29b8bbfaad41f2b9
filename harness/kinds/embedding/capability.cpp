// Capability "embedding" for systems under test: an N x D embedding table trained with a
// sparse optimizer. Each step every rank pulls the rows of its share of the global batch,
// backpropagates loss = sum(rows * grad_out) and steps the optimizer. The outputs (rows
// pulled, the whole table and optionally the optimizer state after every step) are checked
// against the reference's update rules (reference/embedding) under the semantics profile the
// scenario declares ([system.profile]); a declared difference from the reference's own
// semantics is a note, not a bug. A mismatch is result_mismatch, and the message names the
// known defect whose replay explains the outputs (stale gradients, mean instead of sum, the
// Adagrad state holding sqrt(state) + eps, Adam steps counted per row, gradients divided by
// the world size).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <iomanip>
#include <map>
#include <optional>
#include <sstream>

#include "harness/core/diagnosis.h"
#include "harness/scenario/config.h"
#include "harness/sut/capability.h"
#include "harness/sut/common.h"
#include "harness/kinds/embedding/model.h"
#include "harness/workloads/digest.h"
#include "harness/kinds/embedding/spec.h"
#include "reference/embedding/bag.h"
#include "reference/embedding/embedding.h"

namespace lockstep::sut {
namespace {

using namespace embedding;

std::string optimizer_name(const Options& o) { return o.rowwise ? "rowwise_adagrad" : ref::to_string(o.optimizer.kind); }

Options read_options(const scenario::Scenario& s) {
  const auto& c = s.workload_config;
  Options o;
  static_cast<workloads::EmbeddingSpec&>(o) = workloads::EmbeddingSpec::read(c);
  const std::string optimizer = scenario::read_choice(c, "optimizer", "adagrad", {"sgd", "adagrad", "rowwise_adagrad", "adam"});
  o.rowwise = optimizer == "rowwise_adagrad";
  o.optimizer.kind = ref::optimizer_from_string(o.rowwise ? "adagrad" : optimizer);
  o.bad_groups = c.get_string_list("bad_id_groups", {});
  for (const auto& g : o.bad_groups) {
    if (std::find(kBadIdGroups.begin(), kBadIdGroups.end(), g) == kBadIdGroups.end()) {
      c.fail("bad_id_groups", "unknown group \"" + g + "\"; allowed: past_end, negative, mixed");
    }
  }
  if (!o.bad_groups.empty() && o.optimizer.kind == ref::OptimizerKind::kAdam) {
    c.fail("bad_id_groups", "is checked with sgd and adagrad in this version, not adam");
  }
  if (!o.bad_groups.empty() && o.bags()) c.fail("bad_id_groups", "is checked with one id per sample in this version, not with bag_sizes");
  c.finish();
  const auto& p = s.system->profile;
  const std::string reduce = p.get_string("reduce", "sum");
  if (reduce != "sum" && reduce != "mean") p.fail("reduce", "unknown value \"" + reduce + "\"; allowed: sum, mean");
  o.declared.reduce = reduce == "mean" ? ref::DuplicateReduce::kMean : ref::DuplicateReduce::kSum;
  const std::string adam = p.get_string("adam_steps", "per_call");
  if (adam != "per_call" && adam != "per_row") p.fail("adam_steps", "unknown value \"" + adam + "\"; allowed: per_call, per_row");
  o.declared.adam_per_row = adam == "per_row";
  const std::string form = p.get_string("adam_form", "torch");
  if (form != "torch" && form != "dgl") p.fail("adam_form", "unknown value \"" + form + "\"; allowed: torch, dgl");
  o.declared.adam_dgl = form == "dgl";
  const std::string scaling = p.get_string("gradient_scaling", "none");
  if (scaling != "none" && scaling != "divide_by_world_size") {
    p.fail("gradient_scaling", "unknown value \"" + scaling + "\"; allowed: none, divide_by_world_size");
  }
  o.declared.divide_by_ws = scaling == "divide_by_world_size";
  const std::string bad = scenario::read_choice(p, "bad_ids", "reject", kBadIdNames);
  o.declared.bad = static_cast<BadIds>(std::find(kBadIdNames.begin(), kBadIdNames.end(), bad) - kBadIdNames.begin());
  o.tolerance_ulps = read_double(p, "tolerance_ulps", 0, 0, 1e6);
  o.declared.mean_eps = static_cast<float>(read_double(p, "mean_weights_eps", 0, 0, 1));
  if (p.has("mean_weights_eps") && !(o.bags() && o.per_sample_weights && o.pooling == ref::BagPooling::kMean)) {
    p.fail("mean_weights_eps", "applies to weighted means only (bag_sizes, pooling = \"mean\", per_sample_weights = true)");
  }
  p.finish();
  o.declared.pool_mean = o.bags() && o.pooling == ref::BagPooling::kMean;
  o.declared.weights = o.per_sample_weights;
  return o;
}

struct Batches {
  I64 ids;                // every step's global batch, concatenated
  F32 grads;              // without bags: ids.size() x dim; with bags: one output gradient per bag
  I64 step_begin;         // steps + 1: id positions
  // Bags only: bag q (global over the steps) holds ids [bag_offsets[q], bag_offsets[q + 1]).
  I64 bag_begin;          // steps + 1: bag indices
  I64 bag_offsets;        // bags + 1
  F32 weights;            // ids.size(), with per_sample_weights
};

// Step t's global batch: batch_sizes[t mod len] ids, or with bags that many bags, bag q of the
// step holding bag_sizes[q mod len] ids. Ids at step position p, gradients at step position
// (id, or bag) q and weights are those of reference/embedding (pure functions of the seed).
Batches make_batches(const Options& o, std::uint64_t seed) {
  Batches b;
  b.step_begin.push_back(0);
  b.bag_begin.push_back(0);
  b.bag_offsets.push_back(0);
  for (std::int64_t t = 0; t < o.steps; ++t) {
    const std::int64_t n = o.batch_sizes[static_cast<std::size_t>(t) % o.batch_sizes.size()];
    std::int64_t ids_in_step = n;
    if (o.bags()) {
      ids_in_step = 0;
      for (std::int64_t q = 0; q < n; ++q) {
        ids_in_step += o.bag_sizes[static_cast<std::size_t>(q) % o.bag_sizes.size()];
        b.bag_offsets.push_back(b.step_begin.back() + ids_in_step);
        for (std::int64_t c = 0; c < o.dim; ++c) b.grads.push_back(ref::embedding_batch_grad(seed, t, q, c));
      }
      b.bag_begin.push_back(b.bag_begin.back() + n);
    }
    for (std::int64_t p = 0; p < ids_in_step; ++p) {
      b.ids.push_back(ref::embedding_batch_id(seed, t, p, o.rows, o.hot_rows));
      if (!o.bags()) {
        for (std::int64_t c = 0; c < o.dim; ++c) b.grads.push_back(ref::embedding_batch_grad(seed, t, p, c));
      }
      if (o.per_sample_weights) b.weights.push_back(ref::embedding_bag_weight(seed, t, p));
    }
    b.step_begin.push_back(static_cast<std::int64_t>(b.ids.size()));
  }
  return b;
}

ref::BagPooling pooling_of(const Semantics& sem) { return sem.pool_mean ? ref::BagPooling::kMean : ref::BagPooling::kSum; }
ref::BagMean mean_of(const Semantics& sem) { return ref::BagMean{sem.mean_by_count, sem.mean_eps}; }

// Every id position's gradient row under `sem`: the batches' own rows without bags, else the
// bags' backward (reference/embedding/bag.h).
F32 id_grads(const Options& o, const Batches& b, const Semantics& sem) {
  if (!o.bags()) return b.grads;
  return ref::bag_backward(b.grads.data(), b.bag_offsets.data(), static_cast<std::int64_t>(b.bag_offsets.size()) - 1, o.dim, pooling_of(sem),
                           sem.weights ? b.weights.data() : nullptr, mean_of(sem));
}

// Each step's rank_split shares: of the ids, and with bags of the bags (the ids' shares are
// then the bags' bounds), [steps * (world_size + 1)].
struct Shares {
  I64 ids, bags;
};

Shares make_shares(const Options& o, const Batches& b, int ws) {
  Shares sh;
  for (std::int64_t t = 0; t < o.steps; ++t) {
    const auto ts = static_cast<std::size_t>(t);
    if (!o.bags()) {
      for (auto x : share_offsets(b.step_begin[ts + 1] - b.step_begin[ts], ws, b.step_begin[ts])) sh.ids.push_back(x);
      continue;
    }
    for (auto x : share_offsets(b.bag_begin[ts + 1] - b.bag_begin[ts], ws, b.bag_begin[ts])) {
      sh.bags.push_back(x);
      sh.ids.push_back(b.bag_offsets[static_cast<std::size_t>(x)]);
    }
  }
  return sh;
}

F32 initial_table(const Options& o, std::uint64_t seed) {
  F32 t(static_cast<std::size_t>(o.rows * o.dim));
  for (std::int64_t r = 0; r < o.rows; ++r) {
    for (std::int64_t c = 0; c < o.dim; ++c) t[static_cast<std::size_t>(r * o.dim + c)] = ref::embedding_init(seed, r, c, o.init_scale);
  }
  return t;
}

struct Observed {
  std::vector<std::vector<F32>> pulled;  // [step][rank]
  std::vector<F32> table;                // [step], rank 0
  std::vector<std::optional<F32>> s1, s2;  // [step], rank 0, when written
};

// The replay of every step under `sem` from `init`. With `follow` (the system's outputs), each
// step t > 0 starts from the system's own table after step t - 1, and its own optimizer state
// where it wrote one: one step replayed at a time, so that a check of step t judges what that
// step did, not the rounding the system's earlier steps carried in (the contract's one scale).
Trajectory simulate(const Options& o, const Batches& b, const F32& init, const Semantics& sem, int world_size,
                    const Observed* follow = nullptr) {
  Trajectory tr;
  const auto d = static_cast<std::size_t>(o.dim);
  F32 w = init;
  F32 s1(static_cast<std::size_t>(o.rows * state_cols(o)),
         o.optimizer.kind == ref::OptimizerKind::kAdagrad ? static_cast<float>(o.optimizer.initial_accumulator_value) : 0.f);
  F32 s2(w.size(), 0.f);
  I64 touched(static_cast<std::size_t>(o.rows), 0);
  const float eps = static_cast<float>(o.optimizer.resolved_eps());
  const F32 all_grads = id_grads(o, b, sem);
  for (std::int64_t t = 0; t < o.steps; ++t) {
    if (follow && t > 0) {
      const auto prev = static_cast<std::size_t>(t - 1);
      w = follow->table[prev];
      if (follow->s1[prev]) s1 = *follow->s1[prev];
      if (follow->s2[prev]) s2 = *follow->s2[prev];
    }
    tr.before.push_back(w);
    const std::int64_t lo = sem.stale ? 0 : b.step_begin[static_cast<std::size_t>(t)];
    const std::int64_t hi = b.step_begin[static_cast<std::size_t>(t) + 1];
    if (hi > lo) {  // stale: earlier steps' gradients are applied again even on an empty step
      const float* grads = all_grads.data() + lo * o.dim;
      F32 divided;
      if (sem.divide_by_ws) {
        // Each contribution divided on its own, as the system's backward does, then reduced.
        divided.assign(grads, grads + (hi - lo) * o.dim);
        for (float& g : divided) g = g / static_cast<float>(world_size);
        grads = divided.data();
      }
      const auto red = ref::reduce_duplicates(b.ids.data() + lo, grads, hi - lo, o.dim, sem.reduce);
      for (std::size_t i = 0; i < red.ids.size(); ++i) {
        const auto row = static_cast<std::size_t>(red.ids[i]);
        const std::int64_t steps_of_row = ++touched[row];
        const std::int64_t tt = sem.adam_per_row ? steps_of_row : t + 1;
        if (sem.adam_dgl && o.optimizer.kind == ref::OptimizerKind::kAdam) {
          dgl_adam_update(o.optimizer, tt, o.dim, red.grads.data() + i * d, w.data() + row * d, s1.data() + row * d, s2.data() + row * d);
        } else {
          update_row(o, tt, red.grads.data() + i * d, w.data() + row * d, s1.data() + row * static_cast<std::size_t>(state_cols(o)),
                     s2.data() + row * d);
        }
        if (sem.sqrt_state && o.optimizer.kind == ref::OptimizerKind::kAdagrad && !o.rowwise) {
          for (std::size_t c = 0; c < d; ++c) s1[row * d + c] = std::sqrt(s1[row * d + c]) + eps;
        }
      }
    }
    tr.after.push_back(w);
    tr.s1.push_back(s1);
    tr.s2.push_back(s2);
  }
  return tr;
}

std::string describe(float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, 4);
  std::ostringstream os;
  os << std::setprecision(9) << v << " (0x" << std::hex << std::setw(8) << std::setfill('0') << bits << ")";
  return os.str();
}

struct Mismatch {
  std::string what;  // "table", "pulled", "state_sum", ...
  std::int64_t step, row, col;
  int rank;
  float want, got;
};

// Bags [q0, q1) pooled from `table` under `sem`: (q1 - q0) x dim.
F32 pooled_bags(const Options& o, const Batches& b, const Semantics& sem, const F32& table, std::int64_t q0, std::int64_t q1) {
  const auto d = static_cast<std::size_t>(o.dim);
  const std::int64_t p0 = b.bag_offsets[static_cast<std::size_t>(q0)];
  I64 offsets;
  F32 rows;
  for (std::int64_t q = q0; q <= q1; ++q) offsets.push_back(b.bag_offsets[static_cast<std::size_t>(q)] - p0);
  for (std::int64_t p = p0; p < b.bag_offsets[static_cast<std::size_t>(q1)]; ++p) {
    const auto id = static_cast<std::size_t>(b.ids[static_cast<std::size_t>(p)]);
    rows.insert(rows.end(), table.begin() + static_cast<std::ptrdiff_t>(id * d), table.begin() + static_cast<std::ptrdiff_t>((id + 1) * d));
  }
  return ref::pool_bags(rows.data(), offsets.data(), q1 - q0, o.dim, pooling_of(sem), sem.weights ? b.weights.data() + p0 : nullptr,
                        mean_of(sem));
}

// The first output that differs from trajectory `tr` (replayed under `sem`) by more than
// `ulps` units: per step, the rows (or bags) each rank pulled, then the state, then the table.
// For a bag, `row` is its global bag index. Every check of step t on one scale: `ulps` units of 2^-23 * max(|value|, 2^-6) (a pooled bag:
// of its rows' magnitudes pooled) from `tr`, which replays each step from the system's own table
// and state before it (simulate's `follow`). With `worst`, also the largest deviation each check
// saw, in those units: the smallest tolerance_ulps under which it passes (up to the first
// mismatch, if any).
std::optional<Mismatch> first_mismatch(const Options& o, const Batches& b, const Shares& sh, int ws, const Observed& obs,
                                       const Trajectory& tr, const Semantics& sem, double ulps,
                                       std::map<std::string, double>* worst = nullptr) {
  const auto d = static_cast<std::size_t>(o.dim);
  for (std::int64_t t = 0; t < o.steps; ++t) {
    const double tol = ulps;
    // close(), noting the deviation under `what` when asked to.
    auto close = [&](const std::string& what, float want, float got, double scale = -1) {
      if (worst) {
        double& w = (*worst)[what];
        w = std::max(w, units(want, got, scale));
      }
      return embedding::close(want, got, tol, scale);
    };
    F32 magnitudes;  // bags: |table|, pooled for each bag's tolerance scale
    if (o.bags() && (tol > 0 || worst)) {
      magnitudes = tr.before[static_cast<std::size_t>(t)];
      for (float& v : magnitudes) v = std::fabs(v);
    }
    for (int r = 0; r < ws; ++r) {
      const auto& got = obs.pulled[static_cast<std::size_t>(t)][static_cast<std::size_t>(r)];
      if (o.bags()) {
        const auto q0 = sh.bags[static_cast<std::size_t>(t * (ws + 1) + r)], q1 = sh.bags[static_cast<std::size_t>(t * (ws + 1) + r + 1)];
        const F32 want = pooled_bags(o, b, sem, tr.before[static_cast<std::size_t>(t)], q0, q1);
        // The weights are positive, so pooling |r| gives sum |w r| (or its mean).
        const F32 scale = tol > 0 || worst ? pooled_bags(o, b, sem, magnitudes, q0, q1) : F32(want.size(), 0.f);
        for (std::size_t i = 0; i < got.size(); ++i) {
          if (!close("pooled", want[i], got[i], scale[i])) return Mismatch{"pooled", t, q0 + static_cast<std::int64_t>(i / d), static_cast<std::int64_t>(i % d), r, want[i], got[i]};
        }
        continue;
      }
      const auto lo = sh.ids[static_cast<std::size_t>(t * (ws + 1) + r)];
      for (std::size_t i = 0; i < got.size(); ++i) {
        const auto id = static_cast<std::size_t>(b.ids[static_cast<std::size_t>(lo) + i / d]);
        const float want = tr.before[static_cast<std::size_t>(t)][id * d + i % d];
        if (!close("pulled", want, got[i])) return Mismatch{"pulled", t, static_cast<std::int64_t>(id), static_cast<std::int64_t>(i % d), r, want, got[i]};
      }
    }
    auto cmp = [&](const char* what, const F32& want, const F32& got, std::size_t cols) -> std::optional<Mismatch> {
      for (std::size_t i = 0; i < want.size(); ++i) {
        if (!close(what, want[i], got[i])) return Mismatch{what, t, static_cast<std::int64_t>(i / cols), static_cast<std::int64_t>(i % cols), 0, want[i], got[i]};
      }
      return std::nullopt;
    };
    const bool adam = o.optimizer.kind == ref::OptimizerKind::kAdam;
    const char* s1_name = adam ? "state_m" : "state_sum";
    if (obs.s1[static_cast<std::size_t>(t)]) {
      if (auto m = cmp(s1_name, tr.s1[static_cast<std::size_t>(t)], *obs.s1[static_cast<std::size_t>(t)], static_cast<std::size_t>(state_cols(o)))) return m;
    }
    if (obs.s2[static_cast<std::size_t>(t)]) {
      if (auto m = cmp("state_v", tr.s2[static_cast<std::size_t>(t)], *obs.s2[static_cast<std::size_t>(t)], d)) return m;
    }
    if (auto m = cmp("table", tr.after[static_cast<std::size_t>(t)], obs.table[static_cast<std::size_t>(t)], d)) return m;
  }
  return std::nullopt;
}

void write_inputs(const scenario::Scenario& s, InputWriter& w) {
  const Options o = read_options(s);
  const Batches b = make_batches(o, s.seed);
  const Shares sh = make_shares(o, b, w.world_size());
  const I64& shares = sh.ids;
  const auto total = static_cast<std::int64_t>(b.ids.size());
  w.config("num_embeddings", o.rows);
  w.config("dim", o.dim);
  w.config("steps", o.steps);
  w.config("optimizer", {{"kind", optimizer_name(o)}, {"lr", o.optimizer.lr}, {"eps", o.optimizer.resolved_eps()},
                         {"beta1", o.optimizer.beta1}, {"beta2", o.optimizer.beta2},
                         {"initial_accumulator_value", o.optimizer.initial_accumulator_value}});
  w.config("profile", {{"reduce", ref::to_string(o.declared.reduce)}, {"adam_steps", o.declared.adam_per_row ? "per_row" : "per_call"},
                       {"adam_form", o.declared.adam_dgl ? "dgl" : "torch"},
                       {"gradient_scaling", o.declared.divide_by_ws ? "divide_by_world_size" : "none"},
                       {"bad_ids", kBadIdNames.begin()[static_cast<std::size_t>(o.declared.bad)]},
                       {"tolerance_ulps", o.tolerance_ulps}});
  w.array("init", initial_table(o, s.seed), {o.rows, o.dim}, "the table's initial values (float32)");
  if (o.int32_ids) {
    w.array("ids", std::vector<std::int32_t>(b.ids.begin(), b.ids.end()), {total}, "int32 ids of every step's global batch, concatenated (duplicates occur)");
  } else {
    w.array("ids", b.ids, {total}, "ids of every step's global batch, concatenated (duplicates occur)");
  }
  w.config("id_dtype", o.int32_ids ? "int32" : "int64");
  w.config("bad_id_groups", bad_steps(o));
  for (const auto& g : bad_steps(o)) {
    const BadGroup bg = bad_group(o, s.seed, g);
    const auto k = static_cast<std::int64_t>(bg.ids.size());
    if (o.int32_ids) {
      w.array("bad." + g + ".ids", std::vector<std::int32_t>(bg.ids.begin(), bg.ids.end()), {k}, "ids outside [0, N) for rank 0's extra step");
    } else {
      w.array("bad." + g + ".ids", bg.ids, {k}, "ids outside [0, N) for rank 0's extra step");
    }
    w.array("bad." + g + ".grads", bg.grads, {k, o.dim}, "their gradient rows");
  }
  w.array("step_offsets", b.step_begin, {o.steps + 1}, "step t's global batch is ids[step_offsets[t]:step_offsets[t+1]]");
  w.shares("ids", shares, o.steps);
  if (!o.bags()) {
    w.config("bags", nullptr);
    w.array("grads", b.grads, {total, o.dim}, "d loss / d row for each id of the batch: loss = sum(rows * grads)");
    w.shares("grads", shares, o.steps);
    return;
  }
  const auto bags = static_cast<std::int64_t>(b.bag_offsets.size()) - 1;
  w.config("bags", {{"pooling", ref::to_string(o.pooling)}, {"per_sample_weights", o.per_sample_weights}});
  w.array("grads", b.grads, {bags, o.dim}, "d loss / d pooled row for each bag: loss = sum(pooled * grads)");
  I64 lengths;
  for (std::int64_t q = 0; q < bags; ++q) lengths.push_back(b.bag_offsets[static_cast<std::size_t>(q) + 1] - b.bag_offsets[static_cast<std::size_t>(q)]);
  w.array("lengths", lengths, {bags}, "ids per bag (0: an empty bag), every step's bags concatenated; a bag's ids follow the previous bag's in ids");
  w.array("bag_step_offsets", b.bag_begin, {o.steps + 1}, "step t's bags are lengths[bag_step_offsets[t]:bag_step_offsets[t+1]]");
  w.shares("grads", sh.bags, o.steps);
  w.shares("lengths", sh.bags, o.steps);
  if (o.per_sample_weights) {
    w.array("weights", b.weights, {total}, "per-sample weight of each id (float32)");
    w.shares("weights", shares, o.steps);
  }
}

CheckResult check(const scenario::Scenario& s, const SystemOutputs& out) {
  const Options o = read_options(s);
  const int ws = out.world_size();
  const Batches b = make_batches(o, s.seed);
  const F32 init = initial_table(o, s.seed);
  const Shares sh = make_shares(o, b, ws);
  const I64& shares = o.bags() ? sh.bags : sh.ids;  // what a rank's pulled (or pooled) rows are of
  // Read every output, checking shapes.
  Observed obs;
  const bool adam = o.optimizer.kind == ref::OptimizerKind::kAdam;
  const bool adagrad = o.optimizer.kind == ref::OptimizerKind::kAdagrad;
  auto read = [&](int r, const std::string& name, std::int64_t rows) {
    std::vector<std::int64_t> shape;
    F32 v = out.floats(r, name, Declared::kFloat32, &shape);
    const bool ok = (rows == 0 && v.empty()) || (shape.size() == 2 && shape[0] == rows && shape[1] == o.dim);
    if (!ok) contract_violation(r, name, "expected float32 [" + std::to_string(rows) + ", " + std::to_string(o.dim) + "]");
    return v;
  };
  for (std::int64_t t = 0; t < o.steps; ++t) {
    const std::string step = ".step" + std::to_string(t);
    obs.pulled.emplace_back();
    const std::string pulled = o.bags() ? "pooled" : "pulled";
    for (int r = 0; r < ws; ++r) {
      const auto n = shares[static_cast<std::size_t>(t * (ws + 1) + r + 1)] - shares[static_cast<std::size_t>(t * (ws + 1) + r)];
      if (auto why = out.rejected(r, pulled + step)) {
        throw DiagnosisError(Diagnosis{DiagnosisKind::kRankFailure, "rank " + std::to_string(r) + ": step " + std::to_string(t) + ": pull raised " + *why, r, -1});
      }
      obs.pulled.back().push_back(n == 0 && !out.has(r, pulled + step) ? F32{} : read(r, pulled + step, n));
    }
    obs.table.push_back(read(0, "table" + step, o.rows));
    const std::string s1 = adam ? "state_m" : "state_sum";
    std::optional<F32> state;
    if ((adam || adagrad) && out.has(0, s1 + step)) {
      if (o.rowwise) {  // one value per row
        std::vector<std::int64_t> shape;
        state = out.floats(0, s1 + step, Declared::kFloat32, &shape);
        if (shape.size() != 1 || shape[0] != o.rows) contract_violation(0, s1 + step, "expected float32 [" + std::to_string(o.rows) + "] (row-wise Adagrad: one value per row)");
      } else {
        state = read(0, s1 + step, o.rows);
      }
    }
    obs.s1.push_back(std::move(state));
    obs.s2.push_back(adam && out.has(0, "state_v" + step) ? std::optional<F32>(read(0, "state_v" + step, o.rows)) : std::nullopt);
  }

  CheckResult res;
  Semantics reference{};
  reference.pool_mean = o.declared.pool_mean;  // the bags' pooling is the workload's, not a declaration
  reference.weights = o.declared.weights;
  if (!(o.declared == reference)) {
    res.notes.push_back("declared semantics differ from the reference (declared, not a bug): " + describe_semantics(o.declared, o) +
                        "; the reference: " + describe_semantics(reference, o));
  }
  if (o.tolerance_ulps > 0) {
    res.notes.push_back("declared tolerance: " + scenario::format_double(o.tolerance_ulps) +
                        " units of 2^-23 * max(|value|, 2^-6) per step, each step replayed from the system's own table and state before it");
  }
  const Trajectory expected = simulate(o, b, init, o.declared, ws, &obs);
  std::map<std::string, double> worst;  // per check, units
  if (auto m = first_mismatch(o, b, sh, ws, obs, expected, o.declared, o.tolerance_ulps, &worst)) {
    std::ostringstream os;
    os << "embedding (" << optimizer_name(o) << ", " << describe_semantics(o.declared, o) << "): step " << m->step << ", ";
    if (m->what == "pooled") {
      const auto q = static_cast<std::size_t>(m->row);
      const auto p0 = b.bag_offsets[q], p1 = b.bag_offsets[q + 1];
      std::string ids;
      for (auto p = p0; p < p1; ++p) ids += (ids.empty() ? "" : ", ") + std::to_string(b.ids[static_cast<std::size_t>(p)]);
      os << "bag " << m->row << " pooled by rank " << m->rank << " (ids [" << ids << "]" << (p0 == p1 ? ": an empty bag" : "") << ")";
    } else {
      os << (m->what == "pulled" ? "rows pulled by rank " + std::to_string(m->rank) : m->what + " after the update") << ", row " << m->row;
    }
    os << ", column " << m->col << ": expected " << describe(m->want) << ", got " << describe(m->got);
    const bool empty_nan = m->what == "pooled" &&
                           b.bag_offsets[static_cast<std::size_t>(m->row)] == b.bag_offsets[static_cast<std::size_t>(m->row) + 1] &&
                           std::isnan(m->got);
    if (empty_nan) {
      os << "; an empty bag pools to zeros (torch.nn.EmbeddingBag's mean of no rows is 0), not NaN: the system divides by an empty bag's size (0 / 0)";
    }
    // Which known defect, replayed, explains every output up to here?
    struct Candidate {
      Semantics sem;
      std::string why;
    };
    std::vector<Candidate> candidates;
    Semantics alt = o.declared;
    alt.stale = true;
    candidates.push_back({alt, "stale gradients: the outputs match when every step applies the gradients of all earlier steps again "
                               "(gradients not cleared between steps, e.g. zero_grad() missing)"});
    if (adagrad) {
      alt = o.declared;
      alt.sqrt_state = true;
      candidates.push_back({alt, "the Adagrad state holds sqrt(state) + eps after each step instead of the sum of squared gradients "
                                 "(an in-place sqrt_ on a state tensor that .to() did not copy)"});
    }
    alt = o.declared;
    alt.reduce = alt.reduce == ref::DuplicateReduce::kSum ? ref::DuplicateReduce::kMean : ref::DuplicateReduce::kSum;
    candidates.push_back({alt, std::string(alt.reduce == ref::DuplicateReduce::kMean ? "mean instead of sum" : "sum instead of mean") +
                                   ": duplicate ids' gradients are " + (alt.reduce == ref::DuplicateReduce::kMean ? "averaged" : "summed") +
                                   " (if that is the system's documented semantics, declare reduce = \"" + ref::to_string(alt.reduce) +
                                   "\" in [system.profile])"});
    alt = o.declared;
    alt.divide_by_ws = !alt.divide_by_ws;
    candidates.push_back({alt, std::string(alt.divide_by_ws ? "gradients divided by the world size (" + std::to_string(ws) +
                                                                   "), as TorchRec's sharded modules do by default (GRADIENT_DIVISION)"
                                                             : "gradients not divided by the world size") +
                                   " (if that is the system's documented semantics, declare gradient_scaling = \"" +
                                   (alt.divide_by_ws ? "divide_by_world_size" : "none") + "\" in [system.profile])"});
    if (o.bags() && !o.per_sample_weights) {
      alt = o.declared;
      alt.pool_mean = !alt.pool_mean;
      candidates.push_back({alt, std::string(alt.pool_mean ? "bags averaged instead of summed" : "bags summed instead of averaged") +
                                     ": the outputs match " + (alt.pool_mean ? "mean" : "sum") + " pooling (forward and backward), where the scenario asks for pooling = \"" +
                                     (alt.pool_mean ? "sum" : "mean") + "\""});
    }
    if (o.per_sample_weights && o.pooling == ref::BagPooling::kMean) {
      alt = o.declared;
      alt.mean_by_count = true;
      candidates.push_back({alt, "weighted bags averaged over their length: the outputs match each bag's weighted sum divided by how many ids it holds, "
                                 "not by the sum of its weights"});
      alt = o.declared;
      alt.mean_eps = 1e-6f;
      if (!(alt == o.declared)) {
        candidates.push_back({alt, "weighted bags averaged over the sum of their weights plus 1e-6 (if documented, declare mean_weights_eps = 1e-6 in "
                                   "[system.profile])"});
      }
    }
    if (o.per_sample_weights) {
      alt = o.declared;
      alt.weights = false;
      candidates.push_back({alt, "per-sample weights ignored: the outputs match the bags pooled (and their gradients spread) with every weight 1"});
    }
    if (adam) {
      alt = o.declared;
      alt.adam_per_row = !alt.adam_per_row;
      candidates.push_back({alt, std::string("Adam's step count is kept ") + (alt.adam_per_row ? "per row" : "per step() call") +
                                     " (if documented, declare adam_steps = \"" + (alt.adam_per_row ? "per_row" : "per_call") + "\")"});
    }
    if (adam) {
      alt = o.declared;
      alt.adam_dgl = !alt.adam_dgl;
      candidates.push_back({alt, std::string("the system uses ") + (alt.adam_dgl ? "DGL's Adam formula (bias-corrected m and v, eps added to sqrt(v_hat))" : "torch.optim.SparseAdam's formula") +
                                     " (if documented, declare adam_form = \"" + (alt.adam_dgl ? "dgl" : "torch") + "\")"});
    }
    // Replays compound their own rounding differences, so they are judged a little more
    // loosely; a replay explains the outputs only where the declared semantics, judged as
    // loosely, do not.
    const double loose = std::max(2 * o.tolerance_ulps, 8.0);
    const auto m_loose = first_mismatch(o, b, sh, ws, obs, expected, o.declared, loose);
    bool explained = empty_nan;  // named above
    if (!m_loose && !explained) {
      os << "; within " << scenario::format_double(loose)
         << " units per step of the declared semantics: a rounding difference (another operation order; declare tolerance_ulps if it is expected)";
      explained = true;
    }
    for (const auto& c : candidates) {
      if (explained) break;
      const Trajectory tr = simulate(o, b, init, c.sem, ws, &obs);
      const auto m2 = first_mismatch(o, b, sh, ws, obs, tr, c.sem, loose);
      if (!m2 || m2->step > m_loose->step) {
        os << "; explained by " << c.why;
        explained = true;
        break;
      }
    }
    if (!explained) os << "; no known defect explains it";
    throw DiagnosisError(Diagnosis{DiagnosisKind::kResultMismatch, os.str(), m->rank, -1});
  }
  note_worst_deviation(worst, o.tolerance_ulps, res);
  if (!o.bad_groups.empty()) check_bad_ids(o, s, out, expected, res);
  I64 stream;
  for (const auto& t : obs.table) {
    for (float v : t) {
      std::uint32_t bits;
      std::memcpy(&bits, &v, 4);
      stream.push_back(bits);
    }
  }
  res.digest = workloads::digest_hex(stream);
  return res;
}

void write_expected(const scenario::Scenario& s, InputWriter& w) {
  const Options o = read_options(s);
  const Batches b = make_batches(o, s.seed);
  const Trajectory tr = simulate(o, b, initial_table(o, s.seed), o.declared, w.world_size());
  w.config("profile", describe_semantics(o.declared, o));
  for (std::int64_t t = 0; t < o.steps; ++t) {
    const auto ts = static_cast<std::size_t>(t);
    w.array("table.step" + std::to_string(t), tr.after[ts], {o.rows, o.dim}, "the table after step t under the declared profile");
    if (o.optimizer.kind != ref::OptimizerKind::kSgd) {
      w.array(std::string(o.optimizer.kind == ref::OptimizerKind::kAdam ? "state_m" : "state_sum") + ".step" + std::to_string(t), tr.s1[ts],
              o.rowwise ? std::vector<std::int64_t>{o.rows} : std::vector<std::int64_t>{o.rows, o.dim}, "the optimizer state after step t");
    }
    if (o.optimizer.kind == ref::OptimizerKind::kAdam) {
      w.array("state_v.step" + std::to_string(t), tr.s2[ts], {o.rows, o.dim}, "Adam's second moment after step t");
    }
  }
}

}  // namespace

Capability embedding_capability() {
  return {"embedding", "an embedding table with a sparse optimizer, checked against the reference's update rules under a declared profile",
          [](const auto& s) { read_options(s); }, write_inputs, check, write_expected};
}

}  // namespace lockstep::sut
