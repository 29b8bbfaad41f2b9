#include <iostream>

#include <CLI/CLI.hpp>

#include "harness/cli/commands.h"
#include "harness/scenario/scenario.h"
#include "harness/validate/validate.h"

namespace lockstep::cli {

void add_validate(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("validate", "Parse and validate scenario files without running them; every error of every file, then exit 2");
  auto paths = std::make_shared<std::vector<std::string>>();
  cmd->add_option("paths", *paths, "scenario files or directories (searched for *.toml)")->required();
  cmd->footer("Examples:\n  lockstep validate scenarios\n  lockstep validate my_suite/ other.toml");
  cmd->callback([paths, &exit_code] {
    // The same loading as run (duplicate ids across files included), running nothing.
    const auto files = scenario::expand_paths(*paths);
    const std::size_t variants = lockstep::validate::load_paths(*paths).size();  // throws every file's errors at once
    std::cout << "ok: " << files.size() << " file(s), " << variants << " scenario variant(s)\n";
    exit_code = 0;
  });
}

}  // namespace lockstep::cli
