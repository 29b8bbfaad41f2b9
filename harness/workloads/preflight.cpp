#include "harness/workloads/preflight.h"

#include <map>
#include <sstream>
#include <vector>

#include "harness/comm/communicator.h"
#include "harness/comm/dtype.h"
#include "harness/core/diagnosis.h"

namespace lockstep::workloads {

void preflight_steps(comm::Communicator& comm, std::int64_t my_steps, const std::string& what) {
  const std::string phase = comm.phase();
  const std::int64_t step = comm.step();
  comm.set_phase("preflight");
  comm.set_step(-1);
  std::vector<std::int64_t> mine{my_steps};
  std::vector<std::int64_t> all(static_cast<std::size_t>(comm.world_size()));
  comm.all_gather(comm::view_of(mine), comm::view_of(all));
  comm.set_phase(phase);
  comm.set_step(step);

  if (auto d = uneven_steps(all, what)) throw DiagnosisError(*d);
}

std::optional<Diagnosis> uneven_steps(const std::vector<std::int64_t>& all, const std::string& what) {
  std::map<std::int64_t, int> votes;
  for (auto s : all) ++votes[s];
  if (votes.size() <= 1) return std::nullopt;
  std::int64_t common = all[0];
  int best = 0;
  for (const auto& [steps, n] : votes) {
    if (n > best) {
      best = n;
      common = steps;
    }
  }
  int blamed = -1;
  std::ostringstream os;
  os << "ranks would run different numbers of steps (" << what << "):";
  for (std::size_t r = 0; r < all.size(); ++r) {
    os << (r ? "," : "") << " rank " << r << ' ' << all[r];
    if (blamed < 0 && all[r] != common) blamed = static_cast<int>(r);
  }
  return Diagnosis{DiagnosisKind::kUnevenSteps, os.str(), blamed, -1};
}

}  // namespace lockstep::workloads
