// Capability "split" for systems under test: the system splits N training ids over the W ranks
// with its own code (e.g. PyG's multi-GPU example, `ids.split(ids.size(0) // world_size)`), and
// each rank says how many steps it will run. Judged as lockstep's own `split` workload is
// (harness/kinds/split/check.h): every id on exactly one rank, shares within one id of each
// other (split_coverage), and one step count on every rank (uneven_steps, the hang that unequal
// counts cause in DDP).
#include <string>
#include <vector>

#include "harness/core/diagnosis.h"
#include "harness/sut/capability.h"
#include "harness/sut/common.h"
#include "harness/workloads/digest.h"
#include "harness/workloads/preflight.h"
#include "harness/kinds/split/check.h"
#include "harness/kinds/split/spec.h"

namespace lockstep::sut {
namespace {

using I64 = std::vector<std::int64_t>;

using Options = workloads::SplitSpec;

Options read_options(const scenario::Scenario& s) {
  const auto& c = s.workload_config;
  const Options o = Options::read(c);
  c.finish();
  s.system->profile.finish();
  return o;
}

void write_inputs(const scenario::Scenario& s, InputWriter& w) {
  const Options o = read_options(s);
  const I64 ids = workloads::split_ids(o.num_ids, s.seed);
  w.config("num_ids", o.num_ids);
  w.config("batch_size", o.batch_size);
  w.array("ids", ids, {o.num_ids}, "every training id (a permutation of [0, num_ids)), the same on every rank: split them");
}

CheckResult check(const scenario::Scenario& s, const SystemOutputs& out) {
  const Options o = read_options(s);
  const int ws = out.world_size();
  std::vector<I64> shares(static_cast<std::size_t>(ws));
  I64 steps(static_cast<std::size_t>(ws));
  for (int r = 0; r < ws; ++r) {
    for (const char* name : {"ids", "steps"}) {
      if (auto why = out.rejected(r, name)) contract_violation(r, name, std::string("the system raised: ") + *why);
      if (!out.has(r, name)) contract_violation(r, name, "missing (every rank writes its ids and its step count)");
    }
    std::vector<std::int64_t> shape;
    shares[static_cast<std::size_t>(r)] = out.int64s(r, "ids", Declared::kInt64, &shape);
    if (shape.size() != 1) contract_violation(r, "ids", "must be one-dimensional (this rank's ids), got " + std::to_string(shape.size()) + " dimensions");
    const I64 n = out.int64s(r, "steps", Declared::kInt64, &shape);
    if (n.size() != 1) contract_violation(r, "steps", "must hold one value (the steps this rank will run), got " + std::to_string(n.size()));
    steps[static_cast<std::size_t>(r)] = n[0];
  }
  if (auto d = workloads::split_cover(o.num_ids, shares)) throw DiagnosisError(*d);
  if (auto d = workloads::uneven_steps(steps, "each rank's own count, batch_size " + std::to_string(o.batch_size))) {
    throw DiagnosisError(*d);
  }
  CheckResult res;
  I64 stream;
  for (int r = 0; r < ws; ++r) {
    const I64& mine = shares[static_cast<std::size_t>(r)];
    stream.push_back(static_cast<std::int64_t>(mine.size()));
    stream.insert(stream.end(), mine.begin(), mine.end());
    stream.push_back(steps[static_cast<std::size_t>(r)]);
  }
  res.digest = workloads::digest_hex(stream);
  res.metrics["steps"] = static_cast<double>(steps.empty() ? 0 : steps[0]);
  return res;
}

}  // namespace

Capability split_capability() {
  return {"split", "the split of the training ids over the ranks: every id once, shares within one, equal step counts",
          [](const auto& s) { read_options(s); }, write_inputs, check, nullptr};
}

}  // namespace lockstep::sut
