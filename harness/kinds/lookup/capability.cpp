// Capability "lookup" for systems under test: a partition book's nid2partid and nid2localnid,
// and a per-partition feature store (global id -> local row, and the row's features), over a
// range book or any node -> partition map, on valid ids of both integer types and on ids a
// lookup must reject (past the end, negative, not held by the asked partition) or handle
// exactly (float ids). Answers are judged per id: a system rejects single ids with a validity
// mask (output `<group>.answered`), so a rejected id never hides a wrong answer beside it.
// Valid answers are checked exactly against lockstep's own books (reference/partition/book.h);
// accepted invalid ids are invariant violations, since there is no right answer for them.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>

#include "harness/core/diagnosis.h"
#include "harness/sut/capability.h"
#include "harness/sut/common.h"
#include "harness/workloads/digest.h"
#include "harness/workloads/graph_spec.h"
#include "reference/common/philox.h"
#include "reference/partition/book.h"

namespace lockstep::sut {
namespace {

using I64 = std::vector<std::int64_t>;

// The order is part of the inputs: a group's position is its query stream.
const std::vector<std::string> kGroups = {"partid.valid",   "partid.int32",    "partid.past_end", "partid.negative",
                                          "partid.float",   "localnid.valid",  "localnid.not_owned",
                                          "localnid.mixed", "store.valid",     "store.not_owned", "store.mixed"};

bool is_partid(const std::string& g) { return g.rfind("partid.", 0) == 0; }
bool is_store(const std::string& g) { return g.rfind("store.", 0) == 0; }
bool is_mixed(const std::string& g) { return g == "localnid.mixed" || g == "store.mixed"; }

struct Options {
  std::int64_t nodes = 4096;
  workloads::BookKind book = workloads::BookKind::kRange;
  I64 offsets;                        // num_parts + 1: the range book's boundaries (map: the sizes)
  std::vector<std::int32_t> part_of;  // map book: node -> partition
  std::int64_t queries = 1024;
  std::int64_t feature_dim = 4;
  std::vector<std::string> groups;
  bool store = false;  // some store.* group
  std::int64_t parts() const { return static_cast<std::int64_t>(offsets.size()) - 1; }
};

// The map book's assignment: the range book's, shuffled (Fisher-Yates over philox draws of
// the seed), so the part sizes stay those asked and every part holds scattered ids.
std::vector<std::int32_t> shuffled_assignment(const I64& offsets, std::uint64_t seed) {
  std::vector<std::int32_t> part_of;
  for (std::size_t p = 0; p + 1 < offsets.size(); ++p) part_of.insert(part_of.end(), static_cast<std::size_t>(offsets[p + 1] - offsets[p]), static_cast<std::int32_t>(p));
  for (std::size_t i = part_of.size(); i > 1; --i) {
    const auto j = ref::uniform_below(ref::philox_u64(seed, i - 1, ref::stream_counter(ref::streams::kSutBook, 0)), i);
    std::swap(part_of[i - 1], part_of[j]);
  }
  return part_of;
}

Options read_options(const scenario::Scenario& s) {
  const auto& c = s.workload_config;
  Options o;
  o.nodes = read_int(c, "nodes", 4096, 1, std::int64_t{1} << 40);
  o.book = workloads::read_book_kind(c);
  const std::int64_t parts = read_int(c, "num_parts", 3, 1, 1024);
  I64 sizes = c.get_int_list("part_sizes", {});
  if (sizes.empty()) {
    o.offsets = share_offsets(o.nodes, static_cast<int>(parts));
  } else {
    if (static_cast<std::int64_t>(sizes.size()) != parts) {
      c.fail("part_sizes", "has " + std::to_string(sizes.size()) + " entries, num_parts is " + std::to_string(parts));
    }
    o.offsets = {0};
    for (auto n : sizes) {
      if (n < 0) c.fail("part_sizes", "sizes must be >= 0, got " + std::to_string(n));
      o.offsets.push_back(o.offsets.back() + n);
    }
    if (o.offsets.back() != o.nodes) {
      c.fail("part_sizes", "sums to " + std::to_string(o.offsets.back()) + ", nodes is " + std::to_string(o.nodes));
    }
  }
  if (o.book == workloads::BookKind::kMap && o.nodes > (std::int64_t{1} << 24)) {
    c.fail("nodes", "book = \"map\" writes one entry per node: nodes must be <= 16777216, got " + std::to_string(o.nodes));
  }
  o.queries = read_int(c, "queries", 1024, 1, std::int64_t{1} << 24);
  o.feature_dim = read_int(c, "feature_dim", 4, 1, 64);
  o.groups = c.get_string_list("groups", {"partid.valid", "partid.int32", "localnid.valid"});
  if (o.groups.empty()) c.fail("groups", "must name at least one query group");
  for (const auto& g : o.groups) {
    if (std::find(kGroups.begin(), kGroups.end(), g) == kGroups.end()) {
      std::string all;
      for (const auto& k : kGroups) all += (all.empty() ? "" : ", ") + k;
      c.fail("groups", "unknown query group \"" + g + "\"; allowed: " + all);
    }
    if ((g.find(".not_owned") != std::string::npos || is_mixed(g)) && parts < 2) c.fail("groups", g + " needs num_parts >= 2");
    if (g == "partid.int32" && o.nodes > 2147483647) c.fail("groups", "partid.int32 needs nodes <= 2147483647 (int32 ids), got " + std::to_string(o.nodes));
    o.store = o.store || is_store(g);
  }
  // Feature v's column c is v * feature_dim + c, exact in float32 up to 2^24.
  if (o.store && o.nodes * o.feature_dim > (std::int64_t{1} << 24)) {
    c.fail("groups", "store groups need nodes * feature_dim <= 16777216 (features exact in float32), got " +
                         std::to_string(o.nodes) + " * " + std::to_string(o.feature_dim));
  }
  c.finish();
  s.system->profile.finish();
  if (o.book == workloads::BookKind::kMap) o.part_of = shuffled_assignment(o.offsets, s.seed);
  return o;
}

std::unique_ptr<ref::PartitionBook> make_book(const Options& o) {
  if (o.book == workloads::BookKind::kRange) return std::make_unique<ref::RangePartitionBook>(o.offsets);
  return std::make_unique<ref::MapPartitionBook>(o.part_of, static_cast<int>(o.parts()));
}

float feature(const Options& o, std::int64_t node, std::int64_t column) { return static_cast<float>(node * o.feature_dim + column); }

// The ids of one group, the partition asked for each (localnid.*, store.*) and the reference
// book's answer: expected[i] is the owner (partid.*) or the local id in the asked partition,
// or -1 where the id must be rejected. A pure function of (seed, group).
struct Queries {
  I64 ids;
  I64 parts;
  std::vector<double> float_ids;  // partid.float
  I64 expected;
  I64 owner;                      // -1 outside [0, N)
};

Queries make_queries(const Options& o, const ref::PartitionBook& book, std::uint64_t seed, const std::string& group) {
  const auto sub = static_cast<std::uint32_t>(std::find(kGroups.begin(), kGroups.end(), group) - kGroups.begin());
  auto draw = [&](std::int64_t i, std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(ref::uniform_below(
                    ref::philox_u64(seed, static_cast<std::uint64_t>(i), ref::stream_counter(ref::streams::kSutQueries, sub)),
                    static_cast<std::uint64_t>(hi - lo)));
  };
  const std::int64_t n = o.nodes, parts = o.parts(), nq = o.queries;
  // The book's owner and local id of every id in [0, N) among `ids`.
  auto answers = [&](const I64& ids, I64& owner, I64& local) {
    I64 in;
    for (auto id : ids) if (id >= 0 && id < n) in.push_back(id);
    const ref::IdSpan span{in.data(), static_cast<std::int64_t>(in.size()), ref::IdType::kI64, ref::Device{}};
    const I64 part = book.nid2partid(span).to_host(), loc = book.nid2localnid(span).to_host();
    owner.assign(ids.size(), -1);
    local.assign(ids.size(), -1);
    for (std::size_t i = 0, k = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= n) continue;
      owner[i] = part[k];
      local[i] = loc[k++];
    }
  };
  Queries q;
  if (group == "partid.past_end") {
    q.ids = {n, n + 1, n + 2, n + 7, n + 100, 2 * n, n + 3, n + 1000};
  } else if (group == "partid.negative") {
    q.ids = {-1, -2, -3, -n, -7, -100, -(n + 1), -5};
  } else if (group == "partid.float") {
    // Ids of the last partitions (range book), so that a lookup that truncates to partition 0 is seen.
    const std::int64_t lo = parts > 1 && o.book == workloads::BookKind::kRange ? o.offsets[1] : 0;
    for (std::int64_t i = 0; i < std::min<std::int64_t>(nq, 64); ++i) {
      q.ids.push_back(draw(i, lo, std::max(lo + 1, n)));
      q.float_ids.push_back(static_cast<double>(q.ids.back()));
    }
  } else if (is_mixed(group)) {
    // Half valid, a quarter not held by the asked partition, an eighth past the end, an eighth negative.
    for (std::int64_t i = 0; i < nq; ++i) {
      const std::int64_t kind = draw(2 * nq + i, 0, 8);
      q.ids.push_back(kind < 6 ? draw(i, 0, n) : kind == 6 ? n + draw(i, 0, n) : -1 - draw(i, 0, n));
    }
  } else {
    for (std::int64_t i = 0; i < nq; ++i) q.ids.push_back(draw(i, 0, n));
  }
  I64 local;
  answers(q.ids, q.owner, local);
  if (is_partid(group)) {
    q.expected = q.owner;
    return q;
  }
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(q.ids.size()); ++i) {
    const std::int64_t own = q.owner[static_cast<std::size_t>(i)];
    const std::int64_t kind = is_mixed(group) ? draw(2 * nq + i, 0, 8) : group.find(".valid") != std::string::npos ? 0 : 4;
    if (own >= 0 && kind < 4) q.parts.push_back(own);                                    // its owner
    else if (own >= 0) q.parts.push_back((own + 1 + draw(nq + i, 0, parts - 1)) % parts);  // another partition
    else q.parts.push_back(draw(nq + i, 0, parts));                                         // any
    q.expected.push_back(q.parts.back() == own ? local[static_cast<std::size_t>(i)] : -1);
  }
  return q;
}

