#include "harness/kinds/training/spec.h"

#include <stdexcept>
#include <string>

namespace lockstep::workloads {

namespace tr = ref::train;

TrainingSpec TrainingSpec::read(const scenario::Config& c, std::uint64_t seed) {
  TrainingSpec t;
  t.graph = read_graph_spec(c, seed);
  t.model.num_layers = static_cast<int>(scenario::read_int(c, "layers", 2, 2, 3));
  t.model.hidden = scenario::read_int(c, "hidden", 32, 1, 4096);
  t.feature_dim = scenario::read_int(c, "feature_dim", 16, 1, 4096);
  t.model.in_dim = t.feature_dim;
  t.model.num_classes = scenario::read_int(c, "num_classes", 4, 2, 1024);
  const std::string act = scenario::read_choice(c, "activation", "silu", {"silu", "relu"});
  t.model.activation = act == "silu" ? tr::SageConfig::Activation::kSilu : tr::SageConfig::Activation::kRelu;
  t.fanouts = c.get_int_list("fanouts", std::vector<std::int64_t>(static_cast<std::size_t>(t.model.num_layers), 5));
  if (static_cast<int>(t.fanouts.size()) != t.model.num_layers) {
    c.fail("fanouts", "needs one fanout per layer (" + std::to_string(t.model.num_layers) + "), got " + std::to_string(t.fanouts.size()));
  }
  for (auto f : t.fanouts) {
    if (f < -1 || f == 0 || f > 1000) c.fail("fanouts", "each fanout must be -1 (all) or in 1..1000, got " + std::to_string(f));
  }
  const std::string precision = c.get_string("precision", "fp32");
  try {
    t.precision = tr::precision_from_string(precision);
  } catch (const std::invalid_argument&) {
    c.fail("precision", "unknown precision '" + precision + "' (fp32, bf16, bf16_reduce)");
  }
  t.num_train = scenario::read_int(c, "num_train", t.num_train, 1);
  t.batch_size = scenario::read_int(c, "batch_size", t.batch_size, 1);
  t.steps = scenario::read_int(c, "steps", t.steps, 1, 100000);
  const std::string opt = scenario::read_choice(c, "optimizer", "sgd", {"sgd", "adam"});
  t.optimizer = opt == "sgd" ? tr::Optimizer::Kind::kSgd : tr::Optimizer::Kind::kAdam;
  t.lr = scenario::read_double(c, "lr", opt == "sgd" ? 0.1 : 0.01, scenario::Interval{0, 10, /*lo_open=*/true});
  t.momentum = scenario::read_double(c, "momentum", 0.9, scenario::Interval{0, 1, /*lo_open=*/false, /*hi_open=*/true});
  return t;
}

}  // namespace lockstep::workloads
