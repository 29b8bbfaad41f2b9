#include "harness/launch/suite.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <map>
#include <optional>
#include <ostream>
#include <regex>
#include <sstream>

#include "harness/core/error.h"
#include "harness/launch/cancel.h"
#include "harness/launch/contain.h"
#include "harness/launch/verdict.h"

#include "harness/comm/engines.h"
#include "harness/comm/verifier.h"
#include "lockstep/config.h"

namespace lockstep::launch {
namespace {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::ostringstream os;
  os << std::put_time(&tm, "%Y-%m-%dT%H:%M:%SZ");
  return os.str();
}

// The console's word for a result: a pass whose expectation was a diagnosis is XFAIL (the bug it
// injects was found, as pytest's expected failures read); results.json and JUnit still say pass.
const char* label(const report::ScenarioResult& r) {
  switch (r.status) {
    case report::Status::kPass: return r.diagnosis ? "XFAIL" : "PASS ";
    case report::Status::kFail: return "FAIL ";
    case report::Status::kSkip: return "SKIP ";
    case report::Status::kError: return "ERROR";
    case report::Status::kCancelled: return "CANCL";
  }
  return "?";
}

}  // namespace

void write_report(const report::RunSummary& run, const std::string& report_dir) {
  report::write_results_json(run, (std::filesystem::path(report_dir) / "results.json").string());
  report::write_junit_xml(run, (std::filesystem::path(report_dir) / "junit.xml").string());
  report::write_markdown_summary(run, (std::filesystem::path(report_dir) / "report.md").string());
}

void check_invariance(const std::vector<scenario::Scenario>& scenarios,
                      std::vector<report::ScenarioResult>& results) {
  std::map<std::string, std::size_t> first_of_file;
  std::map<std::pair<std::string, std::string>, std::size_t> first_with_series;  // (file, series)
  for (std::size_t i = 0; i < scenarios.size(); ++i) {
    const auto& s = scenarios[i];
    auto& r = results[i];
    if (!s.matrix_invariant || s.variant.empty()) continue;
    std::optional<Diagnosis> d;
    if (!r.digest.empty()) {
      auto [it, inserted] = first_of_file.emplace(s.file, i);
      const auto& ref = results[it->second];
      if (!inserted && ref.digest != r.digest) {
        d = Diagnosis{DiagnosisKind::kNondeterminism,
                      s.name + ": variant [" + s.variant + "] gives digest " + r.digest + ", variant [" +
                          scenarios[it->second].variant + "] gives " + ref.digest,
                      -1, -1};
      }
    }
    for (const auto& [name, curve] : r.series) {
      if (d) break;
      auto [it, inserted] = first_with_series.emplace(std::make_pair(s.file, name), i);
      if (inserted) continue;
      const auto& other = results[it->second].series.at(name);
      const double rtol = std::max(curve.rtol, other.rtol);
      const std::size_t n = std::min(curve.values.size(), other.values.size());
      std::ostringstream os;
      os << s.name << ": " << name << " of variant [" << s.variant << "] and variant [" << scenarios[it->second].variant << "] ";
      for (std::size_t k = 0; k < n && !d; ++k) {
        const double a = curve.values[k], b = other.values[k];
        const double diff = std::fabs(a - b), scale = std::max(std::fabs(a), std::fabs(b));
        if (diff <= rtol * scale || (std::isnan(a) && std::isnan(b))) continue;
        os << std::setprecision(9) << "first differ at step " << k << ": " << a << " vs " << b << " (relative difference "
           << std::setprecision(3) << (scale > 0 ? diff / scale : diff) << " > rtol " << rtol << ")";
        d = Diagnosis{DiagnosisKind::kNondeterminism, os.str(), -1, -1};
      }
      if (!d && curve.values.size() != other.values.size()) {
        os << "have " << curve.values.size() << " vs " << other.values.size() << " steps";
        d = Diagnosis{DiagnosisKind::kNondeterminism, os.str(), -1, -1};
      }
    }
    if (!d) continue;
    r.diagnosis = d;
    decide(expectation_for(s, r), r);
  }
}

