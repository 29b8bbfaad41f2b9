// Compiled with -ffp-contract=off (reference/CMakeLists.txt): the update order in embedding.h
// is exact only if no multiply-add is fused.
#include "reference/embedding/embedding.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
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

ReducedGrads reduce_duplicates(const std::int64_t* ids, const float* grads, std::int64_t n, std::int64_t dim,
                               DuplicateReduce mode) {
  if (dim < 1) throw std::invalid_argument("reduce_duplicates: dim must be >= 1, got " + std::to_string(dim));
  if (n < 0) throw std::invalid_argument("reduce_duplicates: n must be >= 0, got " + std::to_string(n));
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return ids[a] < ids[b]; });
  ReducedGrads out;
  const auto d = static_cast<std::size_t>(dim);
  for (std::size_t k = 0; k < order.size();) {
    const std::int64_t id = ids[order[k]];
    const std::size_t at = out.grads.size();
    out.ids.push_back(id);
    out.grads.resize(at + d, 0.0f);  // accumulation starts from +0.0f, as a zeroed grad does
    std::int64_t count = 0;
    for (; k < order.size() && ids[order[k]] == id; ++k, ++count) {
      const float* g = grads + static_cast<std::size_t>(order[k]) * d;
      for (std::size_t c = 0; c < d; ++c) out.grads[at + c] = out.grads[at + c] + g[c];
    }
    out.counts.push_back(count);
    if (mode == DuplicateReduce::kMean) {
      const float k_f = static_cast<float>(count);
      for (std::size_t c = 0; c < d; ++c) out.grads[at + c] = out.grads[at + c] / k_f;
    }
  }
  return out;
}

void apply_update(const OptimizerOptions& opt, std::int64_t t, std::int64_t dim, const float* g, float* w, float* s1,
                  float* s2) {
  const float lr = static_cast<float>(opt.lr);
  const float eps = static_cast<float>(opt.resolved_eps());
  switch (opt.kind) {
    case OptimizerKind::kSgd:
      for (std::int64_t c = 0; c < dim; ++c) w[c] = w[c] - lr * g[c];
      return;
    case OptimizerKind::kAdagrad:
      for (std::int64_t c = 0; c < dim; ++c) {
        s1[c] = s1[c] + g[c] * g[c];
        w[c] = w[c] - lr * (g[c] / (std::sqrt(s1[c]) + eps));
      }
      return;
    case OptimizerKind::kAdam: {
      const float b1 = static_cast<float>(1.0 - opt.beta1);
      const float b2 = static_cast<float>(1.0 - opt.beta2);
      const double bc1 = 1.0 - std::pow(opt.beta1, static_cast<double>(t));
      const double bc2 = 1.0 - std::pow(opt.beta2, static_cast<double>(t));
      const float neg_step = static_cast<float>(-(opt.lr * std::sqrt(bc2) / bc1));
      for (std::int64_t c = 0; c < dim; ++c) {
        s1[c] = (g[c] - s1[c]) * b1 + s1[c];
        s2[c] = (g[c] * g[c] - s2[c]) * b2 + s2[c];
        w[c] = w[c] + neg_step * (s1[c] / (std::sqrt(s2[c]) + eps));
      }
      return;
    }
  }
}

EmbeddingShard::EmbeddingShard(std::vector<std::int64_t> global_ids, std::int64_t dim, Storage storage,
                               std::uint64_t seed, double init_scale, const OptimizerOptions& opt)
    : global_ids_(std::move(global_ids)), dim_(dim), storage_(storage), opt_(opt) {
  if (dim < 1) throw std::invalid_argument("embedding dim must be >= 1, got " + std::to_string(dim));
  const auto n = static_cast<std::size_t>(rows()) * static_cast<std::size_t>(dim);
  if (storage_ == Storage::kF32) f32_.resize(n);
  else half_.resize(n);
  std::vector<float> w(static_cast<std::size_t>(dim));
  for (std::int64_t l = 0; l < rows(); ++l) {
    for (std::int64_t c = 0; c < dim; ++c) w[static_cast<std::size_t>(c)] = embedding_init(seed, global_ids_[static_cast<std::size_t>(l)], c, init_scale);
    store_row(l, w.data());
  }
  if (opt_.kind == OptimizerKind::kAdagrad) s1_.assign(n, static_cast<float>(opt_.initial_accumulator_value));
  if (opt_.kind == OptimizerKind::kAdam) {
    s1_.assign(n, 0.0f);
    s2_.assign(n, 0.0f);
  }
}

void EmbeddingShard::read_row(std::int64_t l, float* out) const {
  const auto at = static_cast<std::size_t>(l) * static_cast<std::size_t>(dim_);
  switch (storage_) {
    case Storage::kF32: std::memcpy(out, f32_.data() + at, static_cast<std::size_t>(dim_) * sizeof(float)); return;
    case Storage::kBF16:
      for (std::int64_t c = 0; c < dim_; ++c) out[c] = bf16_to_float(half_[at + static_cast<std::size_t>(c)]);
      return;
    case Storage::kF16:
      for (std::int64_t c = 0; c < dim_; ++c) out[c] = f16_to_float(half_[at + static_cast<std::size_t>(c)]);
      return;
  }
}

std::vector<float> EmbeddingShard::to_f32() const {
  std::vector<float> out(static_cast<std::size_t>(rows() * dim_));
  for (std::int64_t l = 0; l < rows(); ++l) read_row(l, out.data() + l * dim_);
  return out;
}

