// Compiled with -ffp-contract=off, as all of reference/ (reference/CMakeLists.txt): the update
// order in embedding.h is exact only if no multiply-add is fused.
#include "reference/embedding/embedding.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <stdexcept>

#include "lockstep/config.h"
#include "reference/common/half.h"
#if LOCKSTEP_HAVE_CUDA_KERNELS
#include "reference/embedding/cuda/embedding.h"
#endif

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

namespace {

// Throws std::runtime_error unless `device` can hold a shard here.
void require_shard_device(Device device) {
  if (!device.is_cuda()) return;
  if (!LOCKSTEP_HAVE_CUDA_KERNELS) {
    throw std::runtime_error("an embedding shard on " + to_string(device) +
                             " needs lockstep built with its CUDA kernels (nvcc was not found at configure time)");
  }
  const auto why = cuda_device_unavailable(device);
  if (!why.empty()) throw std::runtime_error("an embedding shard on " + to_string(device) + ": " + why);
}

}  // namespace

EmbeddingShard::EmbeddingShard(std::vector<std::int64_t> global_ids, std::int64_t dim, Storage storage,
                               std::uint64_t seed, double init_scale, const OptimizerOptions& opt, Device device)
    : global_ids_(std::move(global_ids)), dim_(dim), storage_(storage), opt_(opt), device_(device) {
  if (dim < 1) throw std::invalid_argument("embedding dim must be >= 1, got " + std::to_string(dim));
  require_shard_device(device);
  const auto n = static_cast<std::size_t>(rows()) * static_cast<std::size_t>(dim);
  if (storage_ == Storage::kF32) f32_.resize(n);
  else half_.resize(n);
  // Initialised on the host (a pure function of the ids), then moved to a CUDA device below.
  void* host = storage_ == Storage::kF32 ? static_cast<void*>(f32_.data()) : static_cast<void*>(half_.data());
  for (std::int64_t l = 0; l < rows(); ++l) {
    for (std::int64_t c = 0; c < dim; ++c) {
      store_element(storage_, host, l * dim + c, embedding_init(seed, global_ids_[static_cast<std::size_t>(l)], c, init_scale));
    }
  }
  has_s1_ = opt_.kind != OptimizerKind::kSgd;
  has_s2_ = opt_.kind == OptimizerKind::kAdam;
  if (has_s1_) s1_.assign(n, opt_.kind == OptimizerKind::kAdagrad ? static_cast<float>(opt_.initial_accumulator_value) : 0.0f);
  if (has_s2_) s2_.assign(n, 0.0f);
#if LOCKSTEP_HAVE_CUDA_KERNELS
  if (device_.is_cuda()) {
    mark_cuda_initialised();
    cuda_set_device(device_.index);
    table_d_ = storage_ == Storage::kF32 ? cuda_upload(f32_) : cuda_upload(half_);
    if (has_s1_) s1_d_ = cuda_upload(s1_);
    if (has_s2_) s2_d_ = cuda_upload(s2_);
    f32_ = {};
    half_ = {};
    s1_ = {};
    s2_ = {};
  }
#endif
}

const void* EmbeddingShard::table() const {
  if (device_.is_cuda()) return table_d_.data();
  return storage_ == Storage::kF32 ? static_cast<const void*>(f32_.data()) : static_cast<const void*>(half_.data());
}

float* EmbeddingShard::state(int which) {
  if (which == 1 ? !has_s1_ : !has_s2_) return nullptr;
  if (device_.is_cuda()) return static_cast<float*>((which == 1 ? s1_d_ : s2_d_).data());
  return (which == 1 ? s1_ : s2_).data();
}

void EmbeddingShard::read_row(std::int64_t l, float* out) const {
  const std::int64_t at = l * dim_;
  if (!device_.is_cuda()) {
    if (storage_ == Storage::kF32) std::memcpy(out, f32_.data() + at, static_cast<std::size_t>(dim_) * sizeof(float));
    else for (std::int64_t c = 0; c < dim_; ++c) out[c] = load_element(storage_, table(), at + c);
    return;
  }
  std::vector<unsigned char> raw(static_cast<std::size_t>(dim_) * element_bytes());
  cuda_set_device(device_.index);
  cuda_copy_to_host(raw.data(), static_cast<const unsigned char*>(table()) + static_cast<std::size_t>(at) * element_bytes(), raw.size());
  for (std::int64_t c = 0; c < dim_; ++c) out[c] = load_element(storage_, raw.data(), c);
}

