#pragma once
// The graph a workload runs on, read from [workload] keys:
//   graph = "rmat" | "erdos_renyi" | "power_law" | "tiny:<name>"   (default "rmat")
//   scale (rmat, 12), nodes (erdos_renyi/power_law, 4096), edges (16 * nodes),
//   exponent (power_law, 1.5), isolated_fraction (power_law, 0.1), graph_seed (run.seed)
#include "harness/scenario/scenario.h"
#include "reference/graph/graph.h"
#include "reference/partition/partition.h"

namespace lockstep::workloads {

struct GraphSpec {
  std::string kind = "rmat";
  std::int64_t scale = 12;
  std::int64_t nodes = 4096;
  std::int64_t edges = -1;
  double exponent = 1.5;
  double isolated_fraction = 0.1;
  std::uint64_t seed = 0;
};

// Reads and validates the graph keys of `c` (throws InputError naming file:line).
GraphSpec read_graph_spec(const scenario::Config& c, std::uint64_t default_seed);
// Reads `partition` ("range" by default; range, hash, random, metis).
ref::PartitionMethod read_partition_method(const scenario::Config& c);
// The partition book a lookup goes through: DGL's range book, or any node -> part map
// (reference/partition/book.h).
enum class BookKind { kRange, kMap };
// Reads `book` ("range" by default; range, map). Shared by the graph_lookup workload and the
// system-under-test capability lookup.
BookKind read_book_kind(const scenario::Config& c);
// True when `s` has an [[inject]] of `kind`, a switch with no keys of its own (validated).
bool has_switch_injection(const scenario::Scenario& s, std::string_view kind);
// Refuses the first [[inject]] of `kind` in `s` as one that cannot change anything with the
// scenario's settings (it would fire and test nothing): throws InputError naming its file:line,
// "inject.kind: <kind> cannot change anything here: <why>".
[[noreturn]] void refuse_injection(const scenario::Scenario& s, std::string_view kind, const std::string& why);

// Builds the graph; a pure function of the spec.
ref::CsrGraph build_graph(const GraphSpec& spec);

}  // namespace lockstep::workloads
