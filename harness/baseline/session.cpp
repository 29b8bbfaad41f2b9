#include "harness/baseline/session.h"

#include <filesystem>
#include <iomanip>
#include <ostream>

#include "harness/core/error.h"
#include "harness/launch/suite.h"
#include "harness/launch/verdict.h"

namespace lockstep::baseline {
namespace {

namespace fs = std::filesystem;

bool clean(const report::ScenarioResult& r) { return r.status == report::Status::kPass && !r.diagnosis; }


}  // namespace

Session run_repeated(const std::vector<scenario::Scenario>& scenarios, const launch::LaunchOptions& options,
                     int repeat, std::ostream& out) {
  Session s;
  for (int i = 0; i < repeat; ++i) {
    launch::LaunchOptions o = options;
    // Flat: with several repeats each has its own folder beside the others (and the checks'
    // confirm-K), and REPORT_DIR's results.json points into repeat-1.
    if (repeat > 1) o.report_dir = (fs::path(options.report_dir) / ("repeat-" + std::to_string(i + 1))).string();
    o.defer_report = i == 0;  // check_session writes it, after the baseline checks
    o.quiet_summary = true;   // one summary for the session, after the checks (print_summary)
    if (repeat > 1) {
      o.label = "repeat " + std::to_string(i + 1) + "/" + std::to_string(repeat);
      out << "== " << o.label << " ==\n";
    }
    s.runs.push_back(launch::run_suite(scenarios, o, out));
    s.dirs.push_back(o.report_dir);
  }
  return s;
}

int check_session(Store& store, const std::string& environment, const std::vector<scenario::Scenario>& scenarios,
                  Session& session, const launch::LaunchOptions& options, int repeat, const RuleOptions& rule,
                  std::ostream& out, std::map<std::string, std::pair<std::string, std::string>>* verdicts) {
  const auto base = load_baseline(store, environment);
  if (base.empty()) {
    write_session_report(session, options.report_dir);  // the runs are kept, unchecked
    throw InputError(store.db().path() + ": no recorded runs for environment '" + environment +
                     "'; record them first with `lockstep record PATHS --baseline " + store.db().path() + "`");
  }
  int failed = 0;
  struct Line {
    std::string id, digest, sequence, throughput, verdict, detail;
  };
  std::vector<Line> lines;
  auto& first = session.runs.front().results;
  for (std::size_t i = 0; i < scenarios.size() && i < first.size(); ++i) {
    Line line{first[i].id, "-", "-", "-", "ok", ""};
    auto it = base.find(first[i].id);
    if (it == base.end()) {
      line.verdict = "not in baseline";
      lines.push_back(line);
      continue;
    }
    const ScenarioBaseline& b = it->second;
    Observation obs;
    obs.scenario = first[i].id;
    obs.clean = true;
    for (std::size_t k = 0; k < session.runs.size(); ++k) {
      const auto& r = session.runs[k].results[i];
      obs.clean = obs.clean && clean(r);
      obs.digests.push_back(r.digest);
      obs.sequences.push_back(clean(r) ? read_sequence((fs::path(session.dirs[k]) / r.artifacts).string(), r.world_size)
                                       : std::nullopt);
      const std::string artifacts = (fs::path(session.dirs[k]) / r.artifacts).string();
      obs.numbers.push_back([&r, artifacts] { return numerics_of(r, artifacts); });
      if (clean(r)) add_run_samples(r.metrics, r.samples, obs.samples, obs.run_medians);
    }
    if (!obs.clean || b.status != "pass" || !b.diagnosis.empty()) {
      line.verdict = obs.clean ? "baseline not clean: not checked" : "not clean: not checked";
      lines.push_back(line);
      continue;
    }
    std::optional<Diagnosis> d = check_exact(store, b, obs);
    line.digest = b.digest.empty() ? "-" : "same";
    line.sequence = b.sequence.empty() ? "-" : "same";
    if (d && d->kind == DiagnosisKind::kResultMismatch) line.digest = "CHANGED";
    if (d && d->kind == DiagnosisKind::kSequenceChanged) line.sequence = "CHANGED";
    if (!d) {
      auto suspects = throughput_suspects(b, obs.samples, obs.run_medians, rule);
      int judged = 0;
      for (const auto& [m, xs] : obs.samples) {
        auto bs = b.samples.find(m);
        if (bs != b.samples.end() && judge(m, bs->second, xs, rule_for(m, rule)).judged) ++judged;  // counts only
      }
      line.throughput = judged ? "ok (" + std::to_string(judged) + ")" : "-";
      if (!suspects.empty()) {
        // Confirm with fresh samples: the rule must fire again, so one disturbed window never
        // declares a regression.
        out << "throughput suspect " << obs.scenario << ": " << suspects.front().first << " "
            << describe(suspects.front().second) << "; re-measuring " << repeat << "x\n";
        std::map<std::string, std::vector<double>> fresh, fresh_runs;
        for (int k = 0; k < repeat; ++k) {
          launch::LaunchOptions o = options;
          o.progress = false;
          o.report_dir = (fs::path(options.report_dir) / ("confirm-" + std::to_string(k + 1))).string();
          const auto r = launch::run_scenario(scenarios[i], o);
          if (clean(r)) add_run_samples(r.metrics, r.samples, fresh, fresh_runs);
        }
        std::string what;
        for (const auto& [m, j] : throughput_suspects(b, fresh, fresh_runs, rule)) {
          what += (what.empty() ? "" : "; ") + m + " " + describe(j);
        }
        if (!what.empty()) {
          d = Diagnosis{DiagnosisKind::kThroughputRegression, obs.scenario + ": slower than recorded: " + what, -1, -1};
          line.throughput = "SLOWER";
        } else {
          line.throughput = "ok (suspect not confirmed)";
        }
      }
    }
    if (d) {
      ++failed;
      line.verdict = std::string(to_string(d->kind));
      auto& r = first[i];
      r.diagnosis = *d;
      r.diagnosis->message = "baseline " + environment + ": " + d->message;
      launch::decide(launch::expectation_for(scenarios[i], r), r);
      line.detail = d->message;
      out << "FAIL  " << r.id << "  " << to_string(d->kind) << "\n        " << d->message << '\n';
    }
    lines.push_back(line);
  }
  std::size_t w = 8;
  for (const auto& l : lines) w = std::max(w, l.id.size());
  out << "\nbaseline checks against " << environment << ":\n"
      << std::left << std::setw(static_cast<int>(w)) << "scenario" << "  " << std::setw(8) << "digest" << std::setw(10)
      << "sequence" << std::setw(28) << "throughput" << "verdict\n";
  for (const auto& l : lines) {
    out << std::left << std::setw(static_cast<int>(w)) << l.id << "  " << std::setw(8) << l.digest << std::setw(10)
        << l.sequence << std::setw(28) << l.throughput << l.verdict << '\n';
  }
  out << failed << " scenario(s) failed a baseline check\n";
  if (verdicts) {
    for (const auto& l : lines) {
      std::string detail = l.detail;
      if (detail.empty() && l.throughput != "-") detail = "throughput " + l.throughput;
      (*verdicts)[l.id] = {l.verdict, detail};
    }
  }
  write_session_report(session, options.report_dir);
  return failed;
}

void write_session_report(const Session& session, const std::string& report_dir) {
  report::RunSummary run = session.runs.front();
  const fs::path rel = fs::path(session.dirs.front()).lexically_relative(report_dir);
  if (!rel.empty() && rel != ".") {
    for (auto& r : run.results) {
      if (!r.artifacts.empty()) r.artifacts = (rel / r.artifacts).generic_string();
    }
  }
  launch::write_report(run, report_dir);
}

}  // namespace lockstep::baseline
