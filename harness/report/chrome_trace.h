#pragma once
// Converts the per-rank collective traces (JSON Lines, one record per collective) into one
// Chrome trace event file, viewable in Perfetto or chrome://tracing: one thread per rank.
#include <string>
#include <vector>

namespace lockstep::report {

// Writes `out_path` with one complete ("X") event per record of every file in `jsonl_paths`,
// named "<op> #<seq>" on thread `rank`, its args every key but rank, times and "v". Missing
// files, lines trace::parse_line refuses (a torn last line from a killed rank) and records
// without rank or t_start_us are skipped. Throws lockstep::Error if `out_path` cannot be written.
void write_chrome_trace(const std::vector<std::string>& jsonl_paths, const std::string& out_path);

}  // namespace lockstep::report
