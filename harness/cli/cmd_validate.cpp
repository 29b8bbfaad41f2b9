#include <iostream>

#include <CLI/CLI.hpp>

#include "harness/cli/commands.h"
#include "harness/scenario/scenario.h"

namespace lockstep::cli {

void add_validate(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("validate", "Parse and validate scenario files without running them; exit 2 on the first error");
  auto paths = std::make_shared<std::vector<std::string>>();
  cmd->add_option("paths", *paths, "scenario files or directories (searched for *.toml)")->required();
  cmd->callback([paths, &exit_code] {
    const auto files = scenario::expand_paths(*paths);
    std::size_t variants = 0;
    for (const auto& f : files) variants += scenario::load_file(f).size();
    std::cout << "ok: " << files.size() << " file(s), " << variants << " scenario variant(s)\n";
    exit_code = 0;
  });
}

}  // namespace lockstep::cli
