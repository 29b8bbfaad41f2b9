#include <iostream>
#include <regex>

#include <CLI/CLI.hpp>

#include "harness/cli/commands.h"
#include "harness/core/error.h"
#include "harness/launch/suite.h"

namespace lockstep::cli {

void add_run(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("run", "Run scenario files or directories and judge each against its expectation");
  struct Args {
    std::vector<std::string> paths;
    std::string report_dir = "lockstep-report";
    std::string filter;
    bool dump = false;
    int max_ranks = 16;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("paths", a->paths, "scenario files or directories (searched for *.toml)")->required();
  cmd->add_option("--report-dir", a->report_dir,
                  "write results.json, junit.xml and per-scenario rank logs and traces here")
      ->capture_default_str();
  cmd->add_option("--filter", a->filter, "run only scenarios whose id or a tag matches this regex (ECMAScript, searched)");
  cmd->add_flag("--dump", a->dump, "write each workload's canonical outputs as .npy + manifest.json under REPORT_DIR/dump/");
  cmd->add_option("--max-ranks", a->max_ranks, "skip scenarios that need more rank processes than this")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->callback([a, &exit_code] {
    auto scenarios = scenario::load_paths(a->paths);
    if (!a->filter.empty()) {
      std::regex re;
      try {
        re = std::regex(a->filter);
      } catch (const std::regex_error& e) {
        throw InputError("--filter: invalid regex '" + a->filter + "': " + e.what());
      }
      std::vector<scenario::Scenario> kept;
      for (auto& s : scenarios) {
        bool hit = std::regex_search(s.id(), re);
        for (const auto& t : s.tags) hit = hit || std::regex_search(t, re);
        if (hit) kept.push_back(std::move(s));
      }
      scenarios = std::move(kept);
    }
    launch::LaunchOptions opts;
    opts.binary = launch::self_executable();
    opts.report_dir = a->report_dir;
    opts.dump = a->dump;
    opts.max_ranks = a->max_ranks;
    const auto run = launch::run_suite(scenarios, opts, std::cout);
    exit_code = launch::all_met(run) ? 0 : 1;
  });
}

}  // namespace lockstep::cli
