#include "reference/sampling/relabel.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "lockstep/config.h"
#include "reference/sampling/relabel_one.h"
#if LOCKSTEP_HAVE_CUDA_KERNELS
#include "reference/sampling/cuda/relabel.h"
#endif

namespace lockstep::ref {

namespace {

void require_i64(IdSpan s, const char* what) {
  if (s.type != IdType::kI64) throw std::invalid_argument(std::string(what) + ": int64 ids only, got " + to_string(s.type));
  if (s.size < 0 || (s.size > 0 && s.data == nullptr)) {
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(s.size) + " ids at a null or negative span");
  }
  const auto missing = cuda_device_unavailable(s.device);
  if (!missing.empty()) throw std::runtime_error(std::string(what) + ": ids are on " + to_string(s.device) + " but " + missing);
}

// The host path: relabel_one.h's steps with std::stable_sort and sequential scans.
Relabelled relabel_host(const std::int64_t* v, std::int64_t n) {
  const auto N = static_cast<std::size_t>(n);
  std::vector<std::int64_t> positions(N), sorted(N), run(N), first(N), id(N);
  std::iota(positions.begin(), positions.end(), 0);
  std::stable_sort(positions.begin(), positions.end(), [&](std::int64_t a, std::int64_t b) { return v[a] < v[b]; });
  for (std::size_t k = 0; k < N; ++k) sorted[k] = v[positions[k]];
  for (std::int64_t k = 0; k < n; ++k) run[static_cast<std::size_t>(k)] = relabel_one::run_start(sorted.data(), k);
  for (std::size_t k = 1; k < N; ++k) run[k] = std::max(run[k], run[k - 1]);  // inclusive max-scan
  for (std::int64_t k = 0; k < n; ++k) {
    first[static_cast<std::size_t>(positions[static_cast<std::size_t>(k)])] = relabel_one::first_position(positions.data(), run.data(), k);
  }
  std::int64_t count = 0;
  for (std::int64_t p = 0; p < n; ++p) {  // exclusive sum of the first-appearance marks
    id[static_cast<std::size_t>(p)] = count;
    count += relabel_one::first_mark(first.data(), p);
  }
  Relabelled out{IdArray(IdType::kI64, count, Device{}), IdArray(IdType::kI64, n, Device{})};
  auto* local = static_cast<std::int64_t*>(out.local.data());
  auto* unique = static_cast<std::int64_t*>(out.unique.data());
  for (std::int64_t p = 0; p < n; ++p) relabel_one::relabel_position(v, first.data(), id.data(), p, local, unique);
  return out;
}

#if !LOCKSTEP_HAVE_CUDA_KERNELS
// A host array's copy on `device` (itself for the host).
IdArray to_device(IdArray host, Device device) {
  if (!device.is_cuda()) return host;
  return IdArray::from_host(host.to_host(), IdType::kI64, device);
}
#endif

}  // namespace

Relabelled relabel_first_appearance(IdSpan values) {
  require_i64(values, "relabel_first_appearance");
  const Device dev = values.device;
  if (!dev.is_cuda()) return relabel_host(static_cast<const std::int64_t*>(values.data), values.size);
#if LOCKSTEP_HAVE_CUDA_KERNELS
  Relabelled out{IdArray(), IdArray(IdType::kI64, values.size, dev)};
  IdArray unique(IdType::kI64, values.size, dev);  // room for every value being distinct
  const std::int64_t count = cuda::relabel_first_appearance(dev.index, static_cast<const std::int64_t*>(values.data), values.size,
                                                            static_cast<std::int64_t*>(out.local.data()),
                                                            static_cast<std::int64_t*>(unique.data()));
  out.unique = IdArray(IdType::kI64, count, dev);
  if (count > 0) cuda_copy_on_device(out.unique.data(), unique.data(), static_cast<std::size_t>(count) * sizeof(std::int64_t));
  return out;
#else
  const auto host = to_host_i64(values);
  Relabelled h = relabel_host(host.data(), values.size);
  return Relabelled{to_device(std::move(h.unique), dev), to_device(std::move(h.local), dev)};
#endif
}

IdArray edge_destinations(IdSpan counts, std::int64_t edges) {
  require_i64(counts, "edge_destinations");
  const Device dev = counts.device;
  IdArray out(IdType::kI64, edges, dev);
  const auto sum_is_not = [&](std::int64_t total) {
    return std::invalid_argument("edge_destinations: the counts sum to " + std::to_string(total) + ", not " + std::to_string(edges));
  };
#if LOCKSTEP_HAVE_CUDA_KERNELS
  if (dev.is_cuda()) {
    const std::int64_t total = cuda::edge_destinations(dev.index, static_cast<const std::int64_t*>(counts.data), counts.size,
                                                       edges, static_cast<std::int64_t*>(out.data()));
    if (total != edges) throw sum_is_not(total);
    return out;
  }
#endif
  const auto c = to_host_i64(counts);
  std::vector<std::int64_t> offsets(c.size() + 1, 0), dst(static_cast<std::size_t>(edges));
  for (std::size_t d = 0; d < c.size(); ++d) offsets[d + 1] = offsets[d] + c[d];
  if (offsets.back() != edges) throw sum_is_not(offsets.back());
  for (std::int64_t d = 0; d < counts.size; ++d) relabel_one::fill_destination(offsets.data(), d, dst.data());
  if (!dev.is_cuda()) {
    if (edges > 0) std::memcpy(out.data(), dst.data(), dst.size() * sizeof(std::int64_t));
    return out;
  }
  return IdArray::from_host(dst, IdType::kI64, dev);
}

IdArray concat(IdSpan a, IdSpan b) {
  require_i64(a, "concat");
  require_i64(b, "concat");
  if (!(a.device == b.device)) throw std::invalid_argument("concat: arrays on " + to_string(a.device) + " and " + to_string(b.device));
  IdArray out(IdType::kI64, a.size + b.size, a.device);
  const std::size_t abytes = static_cast<std::size_t>(a.size) * sizeof(std::int64_t);
  const std::size_t bbytes = static_cast<std::size_t>(b.size) * sizeof(std::int64_t);
  auto* dst = static_cast<unsigned char*>(out.data());
  if (a.device.is_cuda()) {
    cuda_set_device(a.device.index);
    if (abytes) cuda_copy_on_device(dst, a.data, abytes);
    if (bbytes) cuda_copy_on_device(dst + abytes, b.data, bbytes);
  } else {
    if (abytes) std::memcpy(dst, a.data, abytes);
    if (bbytes) std::memcpy(dst + abytes, b.data, bbytes);
  }
  return out;
}

}  // namespace lockstep::ref