void write_inputs(const scenario::Scenario& s, InputWriter& w) {
  const Options o = read_options(s);
  const auto book = make_book(o);
  const std::int64_t parts = o.parts();
  w.config("num_nodes", o.nodes);
  w.config("num_parts", parts);
  w.config("book", o.book == workloads::BookKind::kRange ? "range" : "map");
  w.config("groups", o.groups);
  if (o.book == workloads::BookKind::kRange) {
    w.array("part_offsets", o.offsets, {parts + 1}, "range book: partition p owns ids [part_offsets[p], part_offsets[p+1])");
  } else {
    w.array("part_of", o.part_of, {o.nodes},
            "map book: the partition of each node id; a node's local id is its position among its partition's ids, ascending");
  }
  if (o.store) {
    w.config("feature_dim", o.feature_dim);
    std::vector<float> f;
    for (std::int64_t v = 0; v < o.nodes; ++v) {
      for (std::int64_t c = 0; c < o.feature_dim; ++c) f.push_back(feature(o, v, c));
    }
    w.array("features", f, {o.nodes, o.feature_dim}, "each node's features (row v, column c = v * feature_dim + c), for the partitions' feature stores");
  }
  for (const auto& g : o.groups) {
    Queries q = make_queries(o, *book, s.seed, g);
    const auto n = static_cast<std::int64_t>(q.ids.size());
    if (g == "partid.int32") {
      std::vector<std::int32_t> ids(q.ids.begin(), q.ids.end());
      w.array("ids." + g, ids, {n}, "int32 node ids to look up");
    } else if (g == "partid.float") {
      w.array("ids." + g, q.float_ids, {n}, "float64 node ids (integral values) to look up");
    } else {
      w.array("ids." + g, q.ids, {n}, "node ids to look up");
    }
    w.shares("ids." + g, share_offsets(n, w.world_size()), 0);
    if (!q.parts.empty()) {
      w.array("parts." + g, q.parts, {n}, is_store(g) ? "the partition whose feature store is asked for each id" : "the partition to ask for each id's local id");
      w.shares("parts." + g, share_offsets(n, w.world_size()), 0);
    }
  }
}

