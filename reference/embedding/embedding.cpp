#include "reference/embedding/embedding.h"

#include <cstring>
#include <map>
#include <stdexcept>

#include "lockstep/config.h"
#if LOCKSTEP_HAVE_CUDA_KERNELS
#include "reference/embedding/cuda/embedding.h"
#endif

namespace lockstep::ref {

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
    for (std::size_t k = 0; k + 1 < groups.ptr.size(); ++k) reduced_duplicate_rows_ += groups.ptr[k + 1] - groups.ptr[k] > 1;
    shard_.update_rows(local_of(groups.ids), groups, in_grads.data(), n, opts_.reduce, t_);
    return;
  }
  std::map<std::int64_t, std::vector<std::vector<float>>> groups;  // id -> per-source reduced rows
  std::size_t at = 0;
  for (int r = 0; r < ws; ++r) {
    const auto cnt = static_cast<std::size_t>(recv_counts[static_cast<std::size_t>(r)]);
    const auto red = reduce_duplicates(in_ids.data() + at, in_grads.data() + at * d, static_cast<std::int64_t>(cnt), dim, opts_.reduce);
    for (auto c : red.counts) reduced_duplicate_rows_ += c > 1;
    for (std::size_t k = 0; k < red.ids.size(); ++k) groups[red.ids[k]].emplace_back(red.grads.begin() + static_cast<std::ptrdiff_t>(k * d), red.grads.begin() + static_cast<std::ptrdiff_t>((k + 1) * d));
    at += cnt;
  }
  std::vector<std::int64_t> keys;
  for (const auto& [id, g] : groups) keys.push_back(id);
  const auto local = local_of(keys);
  std::size_t k = 0;
  for (const auto& [id, g] : groups) {
    if (g.size() == 1) {
      shard_.update_row(local[k], g[0].data(), t_);
    } else {
      shard_.update_row_racy(local[k], g, t_);
      ++multi_source_rows_;
    }
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
