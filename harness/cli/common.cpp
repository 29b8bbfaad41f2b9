#include <unistd.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <system_error>

#include <CLI/CLI.hpp>

#include "harness/cli/commands.h"
#include "harness/core/error.h"
#include "harness/launch/cancel.h"
#include "harness/core/env.h"
#include "harness/launch/contain.h"
#include "harness/launch/python.h"
#include "harness/launch/suite.h"
#include "harness/validate/validate.h"

#include <cstdlib>
#include <set>

#include <nlohmann/json.hpp>

namespace lockstep::cli {
namespace fs = std::filesystem;

namespace {
constexpr const char* kReportRoot = "lockstep-report";
}

std::string fresh_report_dir() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  std::ostringstream os;
  os << kReportRoot << "/run-" << stamp << '.' << (ms < 100 ? (ms < 10 ? "00" : "0") : "") << ms << '-' << launch::host_pid();
  return os.str();
}

void prepare_report_dir(const std::string& dir, const std::string& option) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw InputError(option + " " + dir + ": cannot create it: " + ec.message());
  if (!fs::is_directory(dir)) throw InputError(option + " " + dir + ": not a directory");
  const fs::path probe = fs::path(dir) / (".lockstep-write-probe-" + std::to_string(launch::host_pid()));
  {
    std::ofstream out(probe);
    out << "probe\n";
    out.flush();
    if (!out) {
      fs::remove(probe, ec);
      throw InputError(option + " " + dir + ": cannot write there (read-only, full, or no permission)");
    }
  }
  fs::remove(probe, ec);
}

void link_latest(const std::string& dir) {
  std::error_code ec;
  // Versions before per-run folders wrote here directly: such a report must not pass for
  // this run's in a script that still reads it.
  for (const char* old : {"results.json", "junit.xml"}) fs::remove(fs::path(kReportRoot) / old, ec);
  const fs::path target = fs::path(dir).filename();
  const fs::path tmp = fs::path(kReportRoot) / (".latest-" + std::to_string(launch::host_pid()));
  fs::remove(tmp, ec);
  fs::create_directory_symlink(target, tmp, ec);
  if (!ec) fs::rename(tmp, fs::path(kReportRoot) / "latest", ec);  // atomic: readers see the old or the new
  if (ec) fs::remove(tmp, ec);
}

const char* containment_help() {
  return "Containment: by default a local run gets its own network namespace (loopback only: none of its\n"
         "ports is reachable from outside) and PID namespace (everything it started dies with it, even after\n"
         "kill -9 of lockstep), where root or unprivileged user namespaces allow it; results.json's\n"
         "\"containment\" says whether it was and why not. --no-contain (or LOCKSTEP_CONTAIN=off) runs the ranks\n"
         "in this machine's namespaces; LOCKSTEP_CONTAIN=require refuses (exit 2) a run that cannot be contained.";
}

void add_no_contain_flag(CLI::App* cmd, bool& no_contain) {
  cmd->add_flag("--no-contain", no_contain,
                "run the ranks in this machine's network and PID namespaces (see \"Containment\" in lockstep --help)");
}

void add_python_option(CLI::App* cmd, std::string& python, const std::string& help_extra) {
  cmd->add_option_function<std::string>(
      "--python",
      [&python](const std::string& p) {
        python = p;
        ::setenv(env::kPython, p.c_str(), 1);
      },
      "programs and systems under test: the Python interpreter that replaces {python} in their command\n"
      "(default: $LOCKSTEP_PYTHON, else python3); one that does not start is an input error (exit 2)" +
          help_extra);
}

void check_python(const std::string& flag_value, const std::vector<scenario::Scenario>& scenarios) {
  if (!flag_value.empty()) {
    launch::require_interpreter(flag_value, "--python");
    return;
  }
  const char* from_env = std::getenv(env::kPython);
  if (!from_env || !*from_env) return;  // python3 from PATH: a scenario it cannot serve is skipped, with the reason
  for (const auto& s : scenarios) {
    if (!launch::uses_python(s)) continue;
    launch::require_interpreter(from_env, env::kPython);
    return;
  }
}

std::vector<scenario::Scenario> select_scenarios(const std::vector<std::string>& paths, const std::string& filter,
                                                 bool last_failed, const std::string& report_dir) {
  auto scenarios = launch::filter_scenarios(lockstep::validate::load_paths(paths), filter);
  if (!last_failed) return scenarios;
  fs::path results;
  std::error_code ec;
  if (!report_dir.empty() && fs::is_regular_file(fs::path(report_dir) / "results.json", ec)) {
    results = fs::path(report_dir) / "results.json";
  } else if (fs::is_regular_file(fs::path(kReportRoot) / "latest" / "results.json", ec)) {
    results = fs::path(kReportRoot) / "latest" / "results.json";
  } else {
    throw InputError("--last-failed: no earlier report here (" +
                     (report_dir.empty() ? std::string() : (fs::path(report_dir) / "results.json").string() + " and ") +
                     (fs::path(kReportRoot) / "latest" / "results.json").string() + " do not exist)");
  }
  std::set<std::string> failed;
  try {
    std::ifstream in(results);
    const auto j = nlohmann::json::parse(in);
    for (const auto& r : j.at("scenarios")) {
      const std::string status = r.at("status").get<std::string>();
      if (status == "fail" || status == "error" || status == "cancelled") failed.insert(r.at("id").get<std::string>());
    }
  } catch (const std::exception& e) {
    throw InputError("--last-failed: " + results.string() + " is not a lockstep results.json: " + e.what());
  }
  std::erase_if(scenarios, [&](const scenario::Scenario& s) { return !failed.count(s.id()); });
  std::cout << "--last-failed: " << scenarios.size() << " of the " << failed.size() << " scenario(s) that did not pass in "
            << results.string() << '\n';
  return scenarios;
}

void contain(bool no_contain, const std::string& not_local) {
  launch::ContainRequest request;
  request.opted_out = no_contain;
  request.not_local = not_local;
  launch::contain_run(request);
}

int exit_code_after(int code) { return launch::cancelled() ? 128 + launch::cancel_signal() : code; }

const CLI::Validator& finite() {
  static const CLI::Validator v(
      [](std::string& text) -> std::string {
        try {
          std::size_t used = 0;
          const double x = std::stod(text, &used);
          if (!std::isfinite(x)) return "must be a finite number, got " + text;
        } catch (const std::exception&) {
          return "";  // not a number: the option's own type check reports it
        }
        return "";
      },
      "FINITE");
  return v;
}

}  // namespace lockstep::cli
