#include "harness/kinds/sampling/spec.h"

#include <string>

namespace lockstep::workloads {

SamplingSpec SamplingSpec::read(const scenario::Config& c, std::uint64_t seed) {
  SamplingSpec t;
  t.graph = read_graph_spec(c, seed);
  t.fanouts = c.get_int_list("fanouts", t.fanouts);
  if (t.fanouts.empty()) c.fail("fanouts", "must not be empty");
  for (auto f : t.fanouts) {
    if (f < -1 || f == 0 || f > 1000) c.fail("fanouts", "each fanout must be -1 (all) or in 1..1000, got " + std::to_string(f));
  }
  t.replace = c.get_bool("replace", t.replace);
  t.in_edges = scenario::read_choice(c, "edges_dir", "in", {"in", "out"}) == "in";
  t.num_seeds = scenario::read_int(c, "num_seeds", t.num_seeds, 0);
  t.batch_size = scenario::read_int(c, "batch_size", t.batch_size, 1);
  return t;
}

}  // namespace lockstep::workloads