std::vector<float> EmbeddingShard::to_f32() const {
  std::vector<float> out(static_cast<std::size_t>(rows() * dim_));
  if (out.empty()) return out;
  if (!device_.is_cuda()) {
    for (std::int64_t l = 0; l < rows(); ++l) read_row(l, out.data() + l * dim_);
    return out;
  }
  std::vector<unsigned char> raw(out.size() * element_bytes());
  cuda_set_device(device_.index);
  cuda_copy_to_host(raw.data(), table(), raw.size());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = load_element(storage_, raw.data(), static_cast<std::int64_t>(i));
  return out;
}

void EmbeddingShard::gather(const void* locals, IdType type, const std::int32_t* part, int me, std::int64_t n,
                            float* out) const {
  if (device_.is_cuda()) {
#if LOCKSTEP_HAVE_CUDA_KERNELS
    cuda::gather_rows(device_.index, storage_, table(), dim_, locals, type == IdType::kI32, part, me, n, out);
#endif
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    if (part && part[i] != me) continue;
    const std::int64_t l = type == IdType::kI32 ? static_cast<const std::int32_t*>(locals)[i] : static_cast<const std::int64_t*>(locals)[i];
    for (std::int64_t c = 0; c < dim_; ++c) out[i * dim_ + c] = load_element(storage_, table(), l * dim_ + c);
  }
}

void EmbeddingShard::load_state(std::int64_t l, float* w, std::vector<float>& s1, std::vector<float>& s2) const {
  const auto d = static_cast<std::size_t>(dim_);
  const auto at = static_cast<std::size_t>(l) * d;
  read_row(l, w);
  s1.assign(has_s1_ ? d : 0, 0.0f);
  s2.assign(has_s2_ ? d : 0, 0.0f);
  if (!device_.is_cuda()) {
    if (has_s1_) std::copy_n(s1_.data() + at, d, s1.data());
    if (has_s2_) std::copy_n(s2_.data() + at, d, s2.data());
    return;
  }
  if (has_s1_) cuda_copy_to_host(s1.data(), static_cast<const float*>(s1_d_.data()) + at, d * sizeof(float));
  if (has_s2_) cuda_copy_to_host(s2.data(), static_cast<const float*>(s2_d_.data()) + at, d * sizeof(float));
}

void EmbeddingShard::save_state(std::int64_t l, const float* w, const std::vector<float>& s1, const std::vector<float>& s2) {
  const auto d = static_cast<std::size_t>(dim_);
  const auto at = static_cast<std::size_t>(l) * d;
  if (!device_.is_cuda()) {
    for (std::int64_t c = 0; c < dim_; ++c) store_element(storage_, table(), l * dim_ + c, w[c]);
    if (has_s1_) std::copy_n(s1.data(), d, s1_.data() + at);
    if (has_s2_) std::copy_n(s2.data(), d, s2_.data() + at);
    return;
  }
  std::vector<unsigned char> raw(d * element_bytes());
  for (std::int64_t c = 0; c < dim_; ++c) store_element(storage_, raw.data(), c, w[c]);
  cuda_set_device(device_.index);
  cuda_copy_to_device(static_cast<unsigned char*>(table()) + at * element_bytes(), raw.data(), raw.size());
  if (has_s1_) cuda_copy_to_device(state(1) + at, s1.data(), d * sizeof(float));
  if (has_s2_) cuda_copy_to_device(state(2) + at, s2.data(), d * sizeof(float));
}

void EmbeddingShard::update_row(std::int64_t l, const float* g, std::int64_t t) {
  std::vector<float> w(static_cast<std::size_t>(dim_)), s1, s2;
  load_state(l, w.data(), s1, s2);
  apply_update(opt_, t, dim_, g, w.data(), s1.empty() ? nullptr : s1.data(), s2.empty() ? nullptr : s2.data());
  save_state(l, w.data(), s1, s2);
}

