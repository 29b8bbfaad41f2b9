#include "reference/train/sage.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "reference/common/philox.h"
#include "reference/train/aggregate.h"

namespace lockstep::ref::train {
namespace {

using I64 = std::vector<std::int64_t>;

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

template <class T>
T round_hidden(T x) {
  return static_cast<T>(round_bf16(static_cast<float>(x)));
}

}  // namespace

// ---- data ----------------------------------------------------------------------------------

float node_feature(std::uint64_t seed, std::int64_t v, std::int64_t j) {
  const auto w = philox_u64x2(seed, static_cast<std::uint64_t>(v),
                              stream_counter(streams::kTrainFeature, static_cast<std::uint32_t>(j / 2)));
  return static_cast<float>(2.0 * uniform01(w[static_cast<std::size_t>(j % 2)]) - 1.0);
}

void node_features(std::uint64_t seed, std::int64_t dim, const I64& nodes, std::vector<float>& out) {
  out.reserve(out.size() + nodes.size() * static_cast<std::size_t>(dim));
  for (std::int64_t v : nodes) {
    for (std::int64_t j = 0; j < dim; ++j) out.push_back(node_feature(seed, v, j));
  }
}

std::vector<std::int32_t> node_labels(const CsrGraph& rows, std::uint64_t seed, std::int64_t dim, int num_classes) {
  require(dim >= 1, "node_labels: dim must be >= 1, got " + std::to_string(dim));
  require(num_classes >= 2, "node_labels: num_classes must be >= 2, got " + std::to_string(num_classes));
  std::vector<double> proj(static_cast<std::size_t>(num_classes * dim));
  for (std::size_t i = 0; i < proj.size(); ++i) {
    proj[i] = 2.0 * uniform01(philox_u64(seed, i, stream_counter(streams::kTrainLabel, 0))) - 1.0;
  }
  std::vector<std::int32_t> labels(static_cast<std::size_t>(rows.num_nodes));
  std::vector<double> x(static_cast<std::size_t>(dim));
  for (std::int64_t v = 0; v < rows.num_nodes; ++v) {
    const auto b = rows.indptr[static_cast<std::size_t>(v)], e = rows.indptr[static_cast<std::size_t>(v) + 1];
    std::fill(x.begin(), x.end(), 0.0);
    for (auto p = b; p < e; ++p) {
      for (std::int64_t j = 0; j < dim; ++j) x[static_cast<std::size_t>(j)] += node_feature(seed, rows.indices[static_cast<std::size_t>(p)], j);
    }
    for (std::int64_t j = 0; j < dim; ++j) {
      if (e > b) x[static_cast<std::size_t>(j)] /= static_cast<double>(e - b);
      x[static_cast<std::size_t>(j)] += node_feature(seed, v, j);
    }
    int best = 0;
    double best_score = 0;
    for (int c = 0; c < num_classes; ++c) {
      double s = 0;
      for (std::int64_t j = 0; j < dim; ++j) s += proj[static_cast<std::size_t>(c * dim + j)] * x[static_cast<std::size_t>(j)];
      if (c == 0 || s > best_score) {
        best = c;
        best_score = s;
      }
    }
    labels[static_cast<std::size_t>(v)] = best;
  }
  return labels;
}

void train_eval_split(std::int64_t num_nodes, std::uint64_t seed, std::int64_t num_train, std::int64_t num_eval,
                      I64& train, I64& eval) {
  require(num_train >= 0 && num_eval >= 0 && num_train + num_eval <= num_nodes,
          "train_eval_split: num_train " + std::to_string(num_train) + " + num_eval " + std::to_string(num_eval) +
              " must be non-negative and at most num_nodes " + std::to_string(num_nodes));
  std::vector<std::pair<std::uint64_t, std::int64_t>> keyed(static_cast<std::size_t>(num_nodes));
  for (std::int64_t v = 0; v < num_nodes; ++v) {
    keyed[static_cast<std::size_t>(v)] = {philox_u64(seed, static_cast<std::uint64_t>(v), stream_counter(streams::kTrainSplit, 0)), v};
  }
  std::sort(keyed.begin(), keyed.end());
  train.clear();
  eval.clear();
  for (std::int64_t i = 0; i < num_train; ++i) train.push_back(keyed[static_cast<std::size_t>(i)].second);
  for (std::int64_t i = 0; i < num_eval; ++i) eval.push_back(keyed[static_cast<std::size_t>(num_train + i)].second);
}

// ---- precision and collate -----------------------------------------------------------------

std::string to_string(Precision p) {
  switch (p) {
    case Precision::kF32: return "fp32";
    case Precision::kBF16: return "bf16";
    case Precision::kBF16Reduce: return "bf16_reduce";
  }
  return "?";
}

Precision precision_from_string(const std::string& name) {
  if (name == "fp32") return Precision::kF32;
  if (name == "bf16") return Precision::kBF16;
  if (name == "bf16_reduce") return Precision::kBF16Reduce;
  throw std::invalid_argument("unknown precision '" + name + "' (fp32, bf16, bf16_reduce)");
}

float round_bf16(float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, 4);
  if (std::isnan(v)) {
    bits = (bits | 0x00400000u) & 0xffff0000u;  // quiet, keep the sign
  } else {
    bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest, ties to even
    bits &= 0xffff0000u;
  }
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

Batch collate(SampledBlocks blocks, std::vector<float> fp32_rows, std::int64_t dim, std::vector<std::int32_t> labels,
              Precision precision) {
  const std::size_t rows = blocks.blocks.empty() ? blocks.seeds.size() : blocks.blocks.back().src_nodes.size();
  require(fp32_rows.size() == rows * static_cast<std::size_t>(dim),
          "collate: " + std::to_string(fp32_rows.size()) + " input values for " + std::to_string(rows) + " rows of " + std::to_string(dim));
  require(labels.size() == blocks.seeds.size(), "collate: " + std::to_string(labels.size()) + " labels for " + std::to_string(blocks.seeds.size()) + " seeds");
  Batch b;
  b.blocks = std::move(blocks);
  b.labels = std::move(labels);
  b.inputs = std::move(fp32_rows);
  if (precision != Precision::kF32) {
    for (auto& x : b.inputs) x = round_bf16(x);
    b.compute = BatchDType::kBF16;
  }
  b.grad_sync = precision == Precision::kBF16Reduce ? BatchDType::kBF16 : BatchDType::kF32;
  return b;
}

// ---- model ---------------------------------------------------------------------------------

std::vector<LayerShape> layer_shapes(const SageConfig& c) {
  require(c.in_dim >= 1 && c.hidden >= 1 && c.num_classes >= 2 && c.num_layers >= 1 && c.num_layers <= 3,
          "SageConfig: need in_dim >= 1, hidden >= 1, num_classes >= 2, num_layers in 1..3");
  std::vector<LayerShape> out;
  std::int64_t at = 0;
  for (int l = 0; l < c.num_layers; ++l) {
    LayerShape s;
    s.in = l == 0 ? c.in_dim : c.hidden;
    s.out = l == c.num_layers - 1 ? c.num_classes : c.hidden;
    s.w_self = at;
    s.w_neigh = at + s.in * s.out;
    s.bias = at + 2 * s.in * s.out;
    at = s.bias + s.out;
    out.push_back(s);
  }
  return out;
}

std::int64_t num_params(const SageConfig& config) {
  const auto s = layer_shapes(config).back();
  return s.bias + s.out;
}

std::vector<float> init_params(const SageConfig& config, std::uint64_t seed) {
  std::vector<float> p(static_cast<std::size_t>(num_params(config)), 0.0f);
  for (const auto& s : layer_shapes(config)) {
    const double scale = std::sqrt(6.0 / static_cast<double>(s.in + s.out));
    for (std::int64_t i = s.w_self; i < s.bias; ++i) {
      const double u = uniform01(philox_u64(seed, static_cast<std::uint64_t>(i), stream_counter(streams::kTrainInit, 0)));
      p[static_cast<std::size_t>(i)] = static_cast<float>((2.0 * u - 1.0) * scale);
    }
  }
  return p;
}

namespace {

// Throws std::invalid_argument when the aggregation is asked on CUDA for T other than float.
template <class T>
void require_fp32_on(Device device, const char* what) {
  if (device.is_cuda() && !std::is_same_v<T, float>) {
    throw std::invalid_argument(std::string(what) + ": the mean aggregation runs on " + to_string(device) + " in fp32 only");
  }
}

// agg (nd x in) = the mean aggregation of h over the groups, on the host or on `device`.
template <class T>
void aggregate(const EdgeGroups& groups, const std::vector<T>& h, std::int64_t in, std::vector<T>& agg, Device device) {
  const std::size_t nd = groups.dst_ptr.size() - 1;
  if constexpr (std::is_same_v<T, float>) {
    if (device.is_cuda()) {
      cuda_set_device(device.index);
      const CudaBuffer hd = cuda_upload(h);
      CudaBuffer ad(agg.size() * sizeof(float));
      mean_aggregate_cuda(device.index, groups, static_cast<const float*>(hd.data()), in, static_cast<float*>(ad.data()));
      if (!agg.empty()) cuda_copy_to_host(agg.data(), ad.data(), agg.size() * sizeof(float));
      return;
    }
  }
  const auto w = static_cast<std::size_t>(in);
  for (std::size_t d = 0; d < nd; ++d) {
    for (std::size_t j = 0; j < w; ++j) {
      agg[d * w + j] = mean_of_neighbors(h.data(), in, groups.src_of.data(), groups.dst_ptr[d], groups.dst_ptr[d + 1],
                                         static_cast<std::int64_t>(j));
    }
  }
}

// dh (ns x in) += the mean's gradient from dagg (nd x in), each src's start being its dh row,
// on the host or on `device`.
template <class T>
void aggregate_backward(const EdgeGroups& groups, const std::vector<T>& dagg, std::int64_t in, std::vector<T>& dh,
                        Device device) {
  const std::size_t ns = groups.src_ptr.size() - 1;
  if constexpr (std::is_same_v<T, float>) {
    if (device.is_cuda()) {
      cuda_set_device(device.index);
      const CudaBuffer gd = cuda_upload(dagg), start = cuda_upload(dh);
      CudaBuffer out(dh.size() * sizeof(float));
      mean_aggregate_backward_cuda(device.index, groups, static_cast<const float*>(gd.data()),
                                   static_cast<const float*>(start.data()), in, static_cast<float*>(out.data()));
      if (!dh.empty()) cuda_copy_to_host(dh.data(), out.data(), dh.size() * sizeof(float));
      return;
    }
  }
  const auto w = static_cast<std::size_t>(in);
  for (std::size_t src = 0; src < ns; ++src) {
    for (std::size_t j = 0; j < w; ++j) {
      dh[src * w + j] = neighbor_gradient(dh[src * w + j], dagg.data(), in, groups.dst_of.data(), groups.dst_ptr.data(),
                                          groups.src_ptr[src], groups.src_ptr[src + 1], static_cast<std::int64_t>(j));
    }
  }
}

}  // namespace

template <class T>
Activations<T> forward(const SageConfig& config, const std::vector<T>& params, const SampledBlocks& blocks,
                       const std::vector<T>& inputs, bool round_bf16_hidden, Device aggregate_on) {
  require_fp32_on<T>(aggregate_on, "forward");
  const auto shapes = layer_shapes(config);
  const int L = config.num_layers;
  require(static_cast<int>(blocks.blocks.size()) == L,
          "forward: " + std::to_string(blocks.blocks.size()) + " blocks for " + std::to_string(L) + " layers");
  require(params.size() == static_cast<std::size_t>(num_params(config)), "forward: wrong parameter count");
  require(inputs.size() == blocks.blocks.back().src_nodes.size() * static_cast<std::size_t>(config.in_dim),
          "forward: input rows do not match the last block's src nodes");
  Activations<T> a;
  std::vector<T> h = inputs;
  for (int l = 0; l < L; ++l) {
    const auto& s = shapes[static_cast<std::size_t>(l)];
    const Block& blk = blocks.blocks[static_cast<std::size_t>(L - 1 - l)];
    const std::size_t nd = blk.dst_nodes.size(), in = static_cast<std::size_t>(s.in), out = static_cast<std::size_t>(s.out);
    // Mean aggregation by the per-element function the CUDA kernel runs (aggregate.h), on
    // the host or by that kernel.
    const EdgeGroups groups = edge_groups(blk);
    std::vector<T> agg(nd * in);
    aggregate(groups, h, s.in, agg, aggregate_on);
    std::vector<T> z(nd * out);
    const T* ws = params.data() + s.w_self;
    const T* wn = params.data() + s.w_neigh;
    const T* bias = params.data() + s.bias;
    for (std::size_t d = 0; d < nd; ++d) {
      T* zr = z.data() + d * out;
      for (std::size_t o = 0; o < out; ++o) zr[o] = bias[o];
      for (std::size_t j = 0; j < in; ++j) {
        const T hs = h[d * in + j], ha = agg[d * in + j];
        for (std::size_t o = 0; o < out; ++o) zr[o] += hs * ws[j * out + o] + ha * wn[j * out + o];
      }
    }
    std::vector<T> next;
    if (l < L - 1) {
      next.resize(z.size());
      for (std::size_t i = 0; i < z.size(); ++i) {
        const T r = config.activation == SageConfig::Activation::kRelu ? (z[i] > T(0) ? z[i] : T(0))
                                                                       : z[i] / (T(1) + std::exp(-z[i]));
        next[i] = round_bf16_hidden ? round_hidden(r) : r;
      }
    } else {
      a.logits = z;
    }
    a.inputs.push_back(std::move(h));
    a.agg.push_back(std::move(agg));
    a.pre.push_back(std::move(z));
    h = std::move(next);
  }
  return a;
}

template <class T>
std::vector<T> cross_entropy(const SageConfig& config, const SampledBlocks& blocks, const std::vector<T>& logits,
                             const std::vector<std::int32_t>& labels, std::vector<T>& dlogits) {
  const auto C = static_cast<std::size_t>(config.num_classes);
  require(labels.size() == blocks.seeds.size(), "cross_entropy: one label per seed needed");
  require(logits.size() == blocks.blocks.front().dst_nodes.size() * C, "cross_entropy: logits shape");
  dlogits.assign(logits.size(), T(0));
  std::vector<T> losses(labels.size());
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const auto row = static_cast<std::size_t>(blocks.seed_to_output[i]);
    const T* z = logits.data() + row * C;
    const auto y = static_cast<std::size_t>(labels[i]);
    require(y < C, "cross_entropy: label " + std::to_string(labels[i]) + " outside [0, num_classes)");
    T mx = z[0];
    for (std::size_t c = 1; c < C; ++c) mx = std::max(mx, z[c]);
    T sum = 0;
    for (std::size_t c = 0; c < C; ++c) sum += std::exp(z[c] - mx);
    losses[i] = std::log(sum) + mx - z[y];
    for (std::size_t c = 0; c < C; ++c) dlogits[row * C + c] += std::exp(z[c] - mx) / sum - (c == y ? T(1) : T(0));
  }
  return losses;
}

