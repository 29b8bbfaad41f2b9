#include "reference/partition/book.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>

#include "lockstep/config.h"
#include "reference/partition/lookup_one.h"
#if LOCKSTEP_HAVE_CUDA_KERNELS
#include "reference/partition/cuda/lookup.h"
#endif

namespace lockstep::ref {

namespace {

// Below this many ids per thread, starting a thread costs more than it saves.
constexpr std::int64_t kMinIdsPerThread = std::int64_t{1} << 16;
// Slice boundaries are multiples of this many ids, so threads never share a cache line.
constexpr std::int64_t kSliceAlign = 64;

std::int64_t id_at(const void* ids, IdType type, std::int64_t i) {
  return type == IdType::kI32 ? static_cast<const std::int32_t*>(ids)[i]
                              : static_cast<const std::int64_t*>(ids)[i];
}

std::string range_text(std::int64_t end) { return "[0, " + std::to_string(end) + ")"; }

// What a lookup does with CUDA ids, for the message of require_device.
constexpr const char* kCudaPath = LOCKSTEP_HAVE_CUDA_KERNELS
                                      ? " (the reference looks CUDA ids up on their device)"
                                      : " (the reference copies CUDA ids to the host and back)";

// CUDA ids are looked up on their device, or staged through the host: either needs it.
void require_device(Device device, const char* what) {
  const std::string missing = cuda_device_unavailable(device);
  if (missing.empty()) return;
  throw std::runtime_error(std::string(what) + ": ids are on " + to_string(device) + " but " +
                           missing + kCudaPath);
}

}  // namespace

// ---- PartitionBook ----------------------------------------------------------------------

void PartitionBook::set_threads(int threads) {
  if (threads < 1) {
    throw std::invalid_argument("threads must be >= 1, got " + std::to_string(threads));
  }
  threads_ = threads;
}

void PartitionBook::check_part(int part) const {
  if (part < 0 || part >= num_parts()) {
    throw std::out_of_range("part " + std::to_string(part) + " is out of range " +
                            range_text(num_parts()));
  }
}

bool PartitionBook::parallel_all(std::int64_t n,
                                 const std::function<bool(std::int64_t, std::int64_t)>& fn) const {
  const std::int64_t t = std::clamp<std::int64_t>(n / kMinIdsPerThread, 1, threads_);
  if (t == 1) return fn(0, n);
  std::int64_t per = (n + t - 1) / t;
  per = (per + kSliceAlign - 1) / kSliceAlign * kSliceAlign;
  std::vector<char> ok(static_cast<std::size_t>(t), 1);
  {
    std::vector<std::jthread> workers;  // joined on scope exit, also when a start fails
    workers.reserve(static_cast<std::size_t>(t - 1));
    for (std::int64_t k = 1; k < t; ++k) {
      const std::int64_t begin = std::min(n, k * per);
      const std::int64_t end = std::min(n, begin + per);
      workers.emplace_back([&fn, &ok, k, begin, end] {
        ok[static_cast<std::size_t>(k)] = begin < end ? fn(begin, end) : true;
      });
    }
    ok[0] = fn(0, std::min(n, per));
  }
  return std::all_of(ok.begin(), ok.end(), [](char c) { return c != 0; });
}

void PartitionBook::run(Op op, int part, IdSpan ids, IdArray& out, const char* what) const {
  if (ids.size < 0) {
    throw std::invalid_argument(std::string(what) + ": id count must be >= 0, got " +
                                std::to_string(ids.size));
  }
  if (ids.size > 0 && ids.data == nullptr) {
    throw std::invalid_argument(std::string(what) + ": ids are null but their count is " +
                                std::to_string(ids.size));
  }
  if (op == Op::kLocalToGlobal || op == Op::kGlobalToLocal) check_part(part);
  require_device(ids.device, what);

  const IdType out_type = op == Op::kPartId ? IdType::kI32 : ids.type;
  if (out.type() != out_type || out.size() != ids.size || out.device() != ids.device) {
    out = IdArray(out_type, ids.size, ids.device);
  }
  if (ids.size == 0) return;
  if (!ids.device.is_cuda()) {
    if (!lookup_host(op, part, ids.data, ids.type, ids.size, out.data())) {
      report_invalid(op, part, ids.data, ids.type, ids.size);
    }
    return;
  }
  // With the kernels, the ids come to the host only to name an invalid one as the CPU does.
  if (LOCKSTEP_HAVE_CUDA_KERNELS && lookup_cuda(op, part, ids, out.data()) < 0) return;
  std::vector<unsigned char> host_ids(static_cast<std::size_t>(ids.size) * id_size(ids.type));
  cuda_copy_to_host(host_ids.data(), ids.data, host_ids.size());
  if (LOCKSTEP_HAVE_CUDA_KERNELS) report_invalid(op, part, host_ids.data(), ids.type, ids.size);
  IdArray host_out(out_type, ids.size, Device{});
  if (!lookup_host(op, part, host_ids.data(), ids.type, ids.size, host_out.data())) {
    report_invalid(op, part, host_ids.data(), ids.type, ids.size);
  }
  cuda_copy_to_device(out.data(), host_out.data(),
                      static_cast<std::size_t>(ids.size) * id_size(out_type));
}

void PartitionBook::report_invalid(Op op, int part, const void* ids, IdType type,
                                   std::int64_t n) const {
  const std::int64_t nodes = num_nodes();
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t v = id_at(ids, type, i);
    const std::string at = " at position " + std::to_string(i);
    if (op == Op::kLocalToGlobal) {
      const std::int64_t size = part_size(part);
      if (v < 0 || v >= size) {
        throw std::out_of_range("local id " + std::to_string(v) + at + " is out of range " +
                                range_text(size) + " of part " + std::to_string(part));
      }
      const std::int64_t g = to_global(part, v);
      if (type == IdType::kI32 && g > std::numeric_limits<std::int32_t>::max()) {
        throw std::out_of_range("global id " + std::to_string(g) + " of local id " +
                                std::to_string(v) + at + " does not fit int32");
      }
      continue;
    }
    if (v < 0 || v >= nodes) {
      throw std::out_of_range("node id " + std::to_string(v) + at + " is out of range " +
                              range_text(nodes));
    }
    if (op == Op::kGlobalToLocal && owner(v) != part) {
      throw std::out_of_range("node id " + std::to_string(v) + at + " is not owned by part " +
                              std::to_string(part) + " (its part is " + std::to_string(owner(v)) +
                              ")");
    }
  }
  throw std::logic_error("partition book: a lookup reported an invalid id but none was found");
}