[[noreturn]] void fail(DiagnosisKind kind, int rank, const std::string& msg) {
  throw DiagnosisError(Diagnosis{kind, msg, rank, -1});
}

// "node 17's row" for local row `local` of `part`, or where it lies outside the part.
std::string row_of(const ref::PartitionBook& book, std::int64_t part, std::int64_t local) {
  const std::int64_t size = book.part_size(static_cast<int>(part));
  std::ostringstream os;
  if (local < 0 || local >= size) {
    os << "outside [0, " << size << ")";
    return os.str();
  }
  const std::int64_t one[1] = {local};
  const I64 node = book.local2global(static_cast<int>(part), ref::IdSpan{one, 1, ref::IdType::kI64, ref::Device{}}).to_host();
  os << "which is node " << node[0] << "'s row" << (local == size - 1 ? ", the partition's last" : "");
  return os.str();
}

// The node whose features `row` holds exactly, or -1.
std::int64_t features_of(const Options& o, const float* row) {
  const double first = row[0];
  if (!(first >= 0) || first >= static_cast<double>(o.nodes * o.feature_dim) || std::fmod(first, static_cast<double>(o.feature_dim)) != 0) return -1;
  const auto v = static_cast<std::int64_t>(first) / o.feature_dim;
  for (std::int64_t c = 0; c < o.feature_dim; ++c) {
    if (row[c] != feature(o, v, c)) return -1;
  }
  return v;
}

