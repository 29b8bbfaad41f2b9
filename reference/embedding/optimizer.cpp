// Compiled with -ffp-contract=off, as all of reference/ (reference/CMakeLists.txt): the update
// order in optimizer.h is exact only if no multiply-add is fused.
#include "reference/embedding/optimizer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "reference/common/half.h"

namespace lockstep::ref {

std::string to_string(Storage s) {
  switch (s) {
    case Storage::kF32: return "f32";
    case Storage::kBF16: return "bf16";
    case Storage::kF16: return "f16";
  }
  return "?";
}
std::string to_string(DuplicateReduce r) { return r == DuplicateReduce::kSum ? "sum" : "mean"; }
std::string to_string(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::kSgd: return "sgd";
    case OptimizerKind::kAdagrad: return "adagrad";
    case OptimizerKind::kAdam: return "adam";
  }
  return "?";
}

Storage storage_from_string(const std::string& name) {
  for (auto s : {Storage::kF32, Storage::kBF16, Storage::kF16}) {
    if (to_string(s) == name) return s;
  }
  throw std::invalid_argument("unknown storage dtype '" + name + "' (known: f32, bf16, f16)");
}
DuplicateReduce duplicate_reduce_from_string(const std::string& name) {
  for (auto r : {DuplicateReduce::kSum, DuplicateReduce::kMean}) {
    if (to_string(r) == name) return r;
  }
  throw std::invalid_argument("unknown duplicate-id reduction '" + name + "' (known: sum, mean)");
}
OptimizerKind optimizer_from_string(const std::string& name) {
  for (auto k : {OptimizerKind::kSgd, OptimizerKind::kAdagrad, OptimizerKind::kAdam}) {
    if (to_string(k) == name) return k;
  }
  throw std::invalid_argument("unknown optimizer '" + name + "' (known: sgd, adagrad, adam)");
}

float round_to_storage(float f, Storage s) {
  switch (s) {
    case Storage::kF32: return f;
    case Storage::kBF16: return bf16_to_float(float_to_bf16(f));
    case Storage::kF16: return f16_to_float(float_to_f16(f));
  }
  return f;
}

double unit_roundoff(Storage s) {
  switch (s) {
    case Storage::kF32: return 0x1.0p-24;
    case Storage::kBF16: return 0x1.0p-8;
    case Storage::kF16: return 0x1.0p-11;
  }
  return 0;
}

double storage_tolerance(Storage s, std::int64_t roundings, double max_abs) {
  if (s == Storage::kF32) return 0.0;
  const double r = static_cast<double>(roundings);
  const double u = unit_roundoff(s);
  const double a = s == Storage::kF16 ? 0x1.0p-25 : 0.0;
  return r * (u * (1.0 + r * u) + 0x1.0p-22) * max_abs + r * a;
}

GradGroups group_duplicates(const std::int64_t* ids, std::int64_t n) {
  if (n < 0) throw std::invalid_argument("group_duplicates: n must be >= 0, got " + std::to_string(n));
  GradGroups g;
  g.order.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) g.order[static_cast<std::size_t>(i)] = i;
  std::stable_sort(g.order.begin(), g.order.end(), [&](std::int64_t a, std::int64_t b) { return ids[a] < ids[b]; });
  g.ptr.push_back(0);
  for (std::size_t k = 0; k < g.order.size(); ++k) {
    const std::int64_t id = ids[g.order[k]];
    if (g.ids.empty() || g.ids.back() != id) {
      if (!g.ids.empty()) g.ptr.push_back(static_cast<std::int64_t>(k));
      g.ids.push_back(id);
    }
  }
  if (!g.ids.empty()) g.ptr.push_back(n);
  return g;
}

ReducedGrads reduce_duplicates(const std::int64_t* ids, const float* grads, std::int64_t n, std::int64_t dim,
                               DuplicateReduce mode) {
  if (dim < 1) throw std::invalid_argument("reduce_duplicates: dim must be >= 1, got " + std::to_string(dim));
  if (n < 0) throw std::invalid_argument("reduce_duplicates: n must be >= 0, got " + std::to_string(n));
  const auto g = group_duplicates(ids, n);
  ReducedGrads out;
  out.ids = g.ids;
  out.grads.resize(g.ids.size() * static_cast<std::size_t>(dim));
  for (std::size_t k = 0; k < g.ids.size(); ++k) {
    out.counts.push_back(g.ptr[k + 1] - g.ptr[k]);
    for (std::int64_t c = 0; c < dim; ++c) {
      out.grads[k * static_cast<std::size_t>(dim) + static_cast<std::size_t>(c)] =
          reduce_element(grads, dim, g.order.data(), g.ptr[k], g.ptr[k + 1], c, mode);
    }
  }
  return out;
}

UpdateRule update_rule(const OptimizerOptions& opt, std::int64_t t) {
  UpdateRule r;
  r.kind = opt.kind;
  r.lr = static_cast<float>(opt.lr);
  r.eps = static_cast<float>(opt.resolved_eps());
  if (opt.kind == OptimizerKind::kAdam) {
    r.one_minus_beta1 = static_cast<float>(1.0 - opt.beta1);
    r.one_minus_beta2 = static_cast<float>(1.0 - opt.beta2);
    const double bc1 = 1.0 - std::pow(opt.beta1, static_cast<double>(t));
    const double bc2 = 1.0 - std::pow(opt.beta2, static_cast<double>(t));
    r.neg_step = static_cast<float>(-(opt.lr * std::sqrt(bc2) / bc1));
  }
  return r;
}

void apply_update(const OptimizerOptions& opt, std::int64_t t, std::int64_t dim, const float* g, float* w, float* s1,
                  float* s2) {
  const UpdateRule r = update_rule(opt, t);
  float unused = 0.0f;
  for (std::int64_t c = 0; c < dim; ++c) update_element(r, g[c], w[c], s1 ? s1[c] : unused, s2 ? s2[c] : unused);
}

void apply_rowwise_adagrad(float lr, float eps, std::int64_t dim, const float* g, float* w, float* state) {
  float q = 0.0f;
  for (std::int64_t c = 0; c < dim; ++c) q = q + g[c] * g[c];
  q = q / static_cast<float>(dim);
  *state = *state + q;
  const float m = lr / (std::sqrt(*state) + eps);
  for (std::int64_t c = 0; c < dim; ++c) w[c] = w[c] - m * g[c];
}

}  // namespace lockstep::ref
