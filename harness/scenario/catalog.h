#pragma once
// The known-bug catalog (scenarios/catalog.toml): each class is a publicly reported bug, the
// scenarios that inject or reproduce it, and the diagnosis they must give. `lockstep catalog`
// runs them and reports a detection score. Schema: scenarios/README.md, "Known-bug catalog".
#include <string>
#include <vector>

#include "harness/core/diagnosis.h"
#include "harness/scenario/scenario.h"

namespace lockstep::scenario {

struct BugClass {
  std::string id;
  std::string title;
  std::string source;              // the public report: a URL, or "CONTEXT.md: <incident>"
  std::vector<std::string> also;   // further reports of the same class
  std::vector<std::string> scenarios;  // names (every variant) or ids "name[variant]"
  DiagnosisKind expect = DiagnosisKind::kTimeout;
  std::string note;
  std::string where;               // file:line of the [[class]] table
};

struct Catalog {
  std::string file;
  std::vector<BugClass> classes;
};

// Loads and checks the catalog: schema_version 1, unique snake_case ids, a source, at least
// one scenario and a known diagnosis kind per class. Throws InputError with file:line.
Catalog load_catalog(const std::string& path);

// The scenarios of `all` that `c` names, in `all`'s order. Throws InputError (naming the
// class's file:line) when a name matches nothing, or when a matched scenario expects another
// outcome than the class.
std::vector<const Scenario*> resolve(const BugClass& c, const std::vector<Scenario>& all);

}  // namespace lockstep::scenario
