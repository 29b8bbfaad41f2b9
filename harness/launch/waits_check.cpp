#include "harness/launch/waits_check.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "harness/core/error.h"
#include "harness/core/fs.h"
#include "harness/launch/waits_html.h"
#include "harness/rank/status.h"
#include "harness/trace/record.h"

namespace lockstep::launch {

std::optional<std::vector<std::vector<rules::Arrival>>> read_arrivals(const std::string& dir, int world_size) {
  std::vector<std::vector<rules::Arrival>> out(static_cast<std::size_t>(world_size));
  for (int r = 0; r < world_size; ++r) {
    const std::string path = rank::trace_path(dir, r);
    std::ifstream in(path);
    if (!in) return std::nullopt;
    int lineno = 0;
    for (std::string line; std::getline(in, line);) {
      ++lineno;
      if (line.empty()) continue;
      std::string why;
      const auto rec = trace::parse_line(line, &why);
      if (!rec) throw InputError(path + ":" + std::to_string(lineno) + ": not a trace record: " + why);
      if (rec->kind != trace::kCollective || rec->group || rec->error || !rec->seq || !rec->t_start_us) continue;
      rules::Arrival a;
      a.seq = *rec->seq;
      a.step = rec->step.value_or(-1);
      a.phase = rec->phase.value_or("");
      a.op = rec->op.value_or("");
      a.t_start_us = *rec->t_start_us;
      a.t_end_us = rec->t_end_us.value_or(a.t_start_us);
      out[static_cast<std::size_t>(r)].push_back(std::move(a));
    }
  }
  return out;
}

std::string waits_json(const rules::WaitReport& report, const rules::StragglerLimits& limits,
                       const std::optional<rules::Straggler>& straggler, double analysis_s) {
  nlohmann::ordered_json j;
  j["format"] = kWaitsFormat;
  j["version"] = kWaitsVersion;
  j["analysis_s"] = analysis_s;
  j["world_size"] = report.world_size;
  j["span_s"] = report.span_s;
  j["skipped"] = report.skipped;
  j["limits"] = {{"lead_share", limits.lead_share},
                 {"lead_alpha", limits.lead_alpha},
                 {"wait_share", limits.wait_share},
                 {"dominance", limits.dominance},
                 {"explained_share", limits.explained_share},
                 {"min_steps", limits.min_steps},
                 {"min_skew_us", rules::kMinSkewUs}};
  auto ranks = nlohmann::ordered_json::array();
  for (const auto& w : report.ranks) {
    ranks.push_back({{"wait_s", w.wait_s}, {"compute_s", w.compute_s}, {"last", w.last}, {"caused_s", w.caused_s}, {"led", w.led},
                     {"median_share", w.median_share}, {"explained_s", w.explained_s}});
  }
  j["ranks"] = ranks;
  if (straggler) {
    j["straggler"] = {{"rank", straggler->rank},
                      {"led", straggler->led},
                      {"steps", straggler->steps},
                      {"lead_p", straggler->lead_p},
                      {"last", straggler->last},
                      {"calls", straggler->calls},
                      {"caused_s", straggler->caused_s},
                      {"median_share", straggler->median_share},
                      {"explained_s", straggler->explained_s},
                      {"phase", straggler->phase},
                      {"phase_caused_s", straggler->phase_caused_s},
                      {"seq", straggler->seq},
                      {"step", straggler->step},
                      {"message", straggler->describe(report)}};
  } else {
    j["straggler"] = nullptr;
  }
  auto steps = nlohmann::ordered_json::array();
  for (const auto& st : report.steps) {
    steps.push_back({{"step", st.step}, {"from_us", st.from_us}, {"to_us", st.to_us}, {"caused_us", st.caused_us}, {"leader", st.leader}});
  }
  j["steps"] = steps;
  auto calls = nlohmann::ordered_json::array();
  for (const auto& c : report.calls) {
    nlohmann::ordered_json one;
    one["seq"] = c.seq;
    one["step"] = c.step;
    one["phase"] = c.phase;
    one["op"] = c.op;
    one["first_us"] = c.first_us;
    one["skew_us"] = c.skew_us();
    one["last_rank"] = c.last_rank;
    one["arrival_us"] = c.arrival_us;
    one["end_us"] = c.end_us;
    one["wait_us"] = c.wait_us;
    one["compute_us"] = c.compute_us;
    calls.push_back(std::move(one));
  }
  j["calls"] = calls;
  return j.dump(1) + "\n";
}

void check_waits(const scenario::Scenario& s, const std::string& dir, report::ScenarioResult& res,
                 std::optional<Diagnosis>& diagnosis) {
  if (s.world_size < 2) return;
  const auto t0 = std::chrono::steady_clock::now();
  const auto arrivals = read_arrivals(dir, s.world_size);
  if (!arrivals) return;
  rules::WaitReport report;
  try {
    report = rules::analyse_waits(*arrivals);
  } catch (const std::invalid_argument& e) {
    throw InputError(dir + ": the ranks' traces do not line up: " + e.what());
  }
  if (report.calls.empty()) return;
  rules::StragglerLimits limits;
  if (s.straggler_share) limits.wait_share = *s.straggler_share;
  const auto straggler = rules::find_straggler(report, limits);
  const double analysis_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  write_file_atomically((std::filesystem::path(dir) / "waits.json").string(), waits_json(report, limits, straggler, analysis_s));
  write_file_atomically((std::filesystem::path(dir) / "waits.html").string(), waits_html(s.id(), report, straggler));
  res.waits = rules::summarize(report);
  for (auto& [metric, values] : rules::wait_samples(report)) res.samples[metric] = std::move(values);
  if (!straggler) return;
  res.straggler = straggler->describe(report);
  if (s.straggler_share) {
    if (!diagnosis) diagnosis = Diagnosis{DiagnosisKind::kStraggler, "straggler: " + res.straggler, straggler->rank, straggler->seq, straggler->step};
  } else {
    res.notes.push_back("straggler: " + res.straggler);
  }
}

}  // namespace lockstep::launch
