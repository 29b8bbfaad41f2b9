// Capability "training" for systems under test: data-parallel GraphSAGE steps. lockstep hands
// every rank the blocks the reference sampler drew for its share of each global batch, their
// fp32 input rows, the labels and the initial parameters (reference/train/sage.h defines the
// model, the layout and the precision modes exactly); the system runs forward, softmax
// cross-entropy, backward, a gradient all-reduce divided by the global batch size and the
// optimizer step. Its per-step loss and every rank's final parameters are checked against the
// reference's own training on the same batches, within a relative tolerance (another
// summation order), and every rank's parameters must be identical (replicas never diverge).
#include <cmath>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "harness/core/diagnosis.h"
#include "harness/scenario/config.h"
#include "harness/sut/capability.h"
#include "harness/sut/common.h"
#include "harness/workloads/digest.h"
#include "harness/workloads/graph_spec.h"
#include "harness/kinds/training/spec.h"
#include "reference/sampling/neighbor.h"
#include "reference/train/sage.h"

namespace lockstep::sut {
namespace {

using I64 = std::vector<std::int64_t>;
namespace tr = ref::train;

// The shared keys (TrainingSpec) and the declared tolerances.
struct Options : workloads::TrainingSpec {
  double curve_rtol = 0, params_rtol = 0;  // [system.profile]
};

Options read_options(const scenario::Scenario& s) {
  const auto& c = s.workload_config;
  Options o;
  static_cast<workloads::TrainingSpec&>(o) = workloads::TrainingSpec::read(c, s.seed);
  c.finish();
  // The system all-reduces its gradients itself: the reference cannot replay a bf16 wire.
  if (o.precision == tr::Precision::kBF16Reduce) {
    c.fail("precision", "a system under test trains in \"fp32\" or \"bf16\" (its gradient all-reduce is its own), not \"bf16_reduce\"");
  }
  const auto& p = s.system->profile;
  const bool bf16 = o.precision != tr::Precision::kF32;
  o.curve_rtol = read_double(p, "curve_rtol", bf16 ? 2e-3 : 1e-5, 0, 1);
  o.params_rtol = read_double(p, "params_rtol", bf16 ? 2e-3 : 1e-5, 0, 1);
  p.finish();
  return o;
}

// One rank's batch of one step: the reference sampler's blocks, the fp32 input rows, labels.
struct RankBatch {
  ref::SampledBlocks blocks;
  std::vector<float> rows;
  std::vector<std::int32_t> labels;
};

struct Plan {
  std::vector<std::vector<RankBatch>> batches;  // [step][rank]
  I64 global_sizes;                              // per step
  std::vector<float> params;                     // initial
};

Plan plan(const scenario::Scenario& s, const Options& o, int ws) {
  const ref::CsrGraph graph = workloads::build_graph(o.graph);
  const ref::CsrGraph rows = ref::sampling_graph(graph, /*in_edges=*/true);
  const auto labels = tr::node_labels(rows, s.seed, o.model.in_dim, static_cast<int>(o.model.num_classes));
  I64 train, eval;
  tr::train_eval_split(graph.num_nodes, s.seed, std::min(o.num_train, graph.num_nodes), 0, train, eval);
  ref::SampleOptions so;
  so.fanouts = o.fanouts;
  so.num_threads = 1;
  Plan p;
  for (std::int64_t t = 0; t < o.steps; ++t) {
    I64 global;
    for (std::int64_t i = 0; i < o.batch_size; ++i) global.push_back(train[static_cast<std::size_t>((t * o.batch_size + i) % static_cast<std::int64_t>(train.size()))]);
    p.global_sizes.push_back(static_cast<std::int64_t>(global.size()));
    const I64 offs = share_offsets(static_cast<std::int64_t>(global.size()), ws);
    p.batches.emplace_back();
    for (int r = 0; r < ws; ++r) {
      RankBatch b;
      const I64 seeds(global.begin() + offs[static_cast<std::size_t>(r)], global.begin() + offs[static_cast<std::size_t>(r) + 1]);
      b.blocks = ref::sample_neighbors(rows, seeds, so, ref::SampleKey{s.seed, 0, t, 0});
      tr::node_features(s.seed, o.model.in_dim, b.blocks.blocks.back().src_nodes, b.rows);
      for (auto v : seeds) b.labels.push_back(labels[static_cast<std::size_t>(v)]);
      p.batches.back().push_back(std::move(b));
    }
  }
  p.params = tr::init_params(o.model, s.seed);
  return p;
}

std::string prefix(std::int64_t t, int r) { return "step" + std::to_string(t) + ".rank" + std::to_string(r) + "."; }

void write_inputs(const scenario::Scenario& s, InputWriter& w) {
  const Options o = read_options(s);
  const Plan p = plan(s, o, w.world_size());
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : tr::layer_shapes(o.model)) {
    layers.push_back({{"in", l.in}, {"out", l.out}, {"w_self", l.w_self}, {"w_neigh", l.w_neigh}, {"bias", l.bias}});
  }
  w.config("layers", layers);
  w.config("num_classes", o.model.num_classes);
  w.config("feature_dim", o.model.in_dim);
  w.config("activation", o.model.activation == tr::SageConfig::Activation::kSilu ? "silu" : "relu");
  w.config("precision", tr::to_string(o.precision));
  w.config("optimizer", {{"kind", o.optimizer == tr::Optimizer::Kind::kSgd ? "sgd" : "adam"}, {"lr", o.lr}, {"momentum", o.momentum},
                         {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}});
  w.config("steps", o.steps);
  w.config("global_batch_sizes", p.global_sizes);
  w.config("num_hops", o.model.num_layers);
  w.array("params", p.params, {static_cast<std::int64_t>(p.params.size())}, "initial parameters, flat: per layer w_self [in][out], w_neigh [in][out], bias [out]");
  for (std::int64_t t = 0; t < o.steps; ++t) {
    for (int r = 0; r < w.world_size(); ++r) {
      const RankBatch& b = p.batches[static_cast<std::size_t>(t)][static_cast<std::size_t>(r)];
      const std::string pre = prefix(t, r);
      auto n = [](const I64& v) { return std::vector<std::int64_t>{static_cast<std::int64_t>(v.size())}; };
      w.array(pre + "seeds", b.blocks.seeds, n(b.blocks.seeds), "this rank's seeds of the step");
      w.array(pre + "seed_to_output", b.blocks.seed_to_output, n(b.blocks.seed_to_output), "per seed: its row among hop 0's dst nodes");
      I64 labels(b.labels.begin(), b.labels.end());
      w.array(pre + "labels", labels, n(labels), "per seed: its class");
      for (std::size_t h = 0; h < b.blocks.blocks.size(); ++h) {
        const auto& blk = b.blocks.blocks[h];
        const std::string hp = pre + "hop" + std::to_string(h) + ".";
        w.array(hp + "src_nodes", blk.src_nodes, n(blk.src_nodes), "global ids of the block's src nodes (dst nodes first)");
        w.array(hp + "dst_nodes", blk.dst_nodes, n(blk.dst_nodes), "global ids of the block's dst nodes");
        w.array(hp + "edge_src", blk.edge_src, n(blk.edge_src), "per edge: index into src_nodes");
        w.array(hp + "edge_dst", blk.edge_dst, n(blk.edge_dst), "per edge: index into dst_nodes");
      }
      const auto rows = static_cast<std::int64_t>(b.blocks.blocks.back().src_nodes.size());
      w.array(pre + "inputs", b.rows, {rows, o.model.in_dim}, "fp32 input features of the deepest block's src nodes");
    }
  }
}

// The reference's training on the same batches: the loss curve and the final parameters.
void reference_run(const Options& o, const Plan& p, std::vector<double>& curve, std::vector<float>& params) {
  params = p.params;
  tr::Optimizer opt;
  opt.kind = o.optimizer;
  opt.lr = static_cast<float>(o.lr);
  opt.momentum = static_cast<float>(o.momentum);
  for (std::size_t t = 0; t < p.batches.size(); ++t) {
    std::vector<float> grads(params.size(), 0.0f);
    double loss = 0;
    for (const auto& rb : p.batches[t]) {
      if (rb.blocks.seeds.empty()) continue;
      const tr::Batch batch = tr::collate(rb.blocks, rb.rows, o.model.in_dim, rb.labels, o.precision);
      loss += tr::train_step_grads(o.model, params, batch, grads);
    }
    const auto global = static_cast<float>(p.global_sizes[t]);
    for (auto& g : grads) g /= global;
    opt.step(params, grads);
    curve.push_back(loss / static_cast<double>(global));
  }
}

CheckResult check(const scenario::Scenario& s, const SystemOutputs& out) {
  const Options o = read_options(s);
  const int ws = out.world_size();
  const Plan p = plan(s, o, ws);
  std::vector<double> want_curve;
  std::vector<float> want_params;
  reference_run(o, p, want_curve, want_params);

  std::vector<std::int64_t> shape;
  // Every rank's parameters first: replicas that diverged explain everything after. The
  // largest group of identical replicas is taken as right; a rank outside it is blamed.
  std::vector<std::vector<float>> replicas;
  for (int r = 0; r < ws; ++r) {
    replicas.push_back(out.floats(r, "params.final", Declared::kFloat32, &shape));
    if (shape.size() != 1 || shape[0] != static_cast<std::int64_t>(want_params.size())) {
      contract_violation(r, "params.final", "expected [" + std::to_string(want_params.size()) + "] (flat parameters, reference/train/sage.h layout)");
    }
  }
  auto same = [&](int a, int b) {
    return std::memcmp(replicas[static_cast<std::size_t>(a)].data(), replicas[static_cast<std::size_t>(b)].data(), want_params.size() * sizeof(float)) == 0;
  };
  int major = 0, major_size = 0;
  for (int r = 0; r < ws; ++r) {
    int n = 0;
    for (int q = 0; q < ws; ++q) n += same(r, q);
    if (n > major_size) major = r, major_size = n;
  }
  for (int r = 0; r < ws; ++r) {
    if (same(r, major)) continue;
    const auto& got = replicas[static_cast<std::size_t>(r)];
    const auto& ref_rank = replicas[static_cast<std::size_t>(major)];
    std::size_t i = 0;
    while (i < got.size() && std::memcmp(&got[i], &ref_rank[i], sizeof(float)) == 0) ++i;
    const bool majority = 2 * major_size > ws;
    std::ostringstream os;
    os << std::setprecision(9) << "rank " << r << "'s final parameters differ from rank " << major << "'s (the data-parallel replicas diverged"
       << (majority ? "" : "; no majority agrees") << "): parameter " << i << " is " << got[i] << " vs " << ref_rank[i];
    throw DiagnosisError(Diagnosis{DiagnosisKind::kResultMismatch, os.str(), majority ? r : -1, -1});
  }
  const std::vector<float>& first = replicas[static_cast<std::size_t>(major)];
  const std::vector<float> loss32 = out.floats(0, "loss", Declared::kAnyFloat, &shape);
  if (shape.size() != 1 || shape[0] != o.steps) contract_violation(0, "loss", "expected [" + std::to_string(o.steps) + "] (the mean loss of every step)");
  for (std::int64_t t = 0; t < o.steps; ++t) {
    const double got = loss32[static_cast<std::size_t>(t)], want = want_curve[static_cast<std::size_t>(t)];
    const double diff = std::fabs(got - want), scale = std::max(std::fabs(got), std::fabs(want));
    if (!(diff <= o.curve_rtol * scale)) {
      std::ostringstream os;
      os << std::setprecision(9) << "training (" << tr::to_string(o.precision) << "): the loss of step " << t << " is " << got
         << ", the reference's " << want << " (relative difference " << std::setprecision(3) << (scale > 0 ? diff / scale : diff) << " > curve_rtol "
         << o.curve_rtol << ")";
      throw DiagnosisError(Diagnosis{DiagnosisKind::kResultMismatch, os.str(), 0, -1});
    }
  }
  double num = 0, den = 0;
  for (std::size_t i = 0; i < first.size(); ++i) {
    num += (static_cast<double>(first[i]) - want_params[i]) * (static_cast<double>(first[i]) - want_params[i]);
    den += static_cast<double>(want_params[i]) * want_params[i];
  }
  const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  if (!(rel <= o.params_rtol)) {
    std::ostringstream os;
    os << "training (" << tr::to_string(o.precision) << "): the final parameters differ from the reference's by " << std::setprecision(3) << rel
       << " (relative L2) > params_rtol " << o.params_rtol;
    throw DiagnosisError(Diagnosis{DiagnosisKind::kResultMismatch, os.str(), 0, -1});
  }
  CheckResult res;
  double worst = 0;
  for (std::int64_t t = 0; t < o.steps; ++t) {
    const double got = loss32[static_cast<std::size_t>(t)], want = want_curve[static_cast<std::size_t>(t)];
    const double scale = std::max(std::fabs(got), std::fabs(want));
    if (scale > 0) worst = std::max(worst, std::fabs(got - want) / scale);
  }
  res.metrics["loss_curve_max_rel_diff"] = worst;
  res.metrics["params_rel_diff"] = rel;
  res.metrics["final_loss"] = loss32.back();
  res.metrics["reference_final_loss"] = want_curve.back();
  res.notes.push_back("loss curve within " + scenario::format_double(o.curve_rtol) + " of the reference's (worst " +
                      scenario::format_double(worst) + "); final parameters within " +
                      scenario::format_double(o.params_rtol) + " (relative L2)");
  // Digest: the loss curve rounded to 4 significant digits, so that compare sees a real change
  // but not a summation-order difference.
  I64 stream;
  for (float x : loss32) {
    const double v = x;
    if (!std::isfinite(v) || v == 0) {
      stream.push_back(std::isnan(v) ? 1 : v == 0 ? 0 : (v > 0 ? 2 : 3));
      continue;
    }
    const int e = static_cast<int>(std::floor(std::log10(std::fabs(v)))) - 3;
    stream.push_back(e);
    stream.push_back(std::llround(v / std::pow(10.0, e)));
  }
  res.digest = workloads::digest_hex(stream);
  return res;
}

void write_expected(const scenario::Scenario& s, InputWriter& w) {
  const Options o = read_options(s);
  const Plan p = plan(s, o, w.world_size());
  std::vector<double> curve;
  std::vector<float> params;
  reference_run(o, p, curve, params);
  w.array("loss", curve, {static_cast<std::int64_t>(curve.size())}, "the reference's mean loss of every step");
  w.array("params.final", params, {static_cast<std::int64_t>(params.size())}, "the reference's parameters after the last step");
}

}  // namespace

Capability training_capability() {
  return {"training", "data-parallel GraphSAGE steps on the reference's blocks: loss curve and final parameters against the reference",
          [](const auto& s) { read_options(s); }, write_inputs, check, write_expected};
}

}  // namespace lockstep::sut