void EmbeddingShard::update_rows(const std::vector<std::int64_t>& locals, const GradGroups& groups, const float* grads,
                                 std::int64_t n, DuplicateReduce mode, std::int64_t t) {
  const UpdateRule rule = update_rule(opt_, t);
  const auto count = static_cast<std::int64_t>(locals.size());
  if (device_.is_cuda()) {
#if LOCKSTEP_HAVE_CUDA_KERNELS
    if (count == 0) return;
    cuda_set_device(device_.index);
    const CudaBuffer l = cuda_upload(locals), ptr = cuda_upload(groups.ptr), order = cuda_upload(groups.order),
                     g = cuda_upload(grads, static_cast<std::size_t>(n * dim_) * sizeof(float));
    cuda::update_rows(device_.index, rule, storage_, table(), state(1), state(2), dim_,
                      static_cast<const std::int64_t*>(l.data()), static_cast<const std::int64_t*>(ptr.data()),
                      static_cast<const std::int64_t*>(order.data()), count, static_cast<const float*>(g.data()), mode);
#endif
    return;
  }
  for (std::int64_t k = 0; k < count; ++k) {
    for (std::int64_t c = 0; c < dim_; ++c) {
      update_from_contributions(rule, storage_, table(), state(1), state(2), locals[static_cast<std::size_t>(k)], dim_, c,
                                grads, groups.order.data(), groups.ptr[static_cast<std::size_t>(k)],
                                groups.ptr[static_cast<std::size_t>(k) + 1], mode);
    }
  }
}

void EmbeddingShard::update_row_racy(std::int64_t l, const std::vector<std::vector<float>>& groups, std::int64_t t) {
  const auto d = static_cast<std::size_t>(dim_);
  std::vector<float> w0(d), s10, s20;
  load_state(l, w0.data(), s10, s20);  // every "thread" reads this snapshot before any of them writes
  for (const auto& g : groups) {
    std::vector<float> w = w0, s1 = s10, s2 = s20;
    apply_update(opt_, t, dim_, g.data(), w.data(), s1.empty() ? nullptr : s1.data(), s2.empty() ? nullptr : s2.data());
    save_state(l, w.data(), s1, s2);  // the last writer wins
  }
}

EmbeddingRows::EmbeddingRows(std::int64_t rows, std::int64_t dim, std::unique_ptr<float[]> host, Device device)
    : rows_(rows), dim_(dim), device_(device) {
  const auto bytes = static_cast<std::size_t>(rows * dim) * sizeof(float);
  if (device.is_cuda()) {
    cuda_set_device(device.index);
    cuda_ = CudaBuffer(bytes);
    if (bytes > 0) cuda_copy_to_device(cuda_.data(), host.get(), bytes);
  } else {
    host_ = std::move(host);
  }
}

EmbeddingRows::EmbeddingRows(std::int64_t rows, std::int64_t dim, CudaBuffer values, Device device)
    : rows_(rows), dim_(dim), device_(device), cuda_(std::move(values)) {}

std::vector<float> EmbeddingRows::to_host() const {
  std::vector<float> out(static_cast<std::size_t>(rows_ * dim_));
  if (out.empty()) return out;
  if (!device_.is_cuda()) {
    std::memcpy(out.data(), host_.get(), out.size() * sizeof(float));
    return out;
  }
  cuda_set_device(device_.index);
  cuda_copy_to_host(out.data(), cuda_.data(), out.size() * sizeof(float));
  return out;
}

namespace {

std::int64_t id_at(const void* data, IdType type, std::int64_t i) {
  return type == IdType::kI32 ? static_cast<const std::int32_t*>(data)[i] : static_cast<const std::int64_t*>(data)[i];
}

// Copies the rows this rank owns straight into `out` and counts the others per owner. For f32
// storage the row of id i + kAhead is prefetched while row i is copied.
template <class L>
void gather_local(const EmbeddingShard& shard, const std::int32_t* part, const L* local, std::int64_t n, int me, float* out,
                  std::vector<std::int64_t>& send_counts) {
  constexpr std::int64_t kAhead = 12;
  const auto d = static_cast<std::size_t>(shard.dim());
  const float* rows = shard.f32_data();
  if (!rows) {
    for (std::int64_t i = 0; i < n; ++i) {
      if (part[i] == me) shard.read_row(local[i], out + static_cast<std::size_t>(i) * d);
      else ++send_counts[static_cast<std::size_t>(part[i])];
    }
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    if (i + kAhead < n && part[i + kAhead] == me) {
      const float* next = rows + static_cast<std::size_t>(local[i + kAhead]) * d;
      for (std::size_t b = 0; b < d; b += 16) __builtin_prefetch(next + b);
    }
    if (part[i] == me) std::memcpy(out + static_cast<std::size_t>(i) * d, rows + static_cast<std::size_t>(local[i]) * d, d * sizeof(float));
    else ++send_counts[static_cast<std::size_t>(part[i])];
  }
}

EmbeddingShard make_shard(const PartitionBook& book, int part, const EmbeddingOptions& o) {
  return EmbeddingShard(book.partid2nids(part, Device{}).to_host(), o.dim, o.storage, o.seed, o.init_scale, o.optimizer,
                        o.device);
}

}  // namespace