void add_note(CheckResult& res, const std::string& note) {
  if (std::find(res.notes.begin(), res.notes.end(), note) == res.notes.end()) res.notes.push_back(note);
}

CheckResult check(const scenario::Scenario& s, const SystemOutputs& out) {
  const Options o = read_options(s);
  const auto book = make_book(o);
  const std::int64_t n = o.nodes, parts = o.parts(), fd = o.feature_dim;
  const int ws = out.world_size();
  CheckResult res;
  I64 digest_stream;
  for (const auto& g : o.groups) {
    const Queries q = make_queries(o, *book, s.seed, g);
    const I64 offs = share_offsets(static_cast<std::int64_t>(q.ids.size()), ws);
    const bool partid = is_partid(g), store = is_store(g);
    const std::string call = store ? "the feature store of partition " : "nid2localnid in partition ";
    digest_stream.push_back(std::find(kGroups.begin(), kGroups.end(), g) - kGroups.begin());
    std::vector<std::string> accepted_desc;
    int first_bad_rank = -1;
    std::string rejection;
    std::int64_t rejected_one_by_one = 0;
    for (int r = 0; r < ws; ++r) {
      const std::int64_t lo = offs[static_cast<std::size_t>(r)], hi = offs[static_cast<std::size_t>(r) + 1];
      if (lo == hi && !out.has(r, g) && !out.rejected(r, g)) continue;  // nothing asked of this rank
      // The first query of this share that has an answer, if any.
      std::int64_t first_valid = -1, valid_count = 0;
      for (std::int64_t i = lo; i < hi; ++i) {
        if (q.expected[static_cast<std::size_t>(i)] < 0) continue;
        if (first_valid < 0) first_valid = i;
        ++valid_count;
      }
      if (auto why = out.rejected(r, g)) {
        digest_stream.push_back(-1);
        if (first_valid >= 0 && g == "partid.int32") {
          // A loud refusal of a whole id type is a limitation of the system's API, not a silent
          // wrong answer: reported, and visible to compare through the digest.
          add_note(res, "partid.int32: the system rejects int32 ids (" + *why + ")");
          continue;
        }
        if (g == "partid.float") {  // float ids may be rejected
          if (rejection.empty()) rejection = *why;
          continue;
        }
        if (first_valid >= 0 && is_mixed(g)) {
          const auto i = static_cast<std::size_t>(first_valid);
          std::ostringstream os;
          os << g << ": rank " << r << " rejected its whole share (" << *why << "), which holds " << valid_count
             << " ids with an answer (first: id " << q.ids[i] << " in partition " << q.parts[i] << ", local id " << q.expected[i]
             << "); a lookup must answer them and reject only the bad ids, one by one (a validity mask '" << g
             << ".answered', or lockstep_sut's out.attempt_each)";
          fail(DiagnosisKind::kResultMismatch, r, os.str());
        }
        if (first_valid >= 0) {
          fail(DiagnosisKind::kResultMismatch, r,
               g + ": rank " + std::to_string(r) + " raised on valid ids " + preview(I64(q.ids.begin() + lo, q.ids.begin() + hi), 4) + ": " + *why);
        }
        if (rejection.empty()) rejection = *why;
        continue;
      }
      std::string descr;
      std::vector<std::int64_t> shape;
      const I64 got = out.int64s(r, g, Declared::kAnyInteger, &shape, &descr);
      if (shape.size() != 1 || shape[0] != hi - lo) {
        contract_violation(r, g, "expected shape [" + std::to_string(hi - lo) + "] (one result per id of this rank's share), got " +
                                     std::to_string(shape.empty() ? 0 : shape[0]) + " values in " + std::to_string(shape.size()) + " dimensions");
      }
      I64 answered(static_cast<std::size_t>(hi - lo), 1);
      const std::string mask_name = g + ".answered";
      if (out.has(r, mask_name)) {
        std::vector<std::int64_t> mshape;
        answered = out.int64s(r, mask_name, Declared::kAnyInteger, &mshape);
        if (mshape.size() != 1 || mshape[0] != hi - lo) {
          contract_violation(r, mask_name, "expected shape [" + std::to_string(hi - lo) + "] (1 = answered, 0 = rejected, per id of the share)");
        }
        for (std::size_t k = 0; k < answered.size(); ++k) {
          if (answered[k] != 0 && answered[k] != 1) {
            contract_violation(r, mask_name, "value " + std::to_string(answered[k]) + " at position " + std::to_string(k) + ": the mask holds 1 (answered) or 0 (rejected)");
          }
        }
      }
      std::vector<float> feats;
      if (store) {
        std::vector<std::int64_t> fshape;
        feats = out.floats(r, g + ".features", Declared::kFloat32, &fshape);
        if (fshape.size() != 2 || fshape[0] != hi - lo || fshape[1] != fd) {
          contract_violation(r, g + ".features", "expected shape [" + std::to_string(hi - lo) + ", " + std::to_string(fd) + "] (the row of each id of the share)");
        }
      }
      if (g == "partid.int32" && descr != "<i4") {
        add_note(res, "partid.int32: int32 ids come back as dtype " + descr + " (a difference from the reference, which returns int32 partition ids: noted, not a bug)");
      }
      for (std::int64_t i = lo; i < hi; ++i) {
        const auto k = static_cast<std::size_t>(i - lo), qi = static_cast<std::size_t>(i);
        const std::int64_t id = q.ids[qi], expected = q.expected[qi], own = q.owner[qi];
        const std::int64_t part = partid ? own : q.parts[qi];
        const std::int64_t v = got[k];
        const float* row = store ? feats.data() + k * static_cast<std::size_t>(fd) : nullptr;
        if (!answered[k]) {
          digest_stream.push_back(-1);
          if (expected < 0 || g == "partid.float") {
            ++rejected_one_by_one;
            continue;
          }
          std::ostringstream os;
          os << g << ": rank " << r << " rejected ";
          if (partid) os << "valid id " << id << " (owned by partition " << own << ")";
          else os << "id " << id << " in partition " << part << ", which holds it as local id " << expected;
          os << " (query #" << i << "); a lookup must answer it";
          fail(DiagnosisKind::kResultMismatch, r, os.str());
        }
        digest_stream.push_back(v);
        for (std::int64_t c = 0; store && c < fd; ++c) {
          std::uint32_t bits;
          std::memcpy(&bits, row + c, 4);
          digest_stream.push_back(bits);
        }
        std::ostringstream os;
        if (expected >= 0) {
          if (g == "partid.float") {
            if (v == expected) continue;
            os << g << ": float64 ids were accepted but looked up wrongly: id " << id << ".0 -> partition " << v
               << ", expected " << expected << " (float ids must be rejected, or looked up as their integer value)";
          } else if (partid) {
            if (v == expected) continue;
            os << g << ": nid2partid(id " << id << ") returned " << v << ", expected " << expected << " (query #" << i
               << ", rank " << r << ")";
          } else if (v != expected) {
            os << g << ": " << (store ? call + std::to_string(part) + " returned local row " : "nid2localnid(id " + std::to_string(id) + ", partition " + std::to_string(part) + ") returned ")
               << v << (store ? " for id " + std::to_string(id) : "") << ", expected " << expected << " (query #" << i << ", rank " << r << ")";
          } else {
            for (std::int64_t c = 0; store && c < fd; ++c) {
              if (row[c] == feature(o, id, c)) continue;
              os << g << ": " << call << part << " returned for id " << id << " (local row " << v << ") features with column " << c
                 << " = " << row[c] << ", expected " << feature(o, id, c) << " (query #" << i << ", rank " << r << ")";
              const std::int64_t other = features_of(o, row);
              if (other >= 0) os << ": the features of node " << other;
              break;
            }
            if (os.str().empty()) continue;
          }
          fail(DiagnosisKind::kResultMismatch, r, os.str());
        }
        // An id that must be rejected was answered.
        if (first_bad_rank < 0) first_bad_rank = r;
        if (accepted_desc.size() >= 3) continue;
        if (partid) {
          os << "id " << id << " -> partition " << v;
        } else {
          os << "id " << id;
          if (own >= 0) os << " (owned by partition " << own << ")";
          else os << (id < 0 ? " (negative)" : " (past the end)");
          os << " in partition " << part << " -> local " << (store ? "row " : "id ") << v << ", " << row_of(*book, part, v);
          if (store) {
            const std::int64_t other = features_of(o, row);
            if (other >= 0) os << ", with the features of node " << other;
          }
        }
        accepted_desc.push_back(os.str());
      }
    }
    if (first_bad_rank >= 0) {
      std::ostringstream os;
      os << g << ": ";
      if (g == "partid.past_end") os << "ids past the end (ids are [0, " << n << ")) were accepted: ";
      if (g == "partid.negative") os << "negative ids were accepted: ";
      if (g == "localnid.not_owned") os << "nid2localnid accepted ids the asked partition does not own: ";
      if (g == "store.not_owned") os << "a partition's feature store answered ids it does not own: ";
      if (is_mixed(g)) os << "ids the lookup must reject (not owned by the asked partition, past the end, negative) were answered: ";
      for (std::size_t k = 0; k < accepted_desc.size(); ++k) os << (k ? "; " : "") << accepted_desc[k];
      if (partid) os << " (num_parts = " << parts << ")";
      os << "; a lookup must reject them";
      if (g == "partid.past_end") os << " (partition " << parts << " indexes past the last partition)";
      if (!partid) os << " (the local " << (store ? "row and its features are" : "id reads") << " another node's" << (store ? "" : " row") << ")";
      fail(DiagnosisKind::kInvariantViolation, first_bad_rank, os.str());
    }
    if (!rejection.empty()) res.notes.push_back(g + ": rejected as required (" + rejection + ")");
    if (rejected_one_by_one > 0) {
      res.notes.push_back(g + ": " + std::to_string(rejected_one_by_one) + " ids rejected one by one, as required");
    }
  }
  res.digest = workloads::digest_hex(digest_stream);
  return res;
}