IdArray PartitionBook::nid2partid(IdSpan ids) const {
  IdArray out;
  nid2partid(ids, out);
  return out;
}

IdArray PartitionBook::nid2localnid(IdSpan ids) const {
  IdArray out;
  nid2localnid(ids, out);
  return out;
}

void PartitionBook::nid2partid(IdSpan ids, IdArray& out) const {
  run(Op::kPartId, /*part=*/0, ids, out, "nid2partid");
}

void PartitionBook::nid2localnid(IdSpan ids, IdArray& out) const {
  run(Op::kLocalId, /*part=*/0, ids, out, "nid2localnid");
}

IdArray PartitionBook::local2global(int part, IdSpan local) const {
  IdArray out;
  run(Op::kLocalToGlobal, part, local, out, "local2global");
  return out;
}

IdArray PartitionBook::global2local(int part, IdSpan global) const {
  IdArray out;
  run(Op::kGlobalToLocal, part, global, out, "global2local");
  return out;
}

IdArray PartitionBook::partid2nids(int part, Device device, IdType type) const {
  check_part(part);
  require_device(device, "partid2nids");
  return IdArray::from_host(part_nodes(part), type, device);
}

// ---- RangePartitionBook -----------------------------------------------------------------

RangePartitionBook::RangePartitionBook(std::vector<std::int64_t> part_offsets)
    : offsets_(std::move(part_offsets)) {
  if (offsets_.size() < 2) {
    throw std::invalid_argument("part_offsets needs at least 2 entries (one part), got " +
                                std::to_string(offsets_.size()));
  }
  if (offsets_.size() - 1 > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    throw std::invalid_argument("part_offsets has " + std::to_string(offsets_.size()) +
                                " entries, more parts than int32 holds");
  }
  if (offsets_[0] != 0) {
    throw std::invalid_argument("part_offsets[0] must be 0, got " + std::to_string(offsets_[0]));
  }
  for (std::size_t p = 1; p < offsets_.size(); ++p) {
    if (offsets_[p] < offsets_[p - 1]) {
      throw std::invalid_argument("part_offsets[" + std::to_string(p) + "] = " +
                                  std::to_string(offsets_[p]) + " is less than part_offsets[" +
                                  std::to_string(p - 1) + "] = " + std::to_string(offsets_[p - 1]));
    }
  }
}

std::int64_t RangePartitionBook::part_size(int part) const {
  check_part(part);
  return offsets_[static_cast<std::size_t>(part) + 1] - offsets_[static_cast<std::size_t>(part)];
}

std::vector<std::int64_t> RangePartitionBook::part_nodes(int part) const {
  std::vector<std::int64_t> nodes(static_cast<std::size_t>(part_size(part)));
  std::iota(nodes.begin(), nodes.end(), offsets_[static_cast<std::size_t>(part)]);
  return nodes;
}

int RangePartitionBook::owner(std::int64_t id) const {
  return lookup_one::range_owner({offsets_.data(), num_parts()}, id);
}

std::int64_t RangePartitionBook::to_global(int part, std::int64_t local) const {
  return offsets_[static_cast<std::size_t>(part)] + local;
}

