// Workload "graph_lookup": partition lookup on a partitioned graph and the feature fetch built
// on it, as DistEmbedding and DistGraph do. (Not the "lookup" capability of a system under test,
// which takes other keys: explicit part sizes instead of a graph; scenarios/README.md.) Every rank computes the same partitioning (a pure function), looks up the
// partition and local id of its share of a global query list through a partition book (ids
// int32 or int64, on the host or the GPU), checks both against a brute-force reference and
// that results stay on the ids' device, then fetches each id's feature from its owner with
// an uneven all_to_all and checks it against the closed form f(id) = 3 * id + 1.
#include <algorithm>
#include <chrono>
#include <map>
#include <sstream>

#include "harness/comm/board.h"
#include "harness/comm/communicator.h"
#include "harness/comm/dtype.h"
#include "harness/report/dump.h"
#include "harness/workloads/digest.h"
#include "harness/workloads/graph_spec.h"
#include "harness/workloads/workload.h"
#include "reference/common/device.h"
#include "reference/common/philox.h"
#include "reference/partition/book.h"
#include "reference/partition/partition.h"
#include "reference/split/split.h"

namespace lockstep::workloads {
namespace {

struct Options {
  GraphSpec graph;
  ref::PartitionMethod method = ref::PartitionMethod::kRange;
  std::int64_t num_parts = -1;  // default: world_size
  bool range_book = true;
  ref::IdType id_type = ref::IdType::kI64;
  std::int64_t queries = 1024;
  bool host_only_bug = false;   // [[inject]] host_only_lookup
  bool minus_one_bug = false;   // [[inject]] minus_one_local
};

std::int64_t feature(std::int64_t orig_id) { return 3 * orig_id + 1; }

// A host vector as a communicator buffer. With backend nccl (device "cuda") the engine takes
// CUDA buffers only, as ProcessGroupNCCL does, so the vector travels through a copy on the
// rank's current GPU; back() copies an output home.
class Wire {
 public:
  Wire(std::vector<std::int64_t>& host, bool cuda) : host_(host) {
    if (!cuda) return;
    device_ = ref::CudaBuffer(bytes());
    if (bytes()) ref::cuda_copy_to_device(device_.data(), host_.data(), bytes());
  }
  comm::View view() {
    comm::View v = comm::view_of(host_);
    if (device_.data()) {
      v.data = device_.data();
      v.device = comm::DeviceType::kCuda;
    }
    return v;
  }
  std::vector<std::int64_t>& back() {
    if (device_.data() && bytes()) ref::cuda_copy_to_host(host_.data(), device_.data(), bytes());
    return host_;
  }

 private:
  std::size_t bytes() const { return host_.size() * sizeof(std::int64_t); }
  std::vector<std::int64_t>& host_;
  ref::CudaBuffer device_;
};

// Whether the exchanges carry CUDA buffers: with backend nccl. With gloo and device "cuda" the
// lookups run on the GPU and the exchanges on the host.
bool wire_on_gpu(const RankContext& ctx) { return ctx.scenario.backend == scenario::Backend::kNccl; }

void all_gather(RankContext& ctx, std::vector<std::int64_t>& in, std::vector<std::int64_t>& out) {
  Wire i(in, wire_on_gpu(ctx)), o(out, wire_on_gpu(ctx));
  ctx.comm.all_gather(i.view(), o.view());
  o.back();
}

void all_to_all(RankContext& ctx, std::vector<std::int64_t>& in, const std::vector<std::int64_t>& send_counts,
                std::vector<std::int64_t>& out, const std::vector<std::int64_t>& recv_counts) {
  Wire i(in, wire_on_gpu(ctx)), o(out, wire_on_gpu(ctx));
  ctx.comm.all_to_all(i.view(), send_counts, o.view(), recv_counts);
  o.back();
}

class Lookup final : public Workload {
 public:
  explicit Lookup(Options o) : o_(std::move(o)) {}