void write_expected(const scenario::Scenario& s, InputWriter& w) {
  const Options o = read_options(s);
  const auto book = make_book(o);
  for (const auto& g : o.groups) {
    const Queries q = make_queries(o, *book, s.seed, g);
    const auto n = static_cast<std::int64_t>(q.ids.size());
    const auto answers = static_cast<std::int64_t>(std::count_if(q.expected.begin(), q.expected.end(), [](auto e) { return e >= 0; }));
    if (answers == 0) {
      w.config(g, "rejected");
      continue;
    }
    I64 values, answered;
    std::vector<float> feats;
    for (std::size_t i = 0; i < q.ids.size(); ++i) {
      const bool yes = q.expected[i] >= 0;
      values.push_back(yes ? q.expected[i] : 0);
      answered.push_back(yes ? 1 : 0);
      for (std::int64_t c = 0; is_store(g) && c < o.feature_dim; ++c) feats.push_back(yes ? feature(o, q.ids[i], c) : 0.0f);
    }
    if (answers == n) w.config(g, g == "partid.float" ? "this, or rejected" : "this");
    else w.config(g, "this where " + g + ".answered is 1, else rejected");
    w.array(g, values, {n}, "the answer for every query of the group, in query order");
    if (answers != n) w.array(g + ".answered", answered, {n}, "1 where the query has an answer, 0 where it must be rejected");
    if (is_store(g)) w.array(g + ".features", feats, {n, o.feature_dim}, "the features of every answered query's row");
  }
}

}  // namespace

Capability lookup_capability() {
  return {"lookup", "partition book and feature store lookups (range or map book), judged per id, on valid and invalid ids",
          [](const auto& s) { read_options(s); }, write_inputs, check, write_expected};
}

}  // namespace lockstep::sut
