#include "harness/comm/board.h"
#include "harness/workloads/graph_spec.h"
#include <stdexcept>
#include <string>

namespace lockstep::workloads {

GraphSpec read_graph_spec(const scenario::Config& c, std::uint64_t default_seed) {
  GraphSpec g;
  g.kind = c.get_string("graph", g.kind);
  if (g.kind != "rmat" && g.kind != "erdos_renyi" && g.kind != "power_law" && g.kind.rfind("tiny:", 0) != 0) {
    c.fail("graph", "unknown graph '" + g.kind + "' (rmat, erdos_renyi, power_law, tiny:<name>)");
  }
  g.scale = c.get_int("scale", g.scale);
  if (g.scale < 1 || g.scale > 26) c.fail("scale", "must be in 1..26, got " + std::to_string(g.scale));
  g.nodes = c.get_int("nodes", g.nodes);
  if (g.nodes < 1 || g.nodes > (std::int64_t{1} << 26)) c.fail("nodes", "must be in 1..67108864, got " + std::to_string(g.nodes));
  g.edges = -1;  // absent: 16 x nodes
  if (c.has("edges")) {
    g.edges = c.get_int("edges", g.edges);
    if (g.edges < 0 || g.edges > (std::int64_t{1} << 28)) c.fail("edges", "must be in 0..268435456, got " + std::to_string(g.edges));
  }
  g.exponent = c.get_double("exponent", g.exponent);
  if (g.exponent <= 0) c.fail("exponent", "must be > 0");
  g.isolated_fraction = c.get_double("isolated_fraction", g.isolated_fraction);
  if (g.isolated_fraction < 0 || g.isolated_fraction >= 1) c.fail("isolated_fraction", "must be in [0, 1)");
  g.seed = static_cast<std::uint64_t>(c.get_int("graph_seed", static_cast<std::int64_t>(default_seed)));
  if (g.kind.rfind("tiny:", 0) == 0) {
    try {
      (void)ref::tiny(g.kind.substr(5));
    } catch (const std::exception& e) {
      c.fail("graph", e.what());
    }
  }
  return g;
}

ref::PartitionMethod read_partition_method(const scenario::Config& c) {
  const std::string method = c.get_string("partition", "range");
  auto m = ref::partition_method_from_string(method);
  if (!m) c.fail("partition", "unknown partitioning '" + method + "' (range, hash, random, metis)");
  return *m;
}

BookKind read_book_kind(const scenario::Config& c) {
  const std::string book = c.get_string("book", "range");
  if (book != "range" && book != "map") c.fail("book", "must be 'range' or 'map', got '" + book + "'");
  return book == "range" ? BookKind::kRange : BookKind::kMap;
}

bool has_switch_injection(const scenario::Scenario& s, std::string_view kind) {
  bool found = false;
  for (const auto& inj : s.injections) {
    if (inj.kind != kind) continue;
    (void)inj.config.get_string("kind");
    inj.config.finish();
    found = true;
  }
  return found;
}

void refuse_injection(const scenario::Scenario& s, std::string_view kind, const std::string& why) {
  for (const auto& inj : s.injections) {
    if (inj.kind == kind) inj.config.fail("kind", std::string(kind) + " cannot change anything here: " + why);
  }
  throw std::logic_error("refuse_injection: no [[inject]] of kind " + std::string(kind));
}

ref::CsrGraph build_graph(const GraphSpec& g) {
  comm::set_activity("building the graph");
  if (g.kind == "rmat") {
    const std::int64_t n = std::int64_t{1} << g.scale;
    return ref::rmat(static_cast<int>(g.scale), g.edges >= 0 ? g.edges : 16 * n, g.seed, {});
  }
  if (g.kind == "erdos_renyi") return ref::erdos_renyi(g.nodes, g.edges >= 0 ? g.edges : 16 * g.nodes, g.seed, {});
  if (g.kind == "power_law") {
    return ref::power_law(g.nodes, g.edges >= 0 ? g.edges : 16 * g.nodes, g.exponent, g.isolated_fraction, g.seed, {});
  }
  return ref::tiny(g.kind.substr(5));
}

}  // namespace lockstep::workloads
