// lockstep catalog: runs the scenarios of the known-bug catalog and reports, per class, whether
// lockstep detects it (every scenario that ran gave the expected diagnosis), and the share of
// classes detected. Exit 0 at 100%, 1 below, 2 on a bad catalog.
#include <unistd.h>

#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <set>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "harness/core/env.h"
#include "harness/core/error.h"
#include "harness/cli/commands.h"
#include "harness/core/fs.h"
#include "harness/launch/cancel.h"
#include "harness/launch/launcher.h"
#include "harness/launch/suite.h"
#include "harness/scenario/catalog.h"
#include "harness/validate/validate.h"

namespace lockstep::cli {
namespace fs = std::filesystem;

void add_catalog(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "catalog",
      "Run the known-bug catalog (scenarios/catalog.toml) and print, per bug class, its public report and\n"
      "whether lockstep detects it, then the detection score; exit 1 below 100%");
  struct Args {
    std::string catalog = "scenarios/catalog.toml";
    std::string report_dir;
    int max_ranks = 16;
    bool no_contain = false;
    std::string python;
    std::string filter;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--catalog", a->catalog,
                  "the catalog file; its scenarios are looked up in the folder it is in (relative to the current\n"
                  "folder: from elsewhere, pass --catalog <lockstep checkout>/scenarios/catalog.toml)")
      ->capture_default_str();
  cmd->add_option("--report-dir", a->report_dir,
                  "where the run's report and catalog.json go (default: a new folder per run under lockstep-report/)");
  cmd->add_option("--max-ranks", a->max_ranks, "skip scenarios that need more rank processes than this")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  add_python_option(cmd, a->python);
  cmd->add_option("--filter", a->filter,
                  "only the bug classes whose id, or one of whose scenarios' id or tags, matches this regex");
  add_no_contain_flag(cmd, a->no_contain);
  cmd->footer(
      "Examples:\n"
      "  lockstep catalog                                  # from a lockstep checkout\n"
      "  lockstep catalog --filter 'split|dtype' --catalog ~/lockstep/scenarios/catalog.toml");
  cmd->callback([a, &exit_code] {
    contain(a->no_contain);
    std::error_code ec;
    if (!fs::exists(a->catalog, ec)) {
      throw InputError(a->catalog + ": no such file (the catalog is scenarios/catalog.toml in a lockstep checkout; run "
                       "from there, or pass --catalog PATH)");
    }
    auto cat = scenario::load_catalog(a->catalog);
    const std::string dir = fs::path(a->catalog).parent_path().empty() ? "." : fs::path(a->catalog).parent_path().string();
    const auto all = lockstep::validate::load_paths({dir});
    // Resolve every class first: a bad catalog is an input error before anything runs.
    std::vector<std::vector<const scenario::Scenario*>> members;
    std::vector<scenario::Scenario> to_run;
    std::set<std::string> queued;
    std::optional<std::regex> keep;
    if (!a->filter.empty()) {
      try {
        keep.emplace(a->filter);
      } catch (const std::regex_error& e) {
        throw InputError("--filter: invalid regex '" + a->filter + "': " + e.what());
      }
    }
    std::vector<scenario::BugClass> selected;
    for (const auto& c : cat.classes) {
      auto m = scenario::resolve(c, all);
      bool hit = !keep || std::regex_search(c.id, *keep);
      for (const auto* s : m) {
        hit = hit || std::regex_search(s->id(), *keep);
        for (const auto& t : s->tags) hit = hit || std::regex_search(t, *keep);
      }
      if (!hit) continue;
      selected.push_back(c);
      members.push_back(std::move(m));
      for (const auto* s : members.back()) {
        if (queued.insert(s->id()).second) to_run.push_back(*s);
      }
    }
    cat.classes = std::move(selected);
    if (cat.classes.empty()) {
      std::cout << "no bug class selected by --filter '" << a->filter << "': nothing to run (exit "
                << launch::kExitNothingSelected << ")\n";
      exit_code = launch::kExitNothingSelected;
      return;
    }
    check_python(a->python, to_run);
    launch::LaunchOptions opts;
    opts.binary = launch::self_executable();
    const bool fresh = a->report_dir.empty();
    opts.report_dir = fresh ? fresh_report_dir() : a->report_dir;
    prepare_report_dir(opts.report_dir, "--report-dir");
    opts.max_ranks = a->max_ranks;
    opts.progress = isatty(STDOUT_FILENO);
    launch::install_cancel_handlers();
    const auto run = launch::run_suite(to_run, opts, std::cout);
    std::map<std::string, const report::ScenarioResult*> by_id;
    for (const auto& r : run.results) by_id[r.id] = &r;

    std::size_t detected = 0;
    nlohmann::ordered_json classes = nlohmann::ordered_json::array();
    std::cout << "\nknown-bug catalog: " << cat.file << "\n\n";
    std::size_t w = 5;
    for (const auto& c : cat.classes) w = std::max(w, c.id.size());
    std::cout << std::left << std::setw(static_cast<int>(w)) << "class" << "  " << std::setw(21) << "expected diagnosis"
              << "  detected  scenarios (pass/ran, skipped)  report\n";
    for (std::size_t i = 0; i < cat.classes.size(); ++i) {
      const auto& c = cat.classes[i];
      int ran = 0, pass = 0, skipped = 0;
      std::vector<std::string> misses;
      nlohmann::ordered_json scen = nlohmann::ordered_json::array();
      for (const auto* s : members[i]) {
        const auto* r = by_id.at(s->id());
        scen.push_back({{"id", r->id}, {"status", std::string(report::to_string(r->status))}, {"reason", r->reason}});
        if (r->status == report::Status::kSkip || r->status == report::Status::kCancelled) {
          ++skipped;
          continue;
        }
        ++ran;
        if (r->status == report::Status::kPass) ++pass;
        else misses.push_back(r->id + ": " + r->reason);
      }
      // Detected: at least one scenario ran, and every one that ran gave the expected kind.
      const bool ok = ran > 0 && pass == ran;
      detected += ok;
      std::ostringstream counts;
      counts << pass << '/' << ran << (skipped ? ", " + std::to_string(skipped) + " skipped" : "");
      std::cout << std::left << std::setw(static_cast<int>(w)) << c.id << "  " << std::setw(21) << to_string(c.expect) << "  "
                << std::setw(8) << (ok ? "yes" : "NO") << "  " << std::setw(29) << counts.str() << "  " << c.source << '\n';
      for (const auto& m : misses) std::cout << "    " << m << '\n';
      if (ran == 0) std::cout << "    none of its scenarios ran here (all skipped)\n";
      classes.push_back({{"id", c.id},
                         {"title", c.title},
                         {"source", c.source},
                         {"also", c.also},
                         {"expect", std::string(to_string(c.expect))},
                         {"detected", ok},
                         {"scenarios", scen}});
    }
    if (launch::cancelled()) {
      // An interrupted catalog run measured nothing: no score, and no catalog.json.
      std::cout << "\ncancelled by " << launch::cancel_signal_name() << ": no detection score\n";
      exit_code = exit_code_after(1);
      return;
    }
    const double score = 100.0 * static_cast<double>(detected) / static_cast<double>(cat.classes.size());
    std::cout << "\ndetection score: " << detected << '/' << cat.classes.size() << " classes (" << std::fixed
              << std::setprecision(0) << score << "%)\n";
    nlohmann::ordered_json out = {{"schema_version", 1},
                                  {"catalog", cat.file},
                                  {"classes_total", cat.classes.size()},
                                  {"classes_detected", detected},
                                  {"score_percent", score},
                                  {"classes", classes}};
    write_file_atomically((fs::path(opts.report_dir) / "catalog.json").string(), out.dump(2) + "\n");
    if (fresh) link_latest(opts.report_dir);
    exit_code = exit_code_after(detected == cat.classes.size() ? 0 : 1);
  });
}

}  // namespace lockstep::cli
