// The embedding capability's model (embedding_model.h): an update of one row, the profile in
// words, and the tolerance: how far an output may be from the replayed reference, in units of
// 2^-23 * max(scale, 2^-6) (scale: the value's own magnitude, or a pooled bag's pooling of its
// rows' magnitudes), and the worst deviation a run saw per check, which a user chooses
// tolerance_ulps from.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "harness/scenario/config.h"
#include "harness/sut/capability.h"
#include "harness/kinds/embedding/model.h"
#include "reference/embedding/embedding.h"

namespace lockstep::sut::embedding {

std::int64_t state_cols(const Options& o) { return o.rowwise ? 1 : o.dim; }

// DGL's SparseAdam (dgl.distributed.optim), each tensor operation rounded to f32 in its order:
//   m <- b1*m + (1-b1)*g;  v <- b2*v + (1-b2)*(g*g);  bc = 1 - pow(b, t) in f32;
//   w <- w - (lr * (m / bc1)) / (sqrt(v / bc2) + eps)
void dgl_adam_update(const ref::OptimizerOptions& opt, std::int64_t t, std::int64_t dim, const float* g, float* w, float* m, float* v) {
  const float b1 = static_cast<float>(opt.beta1), b2 = static_cast<float>(opt.beta2);
  const float c1 = static_cast<float>(1.0 - opt.beta1), c2 = static_cast<float>(1.0 - opt.beta2);
  const float lr = static_cast<float>(opt.lr), eps = static_cast<float>(opt.resolved_eps());
  const float bc1 = 1.0f - std::pow(b1, static_cast<float>(t)), bc2 = 1.0f - std::pow(b2, static_cast<float>(t));
  for (std::int64_t c = 0; c < dim; ++c) {
    const float bm = b1 * m[c], cg = c1 * g[c];
    m[c] = bm + cg;
    const float gg = g[c] * g[c];
    const float bv = b2 * v[c], cv = c2 * gg;
    v[c] = bv + cv;
    const float mc = m[c] / bc1, vc = v[c] / bc2;
    const float num = lr * mc, den = std::sqrt(vc) + eps;
    const float step = num / den;
    w[c] = w[c] - step;
  }
}

void update_row(const Options& o, std::int64_t t, const float* g, float* w, float* s1, float* s2) {
  if (o.rowwise) {
    ref::apply_rowwise_adagrad(static_cast<float>(o.optimizer.lr), static_cast<float>(o.optimizer.resolved_eps()), o.dim, g, w, s1);
  } else {
    ref::apply_update(o.optimizer, t, o.dim, g, w, s1, s2);
  }
}

std::string describe_semantics(const Semantics& s, const Options& o) {
  std::vector<std::string> parts;
  parts.push_back(std::string("duplicate ids ") + (s.reduce == ref::DuplicateReduce::kMean ? "averaged (mean)" : "summed"));
  parts.push_back(s.divide_by_ws ? "gradients divided by the world size" : "gradients not scaled across ranks");
  if (!o.bad_groups.empty() || s.bad != BadIds::kReject) parts.push_back("ids outside the table " + bad_rule(s.bad));
  if (o.bags()) parts.push_back(std::string("bags ") + (s.pool_mean ? "mean" : "sum") + "-pooled" + (s.weights ? " with per-sample weights" : ""));
  if (o.bags() && s.pool_mean && s.weights) {
    std::ostringstream eps;
    eps << s.mean_eps;
    parts.push_back(s.mean_by_count ? "weighted means divided by the bag's length"
                                    : std::string("weighted means divided by the sum of the weights") + (s.mean_eps > 0 ? " plus " + eps.str() : ""));
  }
  if (o.optimizer.kind == ref::OptimizerKind::kAdam) {
    parts.push_back(s.adam_per_row ? "Adam steps counted per row" : "Adam steps counted per step() call");
    parts.push_back(s.adam_dgl ? "DGL's Adam formula (bias-corrected m and v, eps added to sqrt(v_hat))" : "torch.optim.SparseAdam's formula");
  }
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

double units(float want, float got, double scale) {
  if (std::memcmp(&want, &got, 4) == 0) return 0;
  if (!std::isfinite(got) || !std::isfinite(want)) return std::numeric_limits<double>::infinity();
  const double unit = std::ldexp(std::max<double>(scale >= 0 ? scale : std::fabs(want), std::ldexp(1.0, -6)), -23);
  return std::fabs(static_cast<double>(got) - want) / unit;
}

bool close(float want, float got, double ulps, double scale) {
  if (std::memcmp(&want, &got, 4) == 0) return true;
  return ulps > 0 && units(want, got, scale) <= ulps;
}

void note_worst_deviation(const std::map<std::string, double>& worst, double declared, CheckResult& res) {
  double most = 0;
  std::string parts;
  for (const auto& [check, w] : worst) {
    res.metrics["worst_ulps." + check] = w;
    most = std::max(most, w);
    parts += (parts.empty() ? "" : ", ") + check + " " + scenario::format_double(std::round(w * 1000) / 1000);
  }
  if (worst.empty()) return;
  std::string note = "worst deviation per check, in units (each step replayed from the system's own state): " + parts;
  if (most == 0) {
    note += " (every output bit-identical to the replay)";
  } else if (declared > 0) {
    note += " (declared tolerance_ulps " + scenario::format_double(declared) + "; the run needs " +
            scenario::format_double(std::ceil(most * 1000) / 1000) + ")";
  }
  res.notes.push_back(note);
}

}  // namespace lockstep::sut::embedding
