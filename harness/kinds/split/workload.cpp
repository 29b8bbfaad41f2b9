// Workload "split": splits a global id set (the training seeds) across the ranks, agrees on the
// step count before the first step, runs the steps (one gradient-sync all_reduce each, as DDP
// does), and checks the split against the reference: exactly world_size chunks, every id
// exactly once, chunk sizes within one of each other.
#include <algorithm>
#include <sstream>

#include "harness/comm/board.h"
#include "harness/comm/communicator.h"
#include "harness/comm/dtype.h"
#include "harness/report/dump.h"
#include "harness/workloads/digest.h"
#include "harness/workloads/preflight.h"
#include "harness/kinds/split/check.h"
#include "harness/kinds/split/spec.h"
#include "harness/workloads/workload.h"
#include "reference/common/philox.h"
#include "reference/split/split.h"

namespace lockstep::workloads {
namespace {

// The shared keys (SplitSpec), then lockstep's own.
struct Options : SplitSpec {
  ref::StepPolicy policy = ref::StepPolicy::kEven;
  bool preflight = true;
  bool floor_bug = false;            // [[inject]] floor_division_split
  bool round_robin = false;          //   assign = "round_robin": extra chunks go to rank i % ws
};

class Split final : public Workload {
 public:
  explicit Split(Options o) : o_(o) {}

  void run(RankContext& ctx) override {
    const int ws = ctx.world_size;
    const auto ids = split_ids(o_.num_ids, ctx.scenario.seed);
    std::vector<std::vector<std::int64_t>> chunks =
        o_.floor_bug ? ref::floor_division_split(ids, ws) : ref::rank_split(ids, ws);
    // The floor-division bug changes nothing when the ids divide evenly.
    if (o_.floor_bug && ids.size() % static_cast<std::size_t>(ws) != 0) comm::mark_fired("floor_division_split");
    const std::size_t produced = chunks.size();
    std::vector<std::int64_t> mine;
    for (std::size_t c = 0; c < chunks.size(); ++c) {
      const bool is_mine = o_.round_robin ? static_cast<int>(c % static_cast<std::size_t>(ws)) == ctx.rank
                                          : static_cast<int>(c) == ctx.rank;
      if (is_mine) mine.insert(mine.end(), chunks[c].begin(), chunks[c].end());
    }

    std::vector<std::int64_t> sizes(static_cast<std::size_t>(ws));
    for (int r = 0; r < ws; ++r) {
      std::int64_t n = 0;
      for (std::size_t c = 0; c < chunks.size(); ++c) {
        const bool theirs = o_.round_robin ? static_cast<int>(c % static_cast<std::size_t>(ws)) == r : static_cast<int>(c) == r;
        if (theirs) n += static_cast<std::int64_t>(chunks[c].size());
      }
      sizes[static_cast<std::size_t>(r)] = n;
    }
    // With the injected bug each rank counts its own batches, as a per-rank loader does;
    // otherwise all ranks apply the agreed policy to the same chunk sizes.
    const std::int64_t steps = o_.floor_bug
        ? (static_cast<std::int64_t>(mine.size()) + o_.batch_size - 1) / o_.batch_size
        : ref::agreed_steps(o_.policy, sizes, o_.batch_size);

    ctx.comm.set_phase("split");
    const std::string source = o_.floor_bug ? std::string("per-rank batch counts") : ref::to_string(o_.policy);
    if (o_.preflight) preflight_steps(ctx.comm, steps, source + ", batch_size " + std::to_string(o_.batch_size));
    check_cover(ctx, ids, mine, produced);

    auto batches = o_.floor_bug ? naive_batches(mine) : ref::batches(mine, steps, o_.batch_size, o_.policy, ids, ws);
    std::int64_t seen = 0;
    for (std::int64_t s = 0; s < steps; ++s) {
      ctx.comm.set_step(s);
      std::vector<std::int64_t> grad{static_cast<std::int64_t>(batches[static_cast<std::size_t>(s)].size())};
      ctx.comm.all_reduce(comm::view_of(grad));  // the step's gradient sync
      seen += grad[0];
    }
    ctx.metrics["steps"] = static_cast<double>(steps);
    ctx.metrics["samples_seen"] = static_cast<double>(seen);
    ctx.dump.write("split_ids", mine, "global ids assigned to this rank, in order");
    std::vector<std::int64_t> step_sizes;
    for (const auto& b : batches) step_sizes.push_back(static_cast<std::int64_t>(b.size()));
    ctx.dump.write("batch_sizes", step_sizes, "number of ids in each of this rank's batches");
  }

