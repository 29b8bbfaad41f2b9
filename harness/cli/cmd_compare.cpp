#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "harness/baseline/check.h"
#include "harness/cli/commands.h"
#include "harness/core/fs.h"

namespace lockstep::cli {

void add_compare(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "compare",
      "Pre-upgrade compatibility report: one verdict per scenario between two recorded environments\n"
      "(same, within_tolerance, results_changed, sequence_changed, throughput_changed, only_in_from,\n"
      "only_in_to). within_tolerance: the results moved within the scenario's [compare] tolerances.\n"
      "Exit 0 when every scenario is the same or within tolerance, 1 otherwise");
  struct Args {
    std::string baseline, from, to, out;
    bool json = false;
    baseline::RuleOptions rule;
  };
  auto a = std::make_shared<Args>();
  cmd->footer("Examples:\n"
              "  lockstep compare --baseline base.db --from torch-1.13 --to torch-2.15\n"
              "  lockstep compare --baseline base.db --from torch-1.13 --to torch-2.15 --json > compat.json");
  // Show ratios from 2 samples a side (a change still needs the test to reject at alpha,
  // which 2 against 2 never does).
  a->rule.min_samples = 2;
  cmd->add_option("--baseline", a->baseline, "the SQLite baseline database")->required();
  cmd->add_option("--from", a->from, "the environment upgraded from")->required();
  cmd->add_option("--to", a->to, "the environment upgraded to")->required();
  cmd->add_flag("--json", a->json, "print JSON instead of Markdown");
  cmd->add_option("--out", a->out, "also write the report here (Markdown, or JSON with --json)");
  cmd->add_option("--tolerance", a->rule.tolerance, "relative throughput change always tolerated")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 10.0) & finite());
  cmd->add_option("--alpha", a->rule.alpha, "significance level of the one-sided Mann-Whitney tests")
      ->capture_default_str()
      ->check(CLI::Range(1e-9, 0.5) & finite());
  cmd->callback([a, &exit_code] {
    baseline::Store store(a->baseline, baseline::Access::kRead);
    const auto c = baseline::compare(store, a->from, a->to, a->rule);
    const std::string text = a->json ? baseline::comparison_json(c).dump(2) + "\n" : baseline::comparison_markdown(c);
    std::cout << text;
    if (!a->out.empty()) write_file_atomically(a->out, text);
    bool same = true;
    for (const auto& s : c.scenarios)
      same = same && (s.verdict == baseline::Verdict::kSame || s.verdict == baseline::Verdict::kWithinTolerance);
    exit_code = same ? 0 : 1;
  });
}

}  // namespace lockstep::cli