template <class T>
void backward(const SageConfig& config, const std::vector<T>& params, const SampledBlocks& blocks,
              const Activations<T>& acts, const std::vector<T>& dlogits, std::vector<T>& grads,
              std::vector<T>* dinputs, Device aggregate_on) {
  require_fp32_on<T>(aggregate_on, "backward");
  const auto shapes = layer_shapes(config);
  const int L = config.num_layers;
  require(grads.size() == params.size(), "backward: grads must have num_params entries");
  std::vector<T> dout = dlogits;  // d loss / d out of layer l
  for (int l = L - 1; l >= 0; --l) {
    const auto& s = shapes[static_cast<std::size_t>(l)];
    const Block& blk = blocks.blocks[static_cast<std::size_t>(L - 1 - l)];
    const std::size_t nd = blk.dst_nodes.size(), ns = blk.src_nodes.size();
    const std::size_t in = static_cast<std::size_t>(s.in), out = static_cast<std::size_t>(s.out);
    const auto& h = acts.inputs[static_cast<std::size_t>(l)];
    const auto& agg = acts.agg[static_cast<std::size_t>(l)];
    const auto& z = acts.pre[static_cast<std::size_t>(l)];
    std::vector<T> dz = dout;
    if (l < L - 1) {
      for (std::size_t i = 0; i < dz.size(); ++i) {
        if (config.activation == SageConfig::Activation::kRelu) {
          if (!(z[i] > T(0))) dz[i] = T(0);
        } else {
          const T sig = T(1) / (T(1) + std::exp(-z[i]));
          dz[i] *= sig * (T(1) + z[i] * (T(1) - sig));
        }
      }
    }
    T* gs = grads.data() + s.w_self;
    T* gn = grads.data() + s.w_neigh;
    T* gb = grads.data() + s.bias;
    const T* ws = params.data() + s.w_self;
    const T* wn = params.data() + s.w_neigh;
    for (std::size_t d = 0; d < nd; ++d) {
      const T* dzr = dz.data() + d * out;
      for (std::size_t j = 0; j < in; ++j) {
        const T hs = h[d * in + j], ha = agg[d * in + j];
        for (std::size_t o = 0; o < out; ++o) {
          gs[j * out + o] += hs * dzr[o];
          gn[j * out + o] += ha * dzr[o];
        }
      }
      for (std::size_t o = 0; o < out; ++o) gb[o] += dzr[o];
    }
    if (l == 0 && dinputs == nullptr) break;
    std::vector<T> dh(ns * in, T(0)), dagg(nd * in, T(0));
    for (std::size_t d = 0; d < nd; ++d) {
      const T* dzr = dz.data() + d * out;
      for (std::size_t j = 0; j < in; ++j) {
        T a = 0, b = 0;
        for (std::size_t o = 0; o < out; ++o) {
          a += dzr[o] * ws[j * out + o];
          b += dzr[o] * wn[j * out + o];
        }
        dh[d * in + j] += a;
        dagg[d * in + j] = b;
      }
    }
    // The mean's gradient by the per-element function the CUDA kernel runs (aggregate.h),
    // after each src's self-path term, on the host or by that kernel.
    const EdgeGroups groups = edge_groups(blk);
    aggregate_backward(groups, dagg, s.in, dh, aggregate_on);
    if (l == 0) {
      *dinputs = std::move(dh);
      break;
    }
    dout = std::move(dh);
  }
}

