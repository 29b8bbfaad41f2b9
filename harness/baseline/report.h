#pragma once
// The performance baseline report: DIR/index.html (self-contained: inline CSS and SVG, no
// scripts or fetches) and DIR/report.md (the same content for CI summaries).
#include <string>

#include "harness/baseline/store.h"

namespace lockstep::baseline {

// Writes both files. Every user-supplied string (scenario ids, metric names, environment
// fields) is escaped for HTML or Markdown. Throws lockstep::Error when a file cannot be written.
void write_report(Store& store, const std::string& out_dir);

// Escapes & < > " ' for HTML text and attributes.
std::string html_escape(const std::string& s);

}  // namespace lockstep::baseline
