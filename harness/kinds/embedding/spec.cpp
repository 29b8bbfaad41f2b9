#include "harness/kinds/embedding/spec.h"

#include <string>

namespace lockstep::workloads {

EmbeddingSpec EmbeddingSpec::read(const scenario::Config& c) {
  using scenario::Interval;
  EmbeddingSpec t;
  t.rows = scenario::read_int(c, "rows", t.rows, 1, std::int64_t{1} << 24);
  t.dim = scenario::read_int(c, "dim", t.dim, 1, 4096);
  t.steps = scenario::read_int(c, "steps", t.steps, 1, 1000);
  t.batch_sizes = c.get_int_list("batch_sizes", t.batch_sizes);
  if (t.batch_sizes.empty()) c.fail("batch_sizes", "must not be empty");
  for (auto b : t.batch_sizes) {
    if (b < 0 || b > (std::int64_t{1} << 20)) c.fail("batch_sizes", "each batch size must be in 0..1048576, got " + std::to_string(b));
  }
  t.hot_rows = scenario::read_int(c, "hot_rows", t.hot_rows, 1);
  t.optimizer.lr = scenario::read_double(c, "lr", 0.1, 0, 100);
  t.optimizer.eps = scenario::read_double(c, "eps", -1, 0, 1);  // absent: -1, torch's default
  t.optimizer.beta1 = scenario::read_double(c, "beta1", 0.9, Interval{0, 1, /*lo_open=*/false, /*hi_open=*/true});
  t.optimizer.beta2 = scenario::read_double(c, "beta2", 0.999, Interval{0, 1, /*lo_open=*/false, /*hi_open=*/true});
  t.optimizer.initial_accumulator_value = scenario::read_double(c, "initial_accumulator_value", 0.0, Interval{0});
  t.init_scale = scenario::read_double(c, "init_scale", t.init_scale, Interval{0, 1000, /*lo_open=*/true});
  t.bag_sizes = c.get_int_list("bag_sizes", {});
  if (c.has("bag_sizes") && t.bag_sizes.empty()) c.fail("bag_sizes", "must not be empty (leave it out for one id per sample)");
  for (auto k : t.bag_sizes) {
    if (k < 0 || k > 1024) c.fail("bag_sizes", "each bag size must be in 0..1024, got " + std::to_string(k));
  }
  t.int32_ids = scenario::read_choice(c, "id_dtype", "int64", {"int64", "int32"}) == "int32";
  const std::string pooling = scenario::read_choice(c, "pooling", "sum", {"sum", "mean"});
  t.pooling = ref::bag_pooling_from_string(pooling);
  t.per_sample_weights = c.get_bool("per_sample_weights", false);
  if (!t.bags() && c.has("pooling")) c.fail("pooling", "needs bag_sizes (pooling applies to bags)");
  if (!t.bags() && t.per_sample_weights) c.fail("per_sample_weights", "needs bag_sizes (weights apply to the ids of bags)");
  return t;
}

}  // namespace lockstep::workloads
