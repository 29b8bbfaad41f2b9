#include "harness/kinds/split/spec.h"

namespace lockstep::workloads {

SplitSpec SplitSpec::read(const scenario::Config& c) {
  SplitSpec t;
  t.num_ids = scenario::read_int(c, "num_ids", t.num_ids, 0, std::int64_t{1} << 24);
  t.batch_size = scenario::read_int(c, "batch_size", t.batch_size, 1, std::int64_t{1} << 24);
  return t;
}

}  // namespace lockstep::workloads
