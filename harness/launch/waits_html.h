#pragma once
// A run's waits as a person reads them (scenarios/README.md, "Waits and stragglers"): DIR/waits.html,
// self-contained (inline CSS and SVG, no scripts or fetches): the verdict, a per-rank timeline of
// one representative step (the median-long one: compute, waiting for the others, in the
// collective, call by call) and a rank-by-call heatmap of the wait time over the whole run.
#include <cstddef>
#include <optional>
#include <string>

#include "harness/rules/waits.h"

namespace lockstep::launch {

// The page for scenario `title`; `straggler` is the rule's verdict, if any. Every string from
// the run (the title, phases, a program's call sites) is escaped.
std::string waits_html(const std::string& title, const rules::WaitReport& report,
                       const std::optional<rules::Straggler>& straggler);

// The figures alone, for a page of its own or another report (the baseline report): the
// representative step's per-rank timeline and the rank-by-call heatmap, each under a `heading`
// element ("h2", "h4"), in a div of class "waits"; kWaitsCss styles them. The heatmap has at most
// `max_columns` columns: beyond, consecutive calls are summed into one.
std::string waits_figures(const rules::WaitReport& report, const std::string& heading, std::size_t max_columns);
inline constexpr std::size_t kPageColumns = 300;    // waits.html
inline constexpr std::size_t kReportColumns = 100;  // a scenario's figures in the baseline report
inline constexpr const char* kWaitsCss =
    ".k{color:#555}.sw{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}"
    ".waits svg text{font:12px system-ui,sans-serif}";

// The index of the step the timeline shows: the one of median duration (the shorter of the two
// middle ones); -1 when there is none.
int representative_step(const rules::WaitReport& report);

}  // namespace lockstep::launch