 private:
  std::vector<std::vector<std::int64_t>> naive_batches(const std::vector<std::int64_t>& mine) const {
    std::vector<std::vector<std::int64_t>> out;
    for (std::size_t i = 0; i < mine.size(); i += static_cast<std::size_t>(o_.batch_size)) {
      out.emplace_back(mine.begin() + static_cast<std::ptrdiff_t>(i),
                       mine.begin() + static_cast<std::ptrdiff_t>(std::min(mine.size(), i + static_cast<std::size_t>(o_.batch_size))));
    }
    return out;
  }

  // Gathers every rank's ids and checks the cover on every rank (all reach the same verdict).
  void check_cover(RankContext& ctx, const std::vector<std::int64_t>& ids, const std::vector<std::int64_t>& mine,
                   std::size_t produced) {
    const int ws = ctx.world_size;
    std::vector<std::int64_t> my_size{static_cast<std::int64_t>(mine.size())};
    std::vector<std::int64_t> sizes(static_cast<std::size_t>(ws));
    ctx.comm.all_gather(comm::view_of(my_size), comm::view_of(sizes));
    const std::int64_t width = std::max<std::int64_t>(1, *std::max_element(sizes.begin(), sizes.end()));
    std::vector<std::int64_t> padded(static_cast<std::size_t>(width), -1);
    std::copy(mine.begin(), mine.end(), padded.begin());
    std::vector<std::int64_t> all(static_cast<std::size_t>(width * ws));
    ctx.comm.all_gather(comm::view_of(padded), comm::view_of(all));

    auto fail = [&](const std::string& msg, int rank) {
      throw DiagnosisError(Diagnosis{DiagnosisKind::kSplitCoverage, msg, rank, -1});
    };
    if (produced != static_cast<std::size_t>(ws)) {
      std::ostringstream os;
      os << "the split made " << produced << " chunks for world_size " << ws;
      std::vector<int> owners(static_cast<std::size_t>(o_.num_ids), -1);
      std::int64_t lost = 0;
      for (int r = 0; r < ws; ++r) {
        for (std::int64_t k = 0; k < sizes[static_cast<std::size_t>(r)]; ++k) owners[static_cast<std::size_t>(all[static_cast<std::size_t>(r * width + k)])] = r;
      }
      for (auto o : owners) lost += o < 0;
      if (lost) os << "; " << lost << " of " << o_.num_ids << " ids are on no rank";
      if (o_.round_robin) os << "; rank 0 holds " << sizes[0] << " ids";
      if (lost || !o_.round_robin) fail(os.str(), -1);
    }
    std::vector<std::vector<std::int64_t>> shares(static_cast<std::size_t>(ws));
    for (int r = 0; r < ws; ++r) {
      const auto at = all.begin() + static_cast<std::ptrdiff_t>(r * width);
      shares[static_cast<std::size_t>(r)].assign(at, at + sizes[static_cast<std::size_t>(r)]);
    }
    if (auto d = split_cover(o_.num_ids, shares)) throw DiagnosisError(*d);
    if (ctx.rank == 0) {
      // Every id is covered once the checks pass.
      std::vector<std::int64_t> covered(static_cast<std::size_t>(o_.num_ids));
      for (std::int64_t id = 0; id < o_.num_ids; ++id) covered[static_cast<std::size_t>(id)] = id;
      ctx.digest = digest_hex(covered);
    }
  }

  Options o_;
};

std::unique_ptr<Workload> make(const scenario::Scenario& s) {
  const scenario::Config& c = s.workload_config;
  Options o;
  (void)c.get_string("kind");
  static_cast<SplitSpec&>(o) = SplitSpec::read(c);
  const std::string policy = c.get_string("policy", "even");
  try {
    o.policy = ref::step_policy_from_string(policy);
  } catch (const std::invalid_argument&) {
    c.fail("policy", "unknown policy '" + policy + "' (drop_last, pad, even)");
  }
  o.preflight = c.get_bool("preflight", true);
  c.finish();
  for (const auto& inj : s.injections) {
    if (inj.kind != "floor_division_split") continue;
    (void)inj.config.get_string("kind");
    o.floor_bug = true;
    const std::string assign = inj.config.get_string("assign", "drop");
    if (assign != "drop" && assign != "round_robin") inj.config.fail("assign", "must be 'drop' or 'round_robin', got '" + assign + "'");
    o.round_robin = assign == "round_robin";
    inj.config.finish();
  }
  return std::make_unique<Split>(o);
}

}  // namespace

WorkloadSpec split_spec() {
  return WorkloadSpec{"split",
                      "splits the training ids over the ranks, agrees on steps, checks exact cover",
                      make, {"floor_division_split"}};
}

}  // namespace lockstep::workloads
