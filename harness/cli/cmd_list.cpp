#include <iomanip>
#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "harness/cli/commands.h"
#include "harness/launch/suite.h"
#include "harness/scenario/scenario.h"
#include "harness/validate/validate.h"

namespace lockstep::cli {

void add_list(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("list", "List the scenario variants found under PATHS");
  auto paths = std::make_shared<std::vector<std::string>>();
  auto json = std::make_shared<bool>(false);
  auto filter = std::make_shared<std::string>();
  cmd->add_option("paths", *paths, "scenario files or directories (searched for *.toml)")->required();
  cmd->add_flag("--json", *json, "print a JSON array instead of a table");
  cmd->add_option("--filter", *filter, "list only scenarios whose id or a tag matches this regex (as run --filter selects them)");
  cmd->footer("Exit codes: 0 something listed; 2 a broken scenario file; 5 nothing selected.\n\n"
              "Examples:\n"
              "  lockstep list scenarios\n"
              "  lockstep list scenarios --filter 'mismatch|split' --json");
  cmd->callback([paths, json, filter, &exit_code] {
    const auto scenarios = launch::filter_scenarios(lockstep::validate::load_paths(*paths), *filter);
    if (*json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& s : scenarios) {
        out.push_back({{"id", s.id()}, {"name", s.name}, {"file", s.file}, {"variant", s.variant},
                       {"workload", s.workload}, {"world_size", s.world_size},
                       {"backend", scenario::to_string(s.backend)}, {"expected", s.expect.expected_label()},
                       {"tags", s.tags}, {"requires_cuda", s.requires_cuda}});
        if (s.system) out.back()["system"] = s.system->name;
      }
      std::cout << out.dump(2) << '\n';
    } else {
      for (const auto& s : scenarios) {
        std::cout << std::left << std::setw(48) << s.id() << ' ' << std::setw(12) << s.workload << " ws="
                  << std::setw(2) << s.world_size << ' ' << std::setw(5)
                  << (s.system ? "sut:" + s.system->name : std::string(scenario::to_string(s.backend))) << " expect " << s.expect.expected_label() << (s.requires_cuda ? "  [cuda]" : "") << '\n';
      }
    }
    if (scenarios.empty()) std::cerr << "no scenario selected" << (filter->empty() ? "" : " by --filter '" + *filter + "'") << '\n';
    exit_code = scenarios.empty() ? launch::kExitNothingSelected : 0;
  });
}

}  // namespace lockstep::cli
