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