report::RunSummary run_suite(const std::vector<scenario::Scenario>& scenarios,
                             const LaunchOptions& options, std::ostream& out) {
  // Refused before anything is written or started, for every command that runs scenarios.
  comm::verify_channel_from_env();
  report::RunSummary run;
  run.lockstep_version = std::string(LOCKSTEP_VERSION) + "+" + LOCKSTEP_GIT_REV;
  run.torch_version = comm::torch_version();
  run.started_at = utc_now();
  run.containment = containment();
  const auto t0 = std::chrono::steady_clock::now();
  std::filesystem::create_directories(options.report_dir);
  // A report left by an earlier run in this folder must not pass for this run's, whatever
  // happens to this one.
  for (const char* stale : {"results.json", "junit.xml"}) std::filesystem::remove(std::filesystem::path(options.report_dir) / stale);
  const std::size_t n = scenarios.size();
  if (n == 0) out << "no scenario selected: nothing to run (exit " << kExitNothingSelected << ")\n";
  std::string stopped_at;  // -x: the first scenario that did not meet its expectation
  for (std::size_t i = 0; i < n; ++i) {
    if (cancelled() || !stopped_at.empty()) {
      report::ScenarioResult r;
      r.name = scenarios[i].name;
      r.id = scenarios[i].id();
      r.file = scenarios[i].file;
      r.variant = scenarios[i].variant;
      r.tags = scenarios[i].tags;
      r.expected = scenarios[i].expect.expected_label();
      r.world_size = scenarios[i].world_size;
      r.cancelled = stopped_at.empty() ? "not run: the run was cancelled by " + cancel_signal_name()
                                       : "not run: -x/--exitfirst stopped the run after " + stopped_at + " failed";
      decide(scenarios[i].expect, r);
      run.results.push_back(std::move(r));
      continue;
    }
    if (options.progress) {
      // One redrawn line: position, bar, elapsed time and an estimate of what is left.
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      constexpr int kBar = 24;
      const int filled = static_cast<int>(kBar * i / (n ? n : 1));
      out << "\r\033[K" << (options.label.empty() ? "" : options.label + " ") << '[' << std::string(static_cast<std::size_t>(filled), '#')
          << std::string(static_cast<std::size_t>(kBar - filled), '.') << "] " << i << '/' << n << ' ' << std::fixed
          << std::setprecision(0) << elapsed << " s";
      if (i > 0) out << ", ~" << elapsed / static_cast<double>(i) * static_cast<double>(n - i) << " s left";
      out << "  " << scenarios[i].id() << std::flush;
    }
    auto r = run_scenario(scenarios[i], options);
    if (options.progress) out << "\r\033[K";
    out << '[' << std::setw(3) << i + 1 << '/' << n << "] " << label(r) << ' ' << r.id << "  ("
        << std::fixed << std::setprecision(2) << r.duration_s << " s)";
    if (r.status == report::Status::kPass && r.diagnosis) out << "  " << to_string(r.diagnosis->kind) << " as expected";
    out << '\n';
    if (r.status != report::Status::kPass && !r.reason.empty()) out << "        " << r.reason << '\n';
    for (const auto& note : r.notes) out << "        note: " << note << '\n';
    out.flush();
    if (options.exit_first && (r.status == report::Status::kFail || r.status == report::Status::kError)) stopped_at = r.id;
    run.results.push_back(std::move(r));
  }
  if (!cancelled()) check_invariance(scenarios, run.results);
  run.cancelled_by = cancel_signal_name();
  run.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!options.defer_report) write_report(run, options.report_dir);

  if (!options.quiet_summary) print_summary(run, options.report_dir, out);
  return run;
}

