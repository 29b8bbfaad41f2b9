#include "harness/torch/dense_embedding.h"

#include <ATen/ATen.h>
#include <torch/nn/modules/embedding.h>
#include <torch/utils.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace lockstep::torchref {

struct DenseEmbedding::Impl {
  std::int64_t rows = 0, dim = 0;
  ref::OptimizerOptions opt;
  ref::DuplicateReduce reduce = ref::DuplicateReduce::kSum;
  torch::nn::Embedding emb{nullptr};
  at::Tensor s1, s2;  // Adagrad sum / Adam m, Adam v: rows x dim, f32
  std::int64_t t = 0;
};

namespace {

at::Tensor host_f32(const std::vector<float>& v, std::int64_t rows, std::int64_t dim) {
  auto out = at::empty({rows, dim}, at::TensorOptions().dtype(at::kFloat));
  if (!v.empty()) std::memcpy(out.data_ptr<float>(), v.data(), v.size() * sizeof(float));
  return out;
}

// The correctly rounded f32 square root (IEEE 754, std::sqrt). at::sqrt on f32 is not that on
// every LibTorch line: the 2.11 wheel (MKL VML, AVX512) is off by one ulp in about 20% of
// elements. A double square root rounded once to f32 is correctly rounded (53 >= 2 * 24 + 2).
at::Tensor sqrt_f32(const at::Tensor& t) { return t.to(at::kDouble).sqrt().to(at::kFloat); }

std::vector<float> to_vector(const at::Tensor& t) {
  const auto c = t.contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

}  // namespace

DenseEmbedding::DenseEmbedding(std::int64_t rows, std::int64_t dim, const std::vector<float>& init,
                               const ref::OptimizerOptions& opt, ref::DuplicateReduce reduce)
    : impl_(std::make_unique<Impl>()) {
  if (rows < 1 || dim < 1 || static_cast<std::int64_t>(init.size()) != rows * dim) {
    throw std::invalid_argument("DenseEmbedding: need rows, dim >= 1 and rows * dim initial values, got " +
                                std::to_string(rows) + " x " + std::to_string(dim) + " and " + std::to_string(init.size()));
  }
  auto& m = *impl_;
  m.rows = rows;
  m.dim = dim;
  m.opt = opt;
  m.reduce = reduce;
  m.emb = torch::nn::Embedding(torch::nn::EmbeddingOptions(rows, dim));
  {
    torch::NoGradGuard no_grad;
    m.emb->weight.copy_(host_f32(init, rows, dim));
  }
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  if (opt.kind == ref::OptimizerKind::kAdagrad) m.s1 = at::full({rows, dim}, opt.initial_accumulator_value, f32);
  if (opt.kind == ref::OptimizerKind::kAdam) {
    m.s1 = at::zeros({rows, dim}, f32);
    m.s2 = at::zeros({rows, dim}, f32);
  }
}

DenseEmbedding::~DenseEmbedding() = default;

std::vector<float> DenseEmbedding::step_bags(const std::vector<std::int64_t>& ids, const std::vector<std::int64_t>& offsets,
                                             const std::vector<float>& weights, ref::BagPooling pooling,
                                             const std::vector<float>& bag_grads) {
  auto& m = *impl_;
  const auto n = static_cast<std::int64_t>(ids.size());
  const auto bags = static_cast<std::int64_t>(offsets.size()) - 1;
  if (bags < 0 || offsets.front() != 0 || offsets.back() != n || static_cast<std::int64_t>(bag_grads.size()) != bags * m.dim ||
      !(weights.empty() || static_cast<std::int64_t>(weights.size()) == n)) {
    throw std::invalid_argument("DenseEmbedding::step_bags: " + std::to_string(n) + " ids, " + std::to_string(offsets.size()) + " offsets, " +
                                std::to_string(weights.size()) + " weights and " + std::to_string(bag_grads.size()) +
                                " gradient values do not fit together");
  }
  const auto i64 = at::TensorOptions().dtype(at::kLong);
  auto idx = at::empty({n}, i64);
  if (n > 0) std::memcpy(idx.data_ptr<std::int64_t>(), ids.data(), ids.size() * sizeof(std::int64_t));
  auto off = at::empty({bags + 1}, i64);
  std::memcpy(off.data_ptr<std::int64_t>(), offsets.data(), offsets.size() * sizeof(std::int64_t));
  at::Tensor psw;
  if (!weights.empty()) psw = host_f32(weights, n, 1).view({n});
  std::vector<float> pooled;
  at::Tensor id_grads;
  {
    torch::NoGradGuard no_grad;
    // at::embedding_bag refuses per-sample weights with mean: a weighted mean is its weighted sum
    // over the bag's weights summed (index_add_ in position order), an empty bag pooling to zeros.
    const bool weighted_mean = pooling == ref::BagPooling::kMean && psw.defined();
    auto out = std::get<0>(at::embedding_bag(m.emb->weight.detach(), idx, off, /*scale_grad_by_freq=*/false,
                                             /*mode=*/pooling == ref::BagPooling::kMean && !weighted_mean ? 1 : 0, /*sparse=*/false, psw,
                                             /*include_last_offset=*/true));
    const auto lengths = off.slice(0, 1).sub(off.slice(0, 0, bags));
    const auto bag_of = at::repeat_interleave(at::arange(bags, i64), lengths);
    id_grads = host_f32(bag_grads, bags, m.dim).index_select(0, bag_of);
    if (weighted_mean) {
      const auto weight_sums = at::zeros({bags}, psw.options()).index_add_(0, bag_of, psw);
      out = at::where(lengths.gt(0).unsqueeze(1), out.div(weight_sums.unsqueeze(1)), at::zeros_like(out));
      id_grads = id_grads.mul(psw.div(weight_sums.index_select(0, bag_of)).unsqueeze(1));
    } else {
      if (pooling == ref::BagPooling::kMean) id_grads = id_grads.mul(lengths.to(at::kFloat).reciprocal().index_select(0, bag_of).unsqueeze(1));
      if (psw.defined()) id_grads = id_grads.mul(psw.unsqueeze(1));
    }
    pooled = to_vector(out);
  }
  step(ids, to_vector(id_grads));
  return pooled;
}

std::vector<float> DenseEmbedding::step(const std::vector<std::int64_t>& ids, const std::vector<float>& grad_output) {
  auto& m = *impl_;
  const auto n = static_cast<std::int64_t>(ids.size());
  if (static_cast<std::int64_t>(grad_output.size()) != n * m.dim) {
    throw std::invalid_argument("DenseEmbedding::step: " + std::to_string(n) + " ids need " + std::to_string(n * m.dim) +
                                " gradient values, got " + std::to_string(grad_output.size()));
  }
  ++m.t;
  auto idx = at::empty({n}, at::TensorOptions().dtype(at::kLong));
  if (n > 0) std::memcpy(idx.data_ptr<std::int64_t>(), ids.data(), ids.size() * sizeof(std::int64_t));
  auto& weight = m.emb->weight;
  weight.mutable_grad() = at::Tensor();
  const auto out = m.emb->forward(idx);
  if (n == 0) return {};
  out.backward(host_f32(grad_output, n, m.dim));

  torch::NoGradGuard no_grad;
  const auto touched = std::get<0>(at::_unique(idx, /*sorted=*/true, /*return_inverse=*/false));
  auto g = weight.grad().index_select(0, touched);
  if (m.reduce == ref::DuplicateReduce::kMean) {
    const auto counts = at::bincount(idx, {}, m.rows).index_select(0, touched).to(at::kFloat).unsqueeze(1);
    g = g.div(counts);
  }
  auto w = weight.detach().index_select(0, touched);
  const double lr = m.opt.lr;
  const double eps = m.opt.resolved_eps();
  switch (m.opt.kind) {
    case ref::OptimizerKind::kSgd:
      w = w.sub(g.mul(lr));
      break;
    case ref::OptimizerKind::kAdagrad: {
      auto s = m.s1.index_select(0, touched).add(g.mul(g));
      w = w.sub(g.div(sqrt_f32(s).add(eps)).mul(lr));
      m.s1.index_copy_(0, touched, s);
      break;
    }
    case ref::OptimizerKind::kAdam: {
      auto mm = m.s1.index_select(0, touched);
      auto vv = m.s2.index_select(0, touched);
      mm = g.sub(mm).mul(1.0 - m.opt.beta1).add(mm);
      vv = g.mul(g).sub(vv).mul(1.0 - m.opt.beta2).add(vv);
      const double bc1 = 1.0 - std::pow(m.opt.beta1, static_cast<double>(m.t));
      const double bc2 = 1.0 - std::pow(m.opt.beta2, static_cast<double>(m.t));
      const double step_size = lr * std::sqrt(bc2) / bc1;
      w = w.add(mm.div(sqrt_f32(vv).add(eps)).mul(-step_size));
      m.s1.index_copy_(0, touched, mm);
      m.s2.index_copy_(0, touched, vv);
      break;
    }
  }
  weight.detach().index_copy_(0, touched, w);
  return to_vector(out.detach());
}

std::vector<float> DenseEmbedding::weights() const { return to_vector(impl_->emb->weight.detach()); }

}  // namespace lockstep::torchref