DistEmbedding::DistEmbedding(std::shared_ptr<const PartitionBook> book, EmbeddingOptions opts,
                             EmbeddingTransport& transport)
    : book_(std::move(book)),
      opts_(opts),
      tp_(transport),
      shard_((book_ && book_->num_parts() == transport.world_size() && opts.dim >= 1)
                 ? make_shard(*book_, transport.rank(), opts)
                 : throw std::invalid_argument("DistEmbedding: the book must have one part per rank (" +
                                               std::to_string(book_ ? book_->num_parts() : 0) + " parts, " +
                                               std::to_string(transport.world_size()) + " ranks) and dim >= 1, got " +
                                               std::to_string(opts.dim))) {}

DistEmbedding::RemoteRows DistEmbedding::fetch_remote(const std::int32_t* part, const void* local, IdType type, std::int64_t n,
                                                      std::vector<std::int64_t> send_counts, const ServeRows& serve) {
  const int ws = tp_.world_size();
  const int me = tp_.rank();
  const std::int64_t dim = opts_.dim;
  // Requests grouped by owner, in position order within each owner.
  std::vector<std::int64_t> fill(static_cast<std::size_t>(ws), 0);
  for (int r = 1; r < ws; ++r) fill[static_cast<std::size_t>(r)] = fill[static_cast<std::size_t>(r) - 1] + send_counts[static_cast<std::size_t>(r) - 1];
  const std::int64_t asked = fill.back() + send_counts.back();
  std::vector<std::int64_t> request(static_cast<std::size_t>(asked));
  RemoteRows out;
  out.where.resize(request.size());
  for (std::int64_t i = 0; i < n; ++i) {
    if (part[i] == me) continue;
    const auto k = static_cast<std::size_t>(fill[static_cast<std::size_t>(part[i])]++);
    request[k] = id_at(local, type, i);
    out.where[k] = i;
  }
  std::vector<std::int64_t> recv_counts;
  const auto incoming = tp_.exchange_ids(request, send_counts, recv_counts);
  for (const auto l : incoming) {
    if (l < 0 || l >= shard_.rows()) {
      throw std::out_of_range("rank " + std::to_string(me) + " was asked for local row " + std::to_string(l) +
                              " of a part with " + std::to_string(shard_.rows()) + " rows");
    }
  }
  std::vector<float> reply(incoming.size() * static_cast<std::size_t>(dim));
  if (!incoming.empty()) serve(incoming, reply.data());
  std::vector<std::int64_t> reply_send(static_cast<std::size_t>(ws)), reply_recv(static_cast<std::size_t>(ws));
  for (int r = 0; r < ws; ++r) {
    reply_send[static_cast<std::size_t>(r)] = recv_counts[static_cast<std::size_t>(r)] * dim;
    reply_recv[static_cast<std::size_t>(r)] = send_counts[static_cast<std::size_t>(r)] * dim;
  }
  out.rows = tp_.exchange_values(reply, reply_send, reply_recv);
  return out;
}

EmbeddingRows DistEmbedding::pull(IdSpan ids) {
  if (shard_.device().is_cuda()) return pull_on_device(ids);
  const int ws = tp_.world_size();
  const int me = tp_.rank();
  const std::int64_t dim = opts_.dim;
  const auto d = static_cast<std::size_t>(dim);
  std::vector<std::int64_t> host_copy;
  IdSpan h = ids;
  if (ids.device.is_cuda()) {
    host_copy = to_host_i64(ids);
    h = IdSpan{host_copy.data(), ids.size, IdType::kI64, Device{}};
  }
  book_->nid2partid(h, parts_);
  book_->nid2localnid(h, locals_);
  const auto* part = static_cast<const std::int32_t*>(parts_.data());
  const void* local = locals_.data();
  const std::int64_t n = h.size;

  std::unique_ptr<float[]> out(new float[static_cast<std::size_t>(n) * d]);  // every value is written below
  std::vector<std::int64_t> send_counts(static_cast<std::size_t>(ws), 0);
  if (h.type == IdType::kI32) gather_local(shard_, part, static_cast<const std::int32_t*>(local), n, me, out.get(), send_counts);
  else gather_local(shard_, part, static_cast<const std::int64_t*>(local), n, me, out.get(), send_counts);
  const auto remote = fetch_remote(part, local, h.type, n, std::move(send_counts),
                                   [&](const std::vector<std::int64_t>& asked, float* reply) {
                                     for (std::size_t k = 0; k < asked.size(); ++k) shard_.read_row(asked[k], reply + k * d);
                                   });
  const auto& where = remote.where;
  const auto& answers = remote.rows;
  for (std::size_t k = 0; k < where.size(); ++k) {
    std::memcpy(out.get() + static_cast<std::size_t>(where[k]) * d, answers.data() + k * d, d * sizeof(float));
  }
  pulled_bytes_ += n * dim * static_cast<std::int64_t>(sizeof(float));
  return EmbeddingRows(n, dim, std::move(out), ids.device);
}

