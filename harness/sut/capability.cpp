#include "harness/sut/capability.h"

#include <algorithm>

#include "harness/core/error.h"

namespace lockstep::sut {

// One factory per capability file; add new capabilities here.
Capability lookup_capability();
Capability sampling_capability();
Capability embedding_capability();
Capability training_capability();
Capability split_capability();

const std::vector<Capability>& capabilities() {
  static const std::vector<Capability> all = [] {
    std::vector<Capability> v = {embedding_capability(), lookup_capability(), sampling_capability(), split_capability(),
                                  training_capability()};
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
