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
#include <sstream>

#include "harness/comm/engines.h"
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

const char* label(report::Status s) {
  switch (s) {
    case report::Status::kPass: return "PASS ";
    case report::Status::kFail: return "FAIL ";
    case report::Status::kSkip: return "SKIP ";
    case report::Status::kError: return "ERROR";
  }
  return "?";
}

}  // namespace

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
    const bool expected = s.expect.kind && *s.expect.kind == DiagnosisKind::kNondeterminism;
    r.diagnosis = d;
    r.status = expected ? report::Status::kPass : report::Status::kFail;
    r.reason = expected ? "" : "expected " + s.expect.expected_label() + ", got nondeterminism: " + d->message;
  }
}

report::RunSummary run_suite(const std::vector<scenario::Scenario>& scenarios,
                             const LaunchOptions& options, std::ostream& out) {
  report::RunSummary run;
  run.lockstep_version = std::string(LOCKSTEP_VERSION) + "+" + LOCKSTEP_GIT_REV;
  run.torch_version = comm::torch_version();
  run.started_at = utc_now();
  const auto t0 = std::chrono::steady_clock::now();
  std::filesystem::create_directories(options.report_dir);
  const std::size_t n = scenarios.size();
  for (std::size_t i = 0; i < n; ++i) {
    auto r = run_scenario(scenarios[i], options);
    out << '[' << std::setw(3) << i + 1 << '/' << n << "] " << label(r.status) << ' ' << r.id << "  ("
        << std::fixed << std::setprecision(2) << r.duration_s << " s)";
    if (r.status == report::Status::kPass && r.diagnosis) out << "  " << to_string(r.diagnosis->kind);
    out << '\n';
    if (r.status != report::Status::kPass && !r.reason.empty()) out << "        " << r.reason << '\n';
    out.flush();
    run.results.push_back(std::move(r));
  }
  check_invariance(scenarios, run.results);
  run.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  report::write_results_json(run, (std::filesystem::path(options.report_dir) / "results.json").string());
  report::write_junit_xml(run, (std::filesystem::path(options.report_dir) / "junit.xml").string());

  std::map<report::Status, int> counts;
  for (const auto& r : run.results) ++counts[r.status];
  out << "\n" << counts[report::Status::kPass] << " passed, " << counts[report::Status::kFail] << " failed, "
      << counts[report::Status::kSkip] << " skipped, " << counts[report::Status::kError] << " errors in "
      << std::fixed << std::setprecision(1) << run.duration_s << " s; report: " << options.report_dir << '\n';
  return run;
}

bool all_met(const report::RunSummary& run) {
  for (const auto& r : run.results) {
    if (r.status == report::Status::kFail || r.status == report::Status::kError) return false;
  }
  return true;
}

}  // namespace lockstep::launch
