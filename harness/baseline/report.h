#pragma once
// The performance baseline report: DIR/index.html (self-contained: inline CSS and SVG, no
// scripts or fetches) and DIR/report.md (the same content, as tables, for CI summaries).
#include <string>

#include "harness/rules/stats.h"
#include "harness/baseline/store.h"

namespace lockstep::baseline {

struct ReportOptions {
  // The environments the summary compares; both "" with exactly two environments: those two.
  std::string from, to;
  RuleOptions rule;
};

// Writes both files: a summary first (the latest check's declared changes, and the comparison
// of two environments), then the environments, then each scenario's metrics over the runs in
// recording order, marking the checks that declared a change. Every user-supplied string is
// escaped for HTML or Markdown. Throws InputError for an unknown --from/--to environment and
// lockstep::Error when a file cannot be written.
void write_report(Store& store, const std::string& out_dir, const ReportOptions& options = {});

// Escapes & < > " ' for HTML text and attributes.
std::string html_escape(const std::string& s);

}  // namespace lockstep::baseline