  void run(RankContext& ctx) override {
    const int ws = ctx.world_size;
    const int me = ctx.rank;
    const auto g = build_graph(o_.graph);
    const int parts = static_cast<int>(o_.num_parts > 0 ? o_.num_parts : ws);
    const auto p = ref::partition_graph(g, parts, o_.method, o_.graph.seed);
    const std::int64_t n = g.num_nodes;

    // Book id space: relabelled ids for the range book, original ids for the map book.
    std::unique_ptr<ref::PartitionBook> book;
    if (o_.range_book) book = std::make_unique<ref::RangePartitionBook>(p.part_offsets);
    else book = std::make_unique<ref::MapPartitionBook>(p.part_of, p.num_parts);
    auto to_book = [&](std::int64_t orig) { return o_.range_book ? p.new_id[static_cast<std::size_t>(orig)] : orig; };

    // Brute-force reference: owner part and local id of every node, in the book's id space.
    std::vector<std::int32_t> ref_part(static_cast<std::size_t>(n));
    std::vector<std::int64_t> ref_local(static_cast<std::size_t>(n));
    std::vector<std::int64_t> part_size(static_cast<std::size_t>(parts), 0);
    for (std::int64_t b = 0; b < n; ++b) {
      const std::int64_t orig = o_.range_book ? p.orig_id[static_cast<std::size_t>(b)] : b;
      const std::int32_t part = p.part_of[static_cast<std::size_t>(orig)];
      ref_part[static_cast<std::size_t>(b)] = part;
      ref_local[static_cast<std::size_t>(b)] = part_size[static_cast<std::size_t>(part)]++;
    }

    // The global query list (original ids), split over the ranks.
    std::vector<std::int64_t> index(static_cast<std::size_t>(o_.queries));
    for (std::int64_t i = 0; i < o_.queries; ++i) index[static_cast<std::size_t>(i)] = i;
    const auto my_index = ref::rank_split(index, ws)[static_cast<std::size_t>(me)];
    std::vector<std::int64_t> orig_q, book_q;
    for (std::int64_t i : my_index) {
      const std::int64_t id = static_cast<std::int64_t>(
          ref::uniform_below(ref::philox_u64(ctx.scenario.seed, 0x100c, static_cast<std::uint64_t>(i)), static_cast<std::uint64_t>(n)));
      orig_q.push_back(id);
      book_q.push_back(to_book(id));
    }

    // 1. Lookup through the book, on the scenario's device.
    const ref::Device device = ctx.scenario.device == scenario::Device::kCuda
                                   ? ref::Device{ref::DeviceKind::kCuda, ctx.local_rank % std::max(1, ref::cuda_device_count())}
                                   : ref::Device{};
    const auto ids = ref::IdArray::from_host(book_q, o_.id_type, device);
    if (o_.host_only_bug && ids.device().is_cuda()) {
      comm::mark_fired("host_only_lookup");
      // DGL 2.1.0: the lookup converted the id tensor to NumPy directly, which fails on CUDA.
      fail_with(DiagnosisKind::kDeviceMismatch, me,
               "rank " + std::to_string(me) + ": nid2partid requires host-resident ids, got " +
                   std::to_string(ids.size()) + " " + ref::to_string(ids.type()) + " ids on " + ref::to_string(ids.device()));
    }
    const auto t0 = std::chrono::steady_clock::now();
    const auto part_ids = book->nid2partid(ids.span());
    const auto local_ids = book->nid2localnid(ids.span());
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const auto* a : {&part_ids, &local_ids}) {
      if (!(a->device() == ids.device())) {
        fail_with(DiagnosisKind::kDeviceMismatch, me, "rank " + std::to_string(me) + ": lookup of ids on " +
                 ref::to_string(ids.device()) + " returned a result on " + ref::to_string(a->device()));
      }
    }
    if (local_ids.type() != ids.type()) {
      fail_with(DiagnosisKind::kResultMismatch, me, "rank " + std::to_string(me) + ": nid2localnid of " + ref::to_string(ids.type()) +
               " ids returned " + ref::to_string(local_ids.type()));
    }
    const auto got_part = part_ids.to_host();
    const auto got_local = local_ids.to_host();
    for (std::size_t k = 0; k < book_q.size(); ++k) {
      const auto b = static_cast<std::size_t>(book_q[k]);
      if (got_part[k] != ref_part[b] || got_local[k] != ref_local[b]) {
        std::ostringstream os;
        os << "rank " << me << " query " << k << " (id " << book_q[k] << "): book gives part " << got_part[k] << " local "
           << got_local[k] << ", reference part " << ref_part[b] << " local " << ref_local[b];
        fail_with(DiagnosisKind::kResultMismatch, me, os.str());
      }
    }

    // 2. Feature fetch. Rank r holds the feature rows of parts r, r + ws, ...
    std::vector<std::vector<std::int64_t>> table(static_cast<std::size_t>(parts));
    for (std::int64_t b = 0; b < n; ++b) {
      const auto part = static_cast<std::size_t>(ref_part[static_cast<std::size_t>(b)]);
      if (static_cast<int>(part) % ws != me) continue;
      const std::int64_t orig = o_.range_book ? p.orig_id[static_cast<std::size_t>(b)] : b;
      table[part].push_back(feature(orig));  // ascending book ids == ascending local ids
    }
    if (o_.minus_one_bug) comm::mark_fired_unchanged("minus_one_local");  // mark_fired where an id is not local
    std::vector<std::int64_t> fetched = o_.minus_one_bug ? fetch_local_only(ctx, g, p, got_part, got_local, book_q, table)
                                                         : fetch(ctx, got_part, got_local, table, parts);
    for (std::size_t k = 0; k < orig_q.size(); ++k) {
      if (fetched[k] != feature(orig_q[k])) {
        std::ostringstream os;
        os << "rank " << me << " query " << k << " (original id " << orig_q[k] << "): fetched feature " << fetched[k]
           << ", expected " << feature(orig_q[k]);
        fail_with(DiagnosisKind::kResultMismatch, me, os.str());
      }
    }

