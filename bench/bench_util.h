#pragma once
// Helpers shared by the benchmarks.
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "harness/launch/launcher.h"
#include "harness/scenario/scenario.h"

namespace lockstep::bench {

// The median (upper middle for an even count) of `v`; 0 for none.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// A new empty directory under the system's temporary directory.
inline std::string temp_dir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "lockstep-bench-XXXXXX").string();
  return mkdtemp(tmpl.data());
}

// Runs the "latency" workload (`iterations` blocking all_reduces of `count` f32 after 200
// warm-up ones) in real rank processes with verification `mode` (off, record, verify) and
// returns rank 0's microseconds per operation, or -1 when the scenario did not pass.
// `run_extra`: more [run] lines (e.g. device and backend).
inline double latency_us(const std::string& dir, const std::string& mode, int ranks, std::int64_t iterations,
                         std::int64_t count, const std::string& run_extra = "") {
  const std::string file = dir + "/latency_" + mode + "_" + std::to_string(ranks) + ".toml";
  std::ofstream(file) << "name = \"bench.latency_" << mode << "_" << ranks << "\"\n"
                      << "[run]\nworld_size = " << ranks << "\nverify = \"" << mode << "\"\ntimeout_s = 120\n"
                      << run_extra << "[workload]\nkind = \"latency\"\ncount = " << count
                      << "\ndtype = \"f32\"\niterations = " << iterations << "\nwarmup = 200\n[expect]\noutcome = \"pass\"\n";
  auto scenarios = lockstep::scenario::load_file(file);
  lockstep::launch::LaunchOptions opts;
  opts.binary = LOCKSTEP_BINARY;
  opts.report_dir = dir + "/report";
  auto res = lockstep::launch::run_scenario(scenarios.at(0), opts);
  if (res.status != lockstep::report::Status::kPass) return -1;
  return res.metrics.at("us_per_op");
}

}  // namespace lockstep::bench