EmbeddingRows DistEmbedding::pull_on_device(IdSpan ids) {
#if LOCKSTEP_HAVE_CUDA_KERNELS
  const int ws = tp_.world_size();
  const int me = tp_.rank();
  const std::int64_t dim = opts_.dim;
  const auto d = static_cast<std::size_t>(dim);
  const Device dev = shard_.device();
  const std::int64_t n = ids.size;
  cuda_set_device(dev.index);
  // The ids on the shard's device (a copy when they live elsewhere); lookups run there.
  IdArray moved;
  IdSpan on = ids;
  if (!(ids.device == dev)) {
    moved = IdArray::from_host(to_host_i64(ids), ids.type, dev);
    on = moved.span();
  }
  book_->nid2partid(on, parts_);
  book_->nid2localnid(on, locals_);
  CudaBuffer out(static_cast<std::size_t>(n) * d * sizeof(float));
  auto* rows = static_cast<float*>(out.data());
  const auto* part_d = static_cast<const std::int32_t*>(parts_.data());
  shard_.gather(locals_.data(), locals_.type(), part_d, me, n, rows);  // this rank's own rows

  // Remote rows: the owners and local ids to the host, then as the host path.
  std::vector<std::int32_t> part(static_cast<std::size_t>(n));
  std::vector<unsigned char> local(static_cast<std::size_t>(n) * id_size(locals_.type()));
  if (n > 0) {
    cuda_copy_to_host(part.data(), parts_.data(), part.size() * sizeof(std::int32_t));
    cuda_copy_to_host(local.data(), locals_.data(), local.size());
  }
  std::vector<std::int64_t> send_counts(static_cast<std::size_t>(ws), 0);
  for (const auto p : part) {
    if (p != me) ++send_counts[static_cast<std::size_t>(p)];
  }
  const auto remote = fetch_remote(part.data(), local.data(), locals_.type(), n, std::move(send_counts),
                                   [&](const std::vector<std::int64_t>& asked, float* reply) {
                                     const CudaBuffer asked_d = cuda_upload(asked);
                                     CudaBuffer reply_d(asked.size() * d * sizeof(float));
                                     shard_.gather(asked_d.data(), IdType::kI64, nullptr, me, static_cast<std::int64_t>(asked.size()),
                                                   static_cast<float*>(reply_d.data()));
                                     cuda_copy_to_host(reply, reply_d.data(), asked.size() * d * sizeof(float));
                                   });
  const auto& where = remote.where;
  const auto& answers = remote.rows;
  if (!where.empty()) {
    const CudaBuffer answers_d = cuda_upload(answers), where_d = cuda_upload(where);
    cuda::scatter_rows(dev.index, static_cast<const float*>(answers_d.data()), static_cast<const std::int64_t*>(where_d.data()),
                       static_cast<std::int64_t>(where.size()), dim, rows);
  }
  pulled_bytes_ += n * dim * static_cast<std::int64_t>(sizeof(float));
  if (ids.device == dev) return EmbeddingRows(n, dim, std::move(out), dev);
  std::unique_ptr<float[]> host(new float[static_cast<std::size_t>(n) * d]);
  if (n > 0) cuda_copy_to_host(host.get(), out.data(), static_cast<std::size_t>(n) * d * sizeof(float));
  return EmbeddingRows(n, dim, std::move(host), ids.device);
#else
  (void)ids;
  throw std::logic_error("unreachable: a CUDA shard needs the CUDA kernels");
#endif
}

void DistEmbedding::accumulate_grad(IdSpan ids, const float* grads) {
  const auto host = to_host_i64(ids);
  for (auto id : host) {
    if (id < 0 || id >= num_rows()) {
      throw std::out_of_range("gradient for id " + std::to_string(id) + ", outside [0, " + std::to_string(num_rows()) + ")");
    }
  }
  pending_ids_.insert(pending_ids_.end(), host.begin(), host.end());
  pending_grads_.insert(pending_grads_.end(), grads, grads + host.size() * static_cast<std::size_t>(opts_.dim));
}

