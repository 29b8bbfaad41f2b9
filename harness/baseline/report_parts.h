#pragma once
// What the report's parts share (report.cpp): numbers and Markdown as the report writes them, the
// SVG line chart, and the comparison's "program upgrade" section (report_upgrade.cpp).
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "harness/baseline/check.h"

namespace lockstep::baseline::parts {

struct Point {
  int x;     // global run ordinal (or a step, with an x_axis)
  double y;
  std::string mark;  // "": plain; else why this run is marked (a check's declared change)
  bool check = false;  // a `run --baseline` check (hollow), not a recorded sample
};

std::string num(double v);                    // %.4g
std::string md_escape(const std::string& s);
// One series per legend entry; x is the run ordinal (labelled "#n" and `run_labels`), or, with
// `x_axis` ("step"), the value itself under that caption.
std::string line_chart(const std::string& title, const std::string& unit,
                       const std::vector<std::pair<std::string, std::vector<Point>>>& series,
                       const std::vector<std::string>& run_labels, const std::string& x_axis = "");

// The comparison's program upgrade section: what each environment's programs ran on, side by
// side; each logged curve of both, overlaid; the parameters that differ; the first sequence
// difference; the throughput ratios. Nothing when no scenario has numbers or systems.
void upgrade_section(const Comparison& c, std::ostringstream& h, std::ostringstream& md);

}  // namespace lockstep::baseline::parts
