#include "harness/scenario/catalog.h"

#include <algorithm>
#include <set>

#include "harness/core/error.h"
#include "harness/scenario/config_internal.h"

namespace lockstep::scenario {
namespace {

bool snake_case(const std::string& s) {
  if (s.empty() || !(s[0] >= 'a' && s[0] <= 'z')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
}

}  // namespace

Catalog load_catalog(const std::string& path) {
  Catalog cat;
  cat.file = path;
  const Config root = internal::load_document(path);
  const std::int64_t version = root.get_int("schema_version");
  if (version != 1) root.fail("schema_version", "this lockstep reads catalog schema 1, got " + std::to_string(version));
  std::set<std::string> ids;
  for (const Config& t : internal::get_table_array(root, "class")) {
    BugClass c;
    c.where = t.where();
    c.id = t.get_string("id");
    if (!snake_case(c.id)) t.fail("id", "must be snake_case ([a-z][a-z0-9_]*), got '" + c.id + "'");
    if (!ids.insert(c.id).second) t.fail("id", "duplicate class id '" + c.id + "'");
    c.title = t.get_string("title");
    c.source = t.get_string("source");
    if (c.source.empty()) t.fail("source", "must name the public report (a URL, or \"CONTEXT.md: <incident>\")");
    c.also = t.get_string_list("also", {});
    c.scenarios = t.get_string_list("scenarios", {});
    if (c.scenarios.empty()) t.fail("scenarios", "must list at least one scenario that injects the bug");
    const std::string expect = t.get_string("expect");
    const auto kind = diagnosis_kind_from_string(expect);
    if (!kind) t.fail("expect", "unknown diagnosis kind '" + expect + "' (scenarios/README.md lists them)");
    c.expect = *kind;
    c.note = t.get_string("note", "");
    t.finish();
    cat.classes.push_back(std::move(c));
  }
  root.finish();
  if (cat.classes.empty()) throw InputError(path + ": no [[class]] tables");
  return cat;
}

std::vector<const Scenario*> resolve(const BugClass& c, const std::vector<Scenario>& all) {
  std::vector<const Scenario*> out;
  for (const auto& name : c.scenarios) {
    std::size_t found = 0;
    for (const auto& s : all) {
      if (s.name != name && s.id() != name) continue;
      ++found;
      if (!s.expect.kind || *s.expect.kind != c.expect) {
        throw InputError(c.where + ": class " + c.id + " expects " + std::string(to_string(c.expect)) + ", but scenario " +
                         s.id() + " (" + s.file + ") expects " + s.expect.expected_label());
      }
      if (std::find(out.begin(), out.end(), &s) == out.end()) out.push_back(&s);
    }
    if (found == 0) throw InputError(c.where + ": class " + c.id + ": no scenario named '" + name + "'");
  }
  return out;
}

}  // namespace lockstep::scenario
