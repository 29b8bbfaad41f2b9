#include "harness/rank/status.h"

#include <filesystem>
#include <fstream>

#include "harness/core/error.h"
#include "harness/core/fs.h"

namespace lockstep::rank {
namespace {

constexpr std::pair<Outcome, const char*> kOutcomes[] = {
    {Outcome::kOk, "ok"},         {Outcome::kDiagnosis, "diagnosis"}, {Outcome::kCommError, "comm_error"},
    {Outcome::kInputError, "input_error"}, {Outcome::kError, "error"}};

Outcome outcome_from(const std::string& s) {
  for (const auto& [o, name] : kOutcomes) {
    if (s == name) return o;
  }
  return Outcome::kNone;
}

nlohmann::json perf_json(const perf::RankCost& c) {
  nlohmann::json j = {{"availability", c.availability}, {"counters", c.counters}, {"phases", nlohmann::json::object()},
                      {"slowdown_fired", c.slowdown_fired}};
  for (const auto& [name, p] : c.phases) {
    nlohmann::json x = {{"iterations", p.iterations}, {"wall_s", p.wall_s},   {"cpu_s", p.cpu_s},
                        {"main_cpu_s", p.main_cpu_s}, {"user_s", p.user_s},   {"sys_s", p.sys_s},
                        {"cpu_samples", p.cpu_samples}, {"main_cpu_samples", p.main_cpu_samples}};
    for (const auto& [counter, v] : p.counters) x[counter] = v;
    for (const auto& [counter, v] : p.counter_samples) x[counter + "_samples"] = v;
    j["phases"][name] = std::move(x);
  }
  return j;
}

perf::RankCost perf_from_json(const nlohmann::json& j) {
  perf::RankCost c;
  c.availability = j.value("availability", "");
  c.counters = j.value("counters", std::vector<std::string>{});
  c.slowdown_fired = j.value("slowdown_fired", false);
  for (const auto& [name, x] : j.at("phases").items()) {
    perf::PhaseReport& p = c.phases[name];
    p.iterations = x.value("iterations", std::int64_t{0});
    p.wall_s = x.value("wall_s", 0.0);
    p.cpu_s = x.value("cpu_s", 0.0);
    p.main_cpu_s = x.value("main_cpu_s", 0.0);
    p.user_s = x.value("user_s", 0.0);
    p.sys_s = x.value("sys_s", 0.0);
    p.cpu_samples = x.value("cpu_samples", std::vector<double>{});
    p.main_cpu_samples = x.value("main_cpu_samples", std::vector<double>{});
    for (const auto& counter : c.counters) {
      p.counters[counter] = x.value(counter, 0.0);
      p.counter_samples[counter] = x.value(counter + "_samples", std::vector<double>{});
    }
  }
  return c;
}

}  // namespace

std::string_view to_string(Outcome o) {
  for (const auto& [x, name] : kOutcomes) {
    if (x == o) return name;
  }
  return "";
}

nlohmann::json to_json(const RankStatus& s) {
  nlohmann::json j = {{"rank", s.rank}};
  if (!s.scenario.empty()) j["scenario"] = s.scenario;
  if (s.program) j["program"] = true;
  if (!s.system.empty()) j["system"] = s.system;
  if (s.outcome != Outcome::kNone) j["outcome"] = to_string(s.outcome);
  if (s.diagnosis) {
    const Diagnosis& d = *s.diagnosis;
    j["diagnosis"] = {{"kind", to_string(d.kind)}, {"message", d.message}, {"rank", d.rank}, {"seq", d.seq}, {"step", d.step}};
  }
  if (!s.message.empty()) j["message"] = s.message;
  if (s.step >= 0) j["step"] = s.step;
  if (!s.unverified.empty()) j["unverified_calls"] = s.unverified;
  if (s.outcome == Outcome::kOk) {
    j["metrics"] = s.metrics;
    if (!s.program || !s.digest.empty()) j["digest"] = s.digest;
    for (const auto& [name, curve] : s.series) j["series"][name] = {{"values", curve.values}, {"rtol", curve.rtol}};
    if (s.collectives) j["collectives"] = *s.collectives;
    if (s.perf) j["perf"] = perf_json(*s.perf);
  }
  return j;
}

RankStatus status_from_json(const nlohmann::json& j) {
  LOCKSTEP_CHECK(j.is_object() && j.contains("rank"), "a rank status must be an object with a \"rank\"");
  try {
    RankStatus s;
    s.rank = j.at("rank").get<int>();
    s.scenario = j.value("scenario", "");
    s.program = j.value("program", false);
    s.system = j.value("system", "");
    s.outcome = outcome_from(j.value("outcome", ""));
    if (j.contains("diagnosis")) {
      const auto& d = j.at("diagnosis");
      if (auto kind = diagnosis_kind_from_string(d.value("kind", ""))) {
        s.diagnosis = Diagnosis{*kind, d.value("message", ""), d.value("rank", -1), d.value("seq", std::int64_t{-1}),
                                 d.value("step", std::int64_t{-1})};
      }
    }
    s.message = j.value("message", "");
    s.step = j.value("step", std::int64_t{-1});
    if (j.contains("metrics")) s.metrics = j.at("metrics").get<std::map<std::string, double>>();
    s.digest = j.value("digest", "");
    if (j.contains("series")) {
      for (const auto& [name, v] : j.at("series").items()) {
        s.series[name] = report::Series{v.at("values").get<std::vector<double>>(), v.value("rtol", 0.0), {}};
      }
    }
    if (j.contains("collectives")) s.collectives = j.at("collectives").get<std::int64_t>();
    if (j.contains("perf") && !j.at("perf").is_null()) s.perf = perf_from_json(j.at("perf"));
    if (j.contains("unverified_calls")) s.unverified = j.at("unverified_calls").get<std::map<std::string, std::int64_t>>();
    return s;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("a rank status has a key of the wrong type: ") + e.what());
  }
}

void write_status(const std::string& path, const RankStatus& s) { write_file_atomically(path, to_json(s).dump(2) + "\n"); }

std::optional<RankStatus> read_status(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  try {
    return status_from_json(nlohmann::json::parse(in));
  } catch (...) {
    return std::nullopt;
  }
}

std::string artifacts_dir(const std::string& report_dir, const std::string& slug) {
  return (std::filesystem::path(report_dir) / slug).string();
}
std::string status_path(const std::string& dir, int rank) { return dir + "/rank" + std::to_string(rank) + ".status.json"; }
std::string trace_path(const std::string& dir, int rank) { return dir + "/rank" + std::to_string(rank) + ".trace.jsonl"; }
std::string log_path(const std::string& dir, int rank) { return dir + "/rank" + std::to_string(rank) + ".log"; }

}  // namespace lockstep::rank