template <class T>
std::vector<std::int32_t> predictions(const SageConfig& config, const SampledBlocks& blocks, const std::vector<T>& logits) {
  const auto C = static_cast<std::size_t>(config.num_classes);
  std::vector<std::int32_t> out;
  for (auto row : blocks.seed_to_output) {
    const T* z = logits.data() + static_cast<std::size_t>(row) * C;
    std::size_t best = 0;
    for (std::size_t c = 1; c < C; ++c) {
      if (z[c] > z[best]) best = c;
    }
    out.push_back(static_cast<std::int32_t>(best));
  }
  return out;
}

double train_step_grads(const SageConfig& config, const std::vector<float>& params, const Batch& batch,
                        std::vector<float>& grads) {
  if (batch.blocks.seeds.empty()) return 0.0;
  const auto acts = forward(config, params, batch.blocks, batch.inputs, batch.compute == BatchDType::kBF16);
  std::vector<float> dlogits;
  const auto losses = cross_entropy(config, batch.blocks, acts.logits, batch.labels, dlogits);
  backward(config, params, batch.blocks, acts, dlogits, grads);
  double sum = 0;
  for (float x : losses) sum += x;
  return sum;
}

template Activations<float> forward(const SageConfig&, const std::vector<float>&, const SampledBlocks&, const std::vector<float>&, bool, Device);
template Activations<double> forward(const SageConfig&, const std::vector<double>&, const SampledBlocks&, const std::vector<double>&, bool, Device);
template std::vector<float> cross_entropy(const SageConfig&, const SampledBlocks&, const std::vector<float>&, const std::vector<std::int32_t>&, std::vector<float>&);
template std::vector<double> cross_entropy(const SageConfig&, const SampledBlocks&, const std::vector<double>&, const std::vector<std::int32_t>&, std::vector<double>&);
template void backward(const SageConfig&, const std::vector<float>&, const SampledBlocks&, const Activations<float>&, const std::vector<float>&, std::vector<float>&, std::vector<float>*, Device);
template void backward(const SageConfig&, const std::vector<double>&, const SampledBlocks&, const Activations<double>&, const std::vector<double>&, std::vector<double>&, std::vector<double>*, Device);
template std::vector<std::int32_t> predictions(const SageConfig&, const SampledBlocks&, const std::vector<float>&);
template std::vector<std::int32_t> predictions(const SageConfig&, const SampledBlocks&, const std::vector<double>&);