void EmbeddingShard::store_row(std::int64_t l, const float* w) {
  const auto at = static_cast<std::size_t>(l) * static_cast<std::size_t>(dim_);
  switch (storage_) {
    case Storage::kF32: std::memcpy(f32_.data() + at, w, static_cast<std::size_t>(dim_) * sizeof(float)); return;
    case Storage::kBF16:
      for (std::int64_t c = 0; c < dim_; ++c) half_[at + static_cast<std::size_t>(c)] = float_to_bf16(w[c]);
      return;
    case Storage::kF16:
      for (std::int64_t c = 0; c < dim_; ++c) half_[at + static_cast<std::size_t>(c)] = float_to_f16(w[c]);
      return;
  }
}

void EmbeddingShard::update_row(std::int64_t l, const float* g, std::int64_t t) {
  const auto at = static_cast<std::size_t>(l) * static_cast<std::size_t>(dim_);
  std::vector<float> w(static_cast<std::size_t>(dim_));
  read_row(l, w.data());
  apply_update(opt_, t, dim_, g, w.data(), s1_.empty() ? nullptr : s1_.data() + at, s2_.empty() ? nullptr : s2_.data() + at);
  store_row(l, w.data());
}

void EmbeddingShard::update_row_racy(std::int64_t l, const std::vector<std::vector<float>>& groups, std::int64_t t) {
  const auto at = static_cast<std::size_t>(l) * static_cast<std::size_t>(dim_);
  const auto d = static_cast<std::size_t>(dim_);
  std::vector<float> w0(d), s10(s1_.empty() ? 0 : d), s20(s2_.empty() ? 0 : d);
  read_row(l, w0.data());  // every "thread" reads this snapshot before any of them writes
  if (!s1_.empty()) std::copy_n(s1_.data() + at, d, s10.data());
  if (!s2_.empty()) std::copy_n(s2_.data() + at, d, s20.data());
  for (const auto& g : groups) {
    std::vector<float> w = w0, s1 = s10, s2 = s20;
    apply_update(opt_, t, dim_, g.data(), w.data(), s1.empty() ? nullptr : s1.data(), s2.empty() ? nullptr : s2.data());
    store_row(l, w.data());  // the last writer wins
    if (!s1.empty()) std::copy_n(s1.data(), d, s1_.data() + at);
    if (!s2.empty()) std::copy_n(s2.data(), d, s2_.data() + at);
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
  return EmbeddingShard(book.partid2nids(part, Device{}).to_host(), o.dim, o.storage, o.seed, o.init_scale, o.optimizer);
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

EmbeddingRows DistEmbedding::pull(IdSpan ids) {
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
  // Remote rows: requests grouped by owner, in position order within each owner.
  std::vector<std::int64_t> start(static_cast<std::size_t>(ws) + 1, 0);
  for (int r = 0; r < ws; ++r) start[static_cast<std::size_t>(r) + 1] = start[static_cast<std::size_t>(r)] + send_counts[static_cast<std::size_t>(r)];
  std::vector<std::int64_t> request(static_cast<std::size_t>(start.back())), where(request.size());
  {
    std::vector<std::int64_t> fill(start.begin(), start.end() - 1);
    for (std::int64_t i = 0; i < n; ++i) {
      if (part[i] == me) continue;
      const auto k = static_cast<std::size_t>(fill[static_cast<std::size_t>(part[i])]++);
      request[k] = id_at(local, h.type, i);
      where[k] = i;
    }
  }
  std::vector<std::int64_t> recv_counts;
  const auto incoming = tp_.exchange_ids(request, send_counts, recv_counts);
  std::vector<float> reply(incoming.size() * d);
  for (std::size_t k = 0; k < incoming.size(); ++k) {
    if (incoming[k] < 0 || incoming[k] >= shard_.rows()) {
      throw std::out_of_range("rank " + std::to_string(me) + " was asked for local row " + std::to_string(incoming[k]) +
                              " of a part with " + std::to_string(shard_.rows()) + " rows");
    }
    shard_.read_row(incoming[k], reply.data() + k * d);
  }
  std::vector<std::int64_t> reply_send(static_cast<std::size_t>(ws)), reply_recv(static_cast<std::size_t>(ws));
  for (int r = 0; r < ws; ++r) {
    reply_send[static_cast<std::size_t>(r)] = recv_counts[static_cast<std::size_t>(r)] * dim;
    reply_recv[static_cast<std::size_t>(r)] = send_counts[static_cast<std::size_t>(r)] * dim;
  }
  const auto answers = tp_.exchange_values(reply, reply_send, reply_recv);
  for (std::size_t k = 0; k < where.size(); ++k) {
    std::memcpy(out.get() + static_cast<std::size_t>(where[k]) * d, answers.data() + k * d, d * sizeof(float));
  }
  pulled_bytes_ += n * dim * static_cast<std::int64_t>(sizeof(float));
  return EmbeddingRows(n, dim, std::move(out), ids.device);
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
    const auto red = reduce_duplicates(in_ids.data(), in_grads.data(), static_cast<std::int64_t>(in_ids.size()), dim, opts_.reduce);
    const auto local = local_of(red.ids);
    for (std::size_t k = 0; k < local.size(); ++k) shard_.update_row(local[k], red.grads.data() + k * d, t_);
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