    // Canonical output: every query's feature, in global order (independent of world size,
    // partitioning and book).
    std::vector<std::int64_t> counts(static_cast<std::size_t>(ws));
    std::vector<std::int64_t> my_count{static_cast<std::int64_t>(fetched.size())};
    all_gather(ctx, my_count, counts);
    const std::int64_t width = std::max<std::int64_t>(1, *std::max_element(counts.begin(), counts.end()));
    std::vector<std::int64_t> padded(static_cast<std::size_t>(width), 0), all(static_cast<std::size_t>(width * ws));
    std::copy(fetched.begin(), fetched.end(), padded.begin());
    all_gather(ctx, padded, all);
    if (me == 0) {
      std::vector<std::int64_t> ordered;
      for (int r = 0; r < ws; ++r) ordered.insert(ordered.end(), all.begin() + r * width, all.begin() + r * width + counts[static_cast<std::size_t>(r)]);
      ctx.digest = digest_hex(ordered);
    }
    ctx.metrics["lookup_ids_per_s"] = secs > 0 ? static_cast<double>(book_q.size()) / secs : 0;
    ctx.metrics["queries"] = static_cast<double>(o_.queries);
    std::vector<std::int64_t> parts64(got_part.begin(), got_part.end());
    ctx.dump.write("lookup_ids", book_q, "queried ids in the book's id space (relabelled for the range book)");
    ctx.dump.write("lookup_partids", parts64, "nid2partid of lookup_ids");
    ctx.dump.write("lookup_localids", got_local, "nid2localnid of lookup_ids");
    ctx.dump.write("lookup_features", fetched, "feature fetched for each query; expected 3 * original id + 1");
  }

 private:
  // Asks each row's holder for it: one uneven all_to_all of local ids there, one of rows back.
  std::vector<std::int64_t> fetch(RankContext& ctx, const std::vector<std::int64_t>& part, const std::vector<std::int64_t>& local,
                                  const std::vector<std::vector<std::int64_t>>& table, int parts) {
    const int ws = ctx.world_size;
    std::vector<std::vector<std::size_t>> by_owner(static_cast<std::size_t>(ws));
    for (std::size_t k = 0; k < part.size(); ++k) by_owner[static_cast<std::size_t>(part[k] % ws)].push_back(k);
    std::vector<std::int64_t> send_counts(static_cast<std::size_t>(ws)), recv_counts(static_cast<std::size_t>(ws));
    std::vector<std::int64_t> request;  // (part, local) pairs
    for (int r = 0; r < ws; ++r) {
      for (std::size_t k : by_owner[static_cast<std::size_t>(r)]) {
        request.push_back(part[k]);
        request.push_back(local[k]);
      }
      send_counts[static_cast<std::size_t>(r)] = 2 * static_cast<std::int64_t>(by_owner[static_cast<std::size_t>(r)].size());
    }
    std::vector<std::int64_t> one(static_cast<std::size_t>(ws), 1), mine_counts(send_counts);
    ctx.comm.set_phase("fetch");
    all_to_all(ctx, mine_counts, one, recv_counts, one);
    std::int64_t total = 0;
    for (auto c : recv_counts) total += c;
    std::vector<std::int64_t> incoming(static_cast<std::size_t>(total));
    all_to_all(ctx, request, send_counts, incoming, recv_counts);
    std::vector<std::int64_t> reply(static_cast<std::size_t>(total / 2));
    for (std::size_t i = 0; i < reply.size(); ++i) {
      const auto pp = static_cast<std::size_t>(incoming[2 * i]);
      const auto ll = static_cast<std::size_t>(incoming[2 * i + 1]);
      reply[i] = pp < static_cast<std::size_t>(parts) && ll < table[pp].size() ? table[pp][ll] : -1;
    }
    std::vector<std::int64_t> reply_send(static_cast<std::size_t>(ws)), reply_recv(static_cast<std::size_t>(ws));
    for (int r = 0; r < ws; ++r) {
      reply_send[static_cast<std::size_t>(r)] = recv_counts[static_cast<std::size_t>(r)] / 2;
      reply_recv[static_cast<std::size_t>(r)] = send_counts[static_cast<std::size_t>(r)] / 2;
    }
    std::vector<std::int64_t> answers(part.size());
    all_to_all(ctx, reply, reply_send, answers, reply_recv);
    std::vector<std::int64_t> out(part.size());
    std::size_t pos = 0;
    for (int r = 0; r < ws; ++r) {
      for (std::size_t k : by_owner[static_cast<std::size_t>(r)]) out[k] = answers[pos++];
    }
    return out;
  }