// ---- optimizer -----------------------------------------------------------------------------

void Optimizer::step(std::vector<float>& params, const std::vector<float>& grads) {
  require(params.size() == grads.size(), "Optimizer::step: " + std::to_string(grads.size()) + " grads for " + std::to_string(params.size()) + " params");
  if (m.size() != params.size()) m.assign(params.size(), 0.0f);
  ++t;
  if (kind == Kind::kSgd) {
    for (std::size_t i = 0; i < params.size(); ++i) {
      m[i] = momentum * m[i] + grads[i];
      params[i] -= lr * m[i];
    }
    return;
  }
  if (v.size() != params.size()) v.assign(params.size(), 0.0f);
  const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
  const float c1 = 1.0f - static_cast<float>(std::pow(0.9, static_cast<double>(t)));
  const float c2 = 1.0f - static_cast<float>(std::pow(0.999, static_cast<double>(t)));
  for (std::size_t i = 0; i < params.size(); ++i) {
    m[i] = b1 * m[i] + (1.0f - b1) * grads[i];
    v[i] = b2 * v[i] + (1.0f - b2) * grads[i] * grads[i];
    params[i] -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + eps);
  }
}

std::uint64_t param_checksum(const std::vector<float>& params) {
  std::uint64_t h = 1469598103934665603ull;
  for (float x : params) {
    std::uint32_t bits;
    std::memcpy(&bits, &x, 4);
    for (int k = 0; k < 4; ++k) h = (h ^ ((bits >> (8 * k)) & 0xffu)) * 1099511628211ull;
  }
  return h;
}

}  // namespace lockstep::ref::train
