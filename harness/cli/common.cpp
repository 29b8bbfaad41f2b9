#include <unistd.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

#include <CLI/CLI.hpp>

#include "harness/cli/commands.h"
#include "harness/core/error.h"
#include "harness/launch/cancel.h"
#include "harness/launch/contain.h"

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

void add_no_contain_flag(CLI::App* cmd, bool& no_contain) {
  cmd->add_flag("--no-contain", no_contain,
                "run the ranks in this machine's network and PID namespaces, as before containment (also\n"
                "LOCKSTEP_CONTAIN=off). By default a local run gets its own network namespace (loopback only: none\n"
                "of its ports is reachable from outside) and PID namespace (everything it started dies with it,\n"
                "even after kill -9 of lockstep), where root or unprivileged user namespaces allow it;\n"
                "results.json's \"containment\" says whether it was and why not. LOCKSTEP_CONTAIN=require refuses\n"
                "(exit 2) a run that cannot be contained");
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
