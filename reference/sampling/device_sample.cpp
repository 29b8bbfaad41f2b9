#include "reference/sampling/device_sample.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "lockstep/config.h"
#include "reference/sampling/relabel.h"
#if LOCKSTEP_HAVE_CUDA_KERNELS
#include "reference/sampling/cuda/sample.h"
#endif

namespace lockstep::ref {

const std::vector<const void*>& SampleRows::on(int device) const {
  const CsrGraph& g = *rows_;
  return mirror_->on(device, {{g.indptr.data(), g.indptr.size() * sizeof(std::int64_t)},
                              {g.indices.data(), g.indices.size() * sizeof(std::int64_t)},
                              {g.edge_ids.data(), g.edge_ids.size() * sizeof(std::int64_t)}});
}

DeviceHopSample sample_hop(const SampleRows& rows, IdSpan nodes, std::int64_t fanout,
                           bool replace, const SampleKey& key) {
  const CsrGraph& g = rows.host();
  if (nodes.size < 0 || (nodes.size > 0 && nodes.data == nullptr)) {
    throw std::invalid_argument("sample_hop: " + std::to_string(nodes.size) +
                                " nodes at a null or negative span");
  }
  const Device dev = nodes.device;
  const std::string missing = cuda_device_unavailable(dev);
  if (!missing.empty()) {
    throw std::runtime_error("sample_hop: nodes are on " + to_string(dev) + " but " + missing);
  }
  const auto through_host = [&] {
    const HopSample h = sample_hop(g, to_host_i64(nodes), fanout, replace, key);
    return DeviceHopSample{IdArray::from_host(h.counts, IdType::kI64, dev),
                           IdArray::from_host(h.nbrs, IdType::kI64, dev),
                           IdArray::from_host(h.eids, IdType::kI64, dev)};
  };
#if !LOCKSTEP_HAVE_CUDA_KERNELS
  return through_host();
#else
  if (!dev.is_cuda()) return through_host();
  // The host's argument checks and messages (no nodes: nothing is sampled).
  sample_hop(g, std::vector<std::int64_t>{}, fanout, replace, key);
  const std::uint64_t hop_key = sample_hop_key(key);
  const auto& d = rows.on(dev.index);
  const cuda::CsrRows device_rows{static_cast<const std::int64_t*>(d[0]),
                                  static_cast<const std::int64_t*>(d[1]),
                                  static_cast<const std::int64_t*>(d[2]), g.num_nodes};
  const bool int32_ids = nodes.type == IdType::kI32;
  DeviceHopSample out;
  out.counts = IdArray(IdType::kI64, nodes.size, dev);
  CudaBuffer offsets(static_cast<std::size_t>(nodes.size + 1) * sizeof(std::int64_t));
  std::int64_t total = 0;
  const std::int64_t bad = cuda::sample_hop_plan(
      dev.index, device_rows, nodes.data, int32_ids, nodes.size, fanout, replace,
      static_cast<std::int64_t*>(out.counts.data()), static_cast<std::int64_t*>(offsets.data()),
      &total);
  if (bad >= 0) {
    // Name the first bad node as the host does (the kernel found one at least).
    sample_hop(g, to_host_i64(nodes), fanout, replace, key);
    throw std::logic_error("sample_hop: the device found a bad node that the host did not");
  }
  out.nbrs = IdArray(IdType::kI64, total, dev);
  out.eids = IdArray(IdType::kI64, total, dev);
  // Only a draw without replacement of more than kDrawInThread neighbors keeps its displaced
  // entries in device memory.
  CudaBuffer scratch;
  if (!replace && fanout > cuda::kDrawInThread) scratch = CudaBuffer(static_cast<std::size_t>(total) * sizeof(std::int64_t));
  cuda::sample_hop_draw(dev.index, device_rows, nodes.data, int32_ids, nodes.size, fanout,
                        replace, hop_key, static_cast<const std::int64_t*>(offsets.data()),
                        static_cast<std::int64_t*>(out.nbrs.data()),
                        static_cast<std::int64_t*>(out.eids.data()),
                        static_cast<std::int64_t*>(scratch.data()));
  return out;
#endif
}

SampledBlocks DeviceSampledBlocks::to_host() const {
  SampledBlocks out;
  out.seeds = seeds.to_host();
  out.seed_to_output = seed_to_output.to_host();
  for (const auto& b : blocks) {
    out.blocks.push_back(Block{b.dst_nodes.to_host(), b.src_nodes.to_host(), b.edge_src.to_host(),
                               b.edge_dst.to_host(), b.edge_ids.to_host()});
  }
  return out;
}

DeviceSampledBlocks sample_neighbors(const SampleRows& rows, IdSpan seeds, const SampleOptions& options,
                                     const SampleKey& key) {
  sample_neighbors(rows.host(), std::vector<std::int64_t>{}, options, key);  // the host's checks and messages
  const Device dev = seeds.device;
  const IdSpan none{nullptr, 0, IdType::kI64, dev};
  if (options.fanouts.empty() && seeds.size > 0) {  // no hop draws from the seeds to check them
    sample_neighbors(rows.host(), to_host_i64(seeds), options, key);
  }
  DeviceSampledBlocks out;
  out.seeds = concat(seeds, none);
  Relabelled unique_seeds = relabel_first_appearance(seeds);
  out.seed_to_output = std::move(unique_seeds.local);
  IdArray frontier = std::move(unique_seeds.unique);
  for (std::size_t h = 0; h < options.fanouts.size(); ++h) {
    SampleKey at_hop = key;
    at_hop.hop = static_cast<std::int64_t>(h);
    DeviceHopSample drawn = sample_hop(rows, frontier.span(), options.fanouts[h], options.replace, at_hop);
    const std::int64_t n = frontier.size(), edges = drawn.nbrs.size();
    const IdArray candidates = concat(frontier.span(), drawn.nbrs.span());
    Relabelled r = relabel_first_appearance(candidates.span());
    DeviceBlock b;
    b.edge_src = concat(IdSpan{static_cast<const std::int64_t*>(r.local.data()) + n, edges, IdType::kI64, dev}, none);
    b.edge_dst = edge_destinations(drawn.counts.span(), edges);
    b.edge_ids = std::move(drawn.eids);
    b.dst_nodes = std::move(frontier);
    frontier = concat(r.unique.span(), none);  // the next hop's frontier: this hop's src_nodes
    b.src_nodes = std::move(r.unique);
    out.blocks.push_back(std::move(b));
  }
  return out;
}

}  // namespace lockstep::ref