  // The injected bug (PyG): a global->local map over this rank's local graph (owned + halo
  // nodes) that returns -1 for any other id, which then reads the last row of the table.
  std::vector<std::int64_t> fetch_local_only(RankContext& ctx, const ref::CsrGraph& g, const ref::Partitioning& p,
                                             const std::vector<std::int64_t>& part, const std::vector<std::int64_t>& local,
                                             const std::vector<std::int64_t>& book_q,
                                             const std::vector<std::vector<std::int64_t>>& table) {
    const int me = ctx.rank;
    const auto lg = ref::local_graph(ref::relabel(g, p), p, me % p.num_parts);
    std::map<std::int64_t, std::int64_t> row_of;  // book id -> row in `rows`
    std::vector<std::int64_t> rows;
    for (std::int64_t gid : lg.global_ids) {  // relabelled ids: owned first, then halo
      const std::int64_t orig = p.orig_id[static_cast<std::size_t>(gid)];
      row_of[o_.range_book ? gid : orig] = static_cast<std::int64_t>(rows.size());
      rows.push_back(feature(orig));  // halo rows cached locally, as PyG does
    }
    (void)part;
    (void)local;
    (void)table;
    std::vector<std::int64_t> out;
    bool nonlocal = false;  // an id neither owned nor halo here: the bug reads the last row instead
    for (std::int64_t b : book_q) {
      auto it = row_of.find(b);
      const std::int64_t row = it == row_of.end() ? -1 : it->second;
      nonlocal = nonlocal || row < 0;
      out.push_back(rows.empty() ? 0 : rows[static_cast<std::size_t>(row < 0 ? static_cast<std::int64_t>(rows.size()) + row : row)]);
    }
    if (nonlocal) comm::mark_fired("minus_one_local");
    return out;
  }

  Options o_;
};

std::unique_ptr<Workload> make(const scenario::Scenario& s) {
  const scenario::Config& c = s.workload_config;
  Options o;
  (void)c.get_string("kind");
  o.graph = read_graph_spec(c, s.seed);
  o.method = read_partition_method(c);
  if (c.has("num_parts")) {  // absent: world_size (-1)
    o.num_parts = c.get_int("num_parts", o.num_parts);
    if (o.num_parts < 1 || o.num_parts > 1024) c.fail("num_parts", "must be in 1..1024, got " + std::to_string(o.num_parts));
  }
  o.range_book = read_book_kind(c) == BookKind::kRange;
  const std::string dtype = c.get_string("id_dtype", "int64");
  if (dtype != "int32" && dtype != "int64") c.fail("id_dtype", "must be 'int32' or 'int64', got '" + dtype + "'");
  o.id_type = dtype == "int32" ? ref::IdType::kI32 : ref::IdType::kI64;
  o.queries = c.get_int("queries", o.queries);
  if (o.queries < 0 || o.queries > (std::int64_t{1} << 24)) c.fail("queries", "must be in 0..16777216");
  c.finish();
  o.host_only_bug = has_switch_injection(s, "host_only_lookup");
  o.minus_one_bug = has_switch_injection(s, "minus_one_local");
  // Refused when no query can be non-local (it would fire and test nothing).
  const std::int64_t parts = o.num_parts > 0 ? o.num_parts : s.world_size;
  if (o.minus_one_bug && parts == 1) {
    refuse_injection(s, "minus_one_local",
                     std::string("the graph has one partition (") +
                         (o.num_parts > 0 ? "workload.num_parts = 1" : "run.world_size = 1, and num_parts defaults to it") +
                         "), so every id is local; it needs an id owned by another part");
  }
  if (o.minus_one_bug && o.queries == 0) refuse_injection(s, "minus_one_local", "workload.queries = 0: nothing is looked up");
  return std::make_unique<Lookup>(std::move(o));
}

}  // namespace

WorkloadSpec lookup_spec() {
  return WorkloadSpec{"graph_lookup",
                      "partition lookup (nid2partid, nid2localnid) and owner feature fetch, checked against a brute-force reference",
                      make, {"host_only_lookup", "minus_one_local"}, /*gpu_compute_host_exchange=*/true,
                      /*device_exchanges=*/true};
}

}  // namespace lockstep::workloads