std::int64_t RangePartitionBook::lookup_cuda(Op op, int part, IdSpan ids, void* out) const {
#if LOCKSTEP_HAVE_CUDA_KERNELS
  const auto& d = mirror_->on(ids.device.index, {{offsets_.data(), offsets_.size() * 8}});
  return cuda::range_lookup(ids.device.index,
                            {static_cast<const std::int64_t*>(d[0]), num_parts()},
                            static_cast<int>(op), part, ids.data, ids.type == IdType::kI32,
                            ids.size, out);
#else
  (void)op, (void)part, (void)ids, (void)out;
  throw std::logic_error("RangePartitionBook::lookup_cuda: this build has no CUDA kernels");
#endif
}

// ---- MapPartitionBook -------------------------------------------------------------------

namespace {

int infer_num_parts(const std::vector<std::int32_t>& part_of) {
  if (part_of.empty()) {
    throw std::invalid_argument(
        "cannot infer the part count from an empty part_of; pass num_parts");
  }
  std::int32_t max = 0;
  for (std::size_t v = 0; v < part_of.size(); ++v) {
    if (part_of[v] < 0) {
      throw std::invalid_argument("part_of[" + std::to_string(v) +
                                  "] = " + std::to_string(part_of[v]) + " is negative");
    }
    max = std::max(max, part_of[v]);
  }
  if (max == std::numeric_limits<std::int32_t>::max()) {
    throw std::invalid_argument("part_of holds part " + std::to_string(max) +
                                ", more parts than int32 holds");
  }
  return max + 1;
}

}  // namespace

MapPartitionBook::MapPartitionBook(std::vector<std::int32_t> part_of)
    : MapPartitionBook(part_of, infer_num_parts(part_of)) {}

MapPartitionBook::MapPartitionBook(std::vector<std::int32_t> part_of, int num_parts)
    : part_of_(std::move(part_of)), num_parts_(num_parts) {
  if (num_parts_ < 1) {
    throw std::invalid_argument("num_parts must be >= 1, got " + std::to_string(num_parts_));
  }
  const std::size_t n = part_of_.size();
  ptr_.assign(static_cast<std::size_t>(num_parts_) + 1, 0);
  for (std::size_t v = 0; v < n; ++v) {
    const std::int32_t p = part_of_[v];
    if (p < 0 || p >= num_parts_) {
      throw std::invalid_argument("part_of[" + std::to_string(v) + "] = " + std::to_string(p) +
                                  " is out of range " + range_text(num_parts_));
    }
    ++ptr_[static_cast<std::size_t>(p) + 1];
  }
  std::partial_sum(ptr_.begin(), ptr_.end(), ptr_.begin());
  // A counting sort in node order keeps each part's nodes ascending.
  nodes_.resize(n);
  local_.resize(n);
  std::vector<std::int64_t> next(ptr_.begin(), ptr_.end() - 1);
  for (std::size_t v = 0; v < n; ++v) {
    const auto p = static_cast<std::size_t>(part_of_[v]);
    local_[v] = next[p] - ptr_[p];
    nodes_[static_cast<std::size_t>(next[p]++)] = static_cast<std::int64_t>(v);
  }
  if (num_parts_ <= 256) part8_.assign(part_of_.begin(), part_of_.end());
}

std::int64_t MapPartitionBook::part_size(int part) const {
  check_part(part);
  return ptr_[static_cast<std::size_t>(part) + 1] - ptr_[static_cast<std::size_t>(part)];
}

std::vector<std::int64_t> MapPartitionBook::part_nodes(int part) const {
  check_part(part);
  return {nodes_.begin() + ptr_[static_cast<std::size_t>(part)],
          nodes_.begin() + ptr_[static_cast<std::size_t>(part) + 1]};
}

int MapPartitionBook::owner(std::int64_t id) const {
  return part_of_[static_cast<std::size_t>(id)];
}

std::int64_t MapPartitionBook::lookup_cuda(Op op, int part, IdSpan ids, void* out) const {
#if LOCKSTEP_HAVE_CUDA_KERNELS
  const auto& d = mirror_->on(ids.device.index, {{part_of_.data(), part_of_.size() * 4},
                                                 {local_.data(), local_.size() * 8},
                                                 {ptr_.data(), ptr_.size() * 8},
                                                 {nodes_.data(), nodes_.size() * 8}});
  const lookup_one::MapTable table{static_cast<const std::int32_t*>(d[0]),
                                   static_cast<const std::int64_t*>(d[1]),
                                   static_cast<const std::int64_t*>(d[2]),
                                   static_cast<const std::int64_t*>(d[3]), num_nodes()};
  return cuda::map_lookup(ids.device.index, table, static_cast<int>(op), part, ids.data,
                          ids.type == IdType::kI32, ids.size, out);
#else
  (void)op, (void)part, (void)ids, (void)out;
  throw std::logic_error("MapPartitionBook::lookup_cuda: this build has no CUDA kernels");
#endif
}

std::int64_t MapPartitionBook::to_global(int part, std::int64_t local) const {
  return nodes_[static_cast<std::size_t>(ptr_[static_cast<std::size_t>(part)] + local)];
}

}  // namespace lockstep::ref