void DistEmbedding::step() {
  const int ws = tp_.world_size();
  const std::int64_t dim = opts_.dim;
  const auto d = static_cast<std::size_t>(dim);
  ++t_;
  const IdSpan pending{pending_ids_.data(), static_cast<std::int64_t>(pending_ids_.size()), IdType::kI64, Device{}};
  const auto owner = book_->nid2partid(pending).to_host();
  std::vector<std::int64_t> send_counts(static_cast<std::size_t>(ws), 0);
  for (auto p : owner) ++send_counts[static_cast<std::size_t>(p)];
  std::vector<std::int64_t> fill(static_cast<std::size_t>(ws), 0);
  for (int r = 1; r < ws; ++r) fill[static_cast<std::size_t>(r)] = fill[static_cast<std::size_t>(r) - 1] + send_counts[static_cast<std::size_t>(r) - 1];
  std::vector<std::int64_t> ids(pending_ids_.size());
  std::vector<float> grads(pending_grads_.size());
  for (std::size_t i = 0; i < owner.size(); ++i) {  // stable: recording order within each owner
    const auto k = static_cast<std::size_t>(fill[static_cast<std::size_t>(owner[i])]++);
    ids[k] = pending_ids_[i];
    std::memcpy(grads.data() + k * d, pending_grads_.data() + i * d, d * sizeof(float));
  }
  pending_ids_.clear();
  pending_grads_.clear();

  std::vector<std::int64_t> recv_counts;
  const auto in_ids = tp_.exchange_ids(ids, send_counts, recv_counts);
  std::vector<std::int64_t> gs(static_cast<std::size_t>(ws)), gr(static_cast<std::size_t>(ws));
  for (int r = 0; r < ws; ++r) {
    gs[static_cast<std::size_t>(r)] = send_counts[static_cast<std::size_t>(r)] * dim;
    gr[static_cast<std::size_t>(r)] = recv_counts[static_cast<std::size_t>(r)] * dim;
  }
  const auto in_grads = tp_.exchange_values(grads, gs, gr);

  // Arrivals are in source-rank order, each source's in its recording order.
  auto local_of = [&](const std::vector<std::int64_t>& global) {
    return book_->global2local(tp_.rank(), IdSpan{global.data(), static_cast<std::int64_t>(global.size()), IdType::kI64, Device{}}).to_host();
  };
  if (!opts_.lost_update_bug) {
    const auto n = static_cast<std::int64_t>(in_ids.size());
    const auto groups = group_duplicates(in_ids.data(), n);
    shard_.update_rows(local_of(groups.ids), groups, in_grads.data(), n, opts_.reduce, t_);
    return;
  }
  std::map<std::int64_t, std::vector<std::vector<float>>> groups;  // id -> per-source reduced rows
  std::size_t at = 0;
  for (int r = 0; r < ws; ++r) {
    const auto cnt = static_cast<std::size_t>(recv_counts[static_cast<std::size_t>(r)]);
    const auto red = reduce_duplicates(in_ids.data() + at, in_grads.data() + at * d, static_cast<std::int64_t>(cnt), dim, opts_.reduce);
    for (std::size_t k = 0; k < red.ids.size(); ++k) groups[red.ids[k]].emplace_back(red.grads.begin() + static_cast<std::ptrdiff_t>(k * d), red.grads.begin() + static_cast<std::ptrdiff_t>((k + 1) * d));
    at += cnt;
  }
  std::vector<std::int64_t> keys;
  for (const auto& [id, g] : groups) keys.push_back(id);
  const auto local = local_of(keys);
  std::size_t k = 0;
  for (const auto& [id, g] : groups) {
    if (g.size() == 1) shard_.update_row(local[k], g[0].data(), t_);
    else shard_.update_row_racy(local[k], g, t_);
    ++k;
  }
}

std::shared_ptr<const PartitionBook> even_range_book(std::int64_t rows, int parts) {
  if (parts < 1) throw std::invalid_argument("even_range_book: parts must be >= 1, got " + std::to_string(parts));
  std::vector<std::int64_t> offsets{0};
  for (int p = 0; p < parts; ++p) offsets.push_back(offsets.back() + rows / parts + (p < rows % parts ? 1 : 0));
  return std::make_shared<RangePartitionBook>(std::move(offsets));
}

}  // namespace lockstep::ref
