#include "harness/sut/capability.h"

#include <algorithm>

#include "harness/core/error.h"
#include "harness/kinds/kinds.h"

namespace lockstep::sut {

// One factory per kind's capability (harness/kinds/<kind>/capability.cpp), from the one list.
#define LOCKSTEP_NO_WORKLOAD(kind)
#define LOCKSTEP_DECLARE_CAPABILITY(kind) Capability kind##_capability();
LOCKSTEP_KINDS(LOCKSTEP_NO_WORKLOAD, LOCKSTEP_DECLARE_CAPABILITY)
#undef LOCKSTEP_DECLARE_CAPABILITY

const std::vector<Capability>& capabilities() {
  static const std::vector<Capability> all = [] {
    std::vector<Capability> v;
#define LOCKSTEP_ADD_CAPABILITY(kind) v.push_back(kind##_capability());
    LOCKSTEP_KINDS(LOCKSTEP_NO_WORKLOAD, LOCKSTEP_ADD_CAPABILITY)
#undef LOCKSTEP_ADD_CAPABILITY
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    return v;
  }();
  return all;
}

const Capability* find_capability(std::string_view name) {
  for (const auto& c : capabilities()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

void validate(const scenario::Scenario& s) {
  const Capability* cap = find_capability(s.workload);
  if (!cap) {
    std::string names;
    for (const auto& c : capabilities()) names += (names.empty() ? "" : ", ") + c.name;
    s.workload_config.fail("kind", "a system under test can do '" + names + "', not '" + s.workload + "'");
  }
  if (!s.injections.empty()) {
    s.injections.front().config.fail("kind", "[[inject]] does not apply to a system under test ([system] " +
                                                 s.system->name + "): its own behaviour is what is checked");
  }
  cap->validate(s);
}

}  // namespace lockstep::sut