void print_summary(const report::RunSummary& run, const std::string& report_dir, std::ostream& out, const std::string& note) {
  std::map<report::Status, int> counts;
  int expected_diagnoses = 0;
  for (const auto& r : run.results) {
    ++counts[r.status];
    expected_diagnoses += r.status == report::Status::kPass && r.diagnosis;
  }
  // Summary table: one row per scenario directory.
  struct Row {
    int pass = 0, fail = 0, skip = 0, error = 0;
    double seconds = 0;
  };
  std::map<std::string, Row> rows;
  for (const auto& r : run.results) {
    auto& row = rows[std::filesystem::path(r.file).parent_path().string()];
    row.pass += r.status == report::Status::kPass;
    row.fail += r.status == report::Status::kFail;
    row.skip += r.status == report::Status::kSkip;
    row.error += r.status == report::Status::kError;
    row.seconds += r.duration_s;
  }
  std::size_t width = 9;
  for (const auto& [dir, _] : rows) width = std::max(width, dir.size());
  if (!rows.empty()) out << '\n' << std::left << std::setw(static_cast<int>(width)) << "directory" << std::right << "  pass  fail  skip error   time s\n";
  for (const auto& [dir, row] : rows) {
    out << std::left << std::setw(static_cast<int>(width)) << dir << std::right << std::setw(6) << row.pass << std::setw(6)
        << row.fail << std::setw(6) << row.skip << std::setw(6) << row.error << std::setw(9) << std::fixed
        << std::setprecision(1) << row.seconds << '\n';
  }
  out << "\n" << counts[report::Status::kPass] << " passed, " << counts[report::Status::kFail] << " failed, "
      << counts[report::Status::kSkip] << " skipped, " << counts[report::Status::kError] << " errors"
      << (run.cancelled_by.empty() ? "" : ", " + std::to_string(counts[report::Status::kCancelled]) + " cancelled by " + run.cancelled_by)
      << (run.cancelled_by.empty() && counts[report::Status::kCancelled] ? ", " + std::to_string(counts[report::Status::kCancelled]) + " not run (-x)" : "")
      << (note.empty() ? "" : " (" + note + ")") << " in "
      << std::fixed << std::setprecision(1) << run.duration_s << " s; report: " << report_dir << '\n';
  if (expected_diagnoses) out << "(" << expected_diagnoses << " of the passes are XFAIL: the injected bug gave the expected diagnosis)\n";
  if (all_skipped(run)) out << "every selected scenario was skipped: nothing was checked\n";
  if (!run.containment.contained) out << "not contained: " << run.containment.reason << '\n';
}

std::vector<scenario::Scenario> filter_scenarios(std::vector<scenario::Scenario> scenarios, const std::string& filter) {
  if (filter.empty()) return scenarios;
  std::regex re;
  try {
    re = std::regex(filter);
  } catch (const std::regex_error& e) {
    throw InputError("--filter: invalid regex '" + filter + "': " + e.what());
  }
  std::vector<scenario::Scenario> kept;
  for (auto& s : scenarios) {
    bool hit = std::regex_search(s.id(), re);
    for (const auto& t : s.tags) hit = hit || std::regex_search(t, re);
    if (hit) kept.push_back(std::move(s));
  }
  return kept;
}

bool all_met(const report::RunSummary& run) {
  for (const auto& r : run.results) {
    if (r.status == report::Status::kFail || r.status == report::Status::kError || r.status == report::Status::kCancelled) return false;
  }
  return true;
}

bool all_skipped(const report::RunSummary& run) {
  if (run.results.empty()) return false;
  for (const auto& r : run.results) {
    if (r.status != report::Status::kSkip) return false;
  }
  return true;
}

int suite_exit_code(const report::RunSummary& run) {
  if (run.results.empty()) return kExitNothingSelected;
  if (!all_met(run)) return kExitUnmet;
  return all_skipped(run) ? kExitAllSkipped : kExitMet;
}

}  // namespace lockstep::launch
