#include "harness/report/results.h"

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "harness/core/error.h"
#include "harness/core/fs.h"

namespace lockstep::report {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

struct Counts {
  int total = 0, pass = 0, fail = 0, skip = 0, error = 0, cancelled = 0;
};

Counts count(const RunSummary& run) {
  Counts c;
  for (const auto& r : run.results) {
    ++c.total;
    switch (r.status) {
      case Status::kPass: ++c.pass; break;
      case Status::kFail: ++c.fail; break;
      case Status::kSkip: ++c.skip; break;
      case Status::kError: ++c.error; break;
      case Status::kCancelled: ++c.cancelled; break;
    }
  }
  return c;
}

Json diagnosis_json(const std::optional<Diagnosis>& d) {
  if (!d) return nullptr;
  Json j;
  j["kind"] = std::string(to_string(d->kind));
  j["message"] = d->message;
  j["rank"] = d->rank;
  j["seq"] = d->seq;
  j["step"] = d->step;
  return j;
}

// Decodes one UTF-8 code point at s[i], advancing i. Returns U+FFFD for an invalid, overlong
// or truncated sequence (consuming one byte) and for surrogates.
char32_t next_code_point(std::string_view s, std::size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  int len = 0;
  char32_t cp = 0;
  if (b0 < 0x80) {
    ++i;
    return b0;
  } else if ((b0 & 0xE0) == 0xC0) {
    len = 2;
    cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3;
    cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4;
    cp = b0 & 0x07;
  } else {
    ++i;
    return 0xFFFD;
  }
  if (i + len > s.size()) {
    ++i;
    return 0xFFFD;
  }
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      ++i;
      return 0xFFFD;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    ++i;
    return 0xFFFD;
  }
  i += len;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool allowed_in_xml(char32_t cp) {
  return cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) ||
         (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF);
}

}  // namespace

std::string xml_escape(std::string_view s, bool attribute) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const char32_t cp = next_code_point(s, i);
    switch (cp) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      case '\r': out += "&#13;"; break;
      case '\t': out += attribute ? "&#9;" : "\t"; break;
      case '\n': out += attribute ? "&#10;" : "\n"; break;
      default: append_utf8(out, allowed_in_xml(cp) ? cp : char32_t{0xFFFD}); break;
    }
  }
  return out;
}

namespace {

std::string attr(std::string_view s) { return "\"" + xml_escape(s, /*attribute=*/true) + "\""; }

std::string seconds(double s) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3f", s);
  return buf;
}

// The body of a <failure> or <error>: what was expected, what was observed, and where.
std::string failure_text(const ScenarioResult& r) {
  std::string text = "expected: " + (r.expected.empty() ? std::string("pass") : r.expected) + "\n";
  if (r.diagnosis) {
    const Diagnosis& d = *r.diagnosis;
    text += "observed: " + std::string(to_string(d.kind));
    if (d.rank >= 0) text += " (rank " + std::to_string(d.rank) + ")";
    if (d.seq >= 0) text += " at seq " + std::to_string(d.seq);
    if (d.step >= 0) text += " (step " + std::to_string(d.step) + ")";
    text += "\nmessage: " + d.message + "\n";
  } else {
    text += "observed: no diagnosis\n";
  }
  if (!r.reason.empty()) text += "reason: " + r.reason + "\n";
  if (!r.artifacts.empty()) text += "artifacts: " + r.artifacts + "\n";
  return text;
}

std::string failure_message(const ScenarioResult& r, const char* fallback) {
  if (!r.reason.empty()) return r.reason;
  if (r.diagnosis && !r.diagnosis->message.empty()) return r.diagnosis->message;
  return fallback;
}

}  // namespace

std::string_view to_string(Status status) {
  switch (status) {
    case Status::kPass: return "pass";
    case Status::kFail: return "fail";
    case Status::kSkip: return "skip";
    case Status::kError: return "error";
    case Status::kCancelled: return "cancelled";
  }
  return "error";
}

std::string tolerances_text(const Tolerances& t) {
  if (!t.declared) return "";
  return Json{{"param_rtol", t.param_rtol}, {"param_atol", t.param_atol}, {"curve_rtol", t.curve_rtol},
              {"sequence_may_change", t.sequence_may_change}}.dump();
}

Tolerances tolerances_from_text(const std::string& text) {
  Tolerances t;
  if (text.empty()) return t;
  try {
    const Json j = Json::parse(text);
    t.param_rtol = j.at("param_rtol").get<double>();
    t.param_atol = j.at("param_atol").get<double>();
    t.curve_rtol = j.at("curve_rtol").get<double>();
    t.sequence_may_change = j.at("sequence_may_change").get<bool>();
  } catch (const nlohmann::json::exception& e) {
    throw InputError("tolerances: not lockstep's tolerances (" + std::string(e.what()) + "): " + text.substr(0, 200));
  }
  for (double v : {t.param_rtol, t.param_atol, t.curve_rtol}) {
    if (!(v >= 0)) throw InputError("tolerances: a tolerance must be a number >= 0: " + text.substr(0, 200));
  }
  t.declared = true;
  return t;
}

void write_results_json(const RunSummary& run, const std::string& path) {
  const Counts c = count(run);
  Json root;
  root["schema_version"] = kResultsSchemaVersion;
  root["lockstep_version"] = run.lockstep_version;
  root["torch_version"] = run.torch_version;
  root["started_at"] = run.started_at;
  root["duration_s"] = run.duration_s;
  root["summary"] = {{"total", c.total}, {"pass", c.pass},   {"fail", c.fail},
                     {"skip", c.skip},   {"error", c.error}, {"cancelled", c.cancelled}};
  if (!run.cancelled_by.empty()) root["cancelled_by"] = run.cancelled_by;
  root["containment"] = {{"contained", run.containment.contained}, {"namespaces", run.containment.namespaces}};
  if (!run.containment.contained) root["containment"]["reason"] = run.containment.reason;
  Json scenarios = Json::array();
  for (const auto& r : run.results) {
    Json s;
    s["name"] = r.name;
    s["id"] = r.id;
    s["file"] = r.file;
    s["variant"] = r.variant;
    s["tags"] = r.tags;
    s["status"] = std::string(to_string(r.status));
    s["expected"] = r.expected;
    s["diagnosis"] = diagnosis_json(r.diagnosis);
    s["reason"] = r.reason;
    s["duration_s"] = r.duration_s;
    if (r.startup_s >= 0) s["startup_s"] = r.startup_s;
    s["world_size"] = r.world_size;
    s["digest"] = r.digest;
    Json metrics = Json::object();
    for (const auto& [k, v] : r.metrics) metrics[k] = v;
    s["metrics"] = std::move(metrics);
    if (!r.series.empty()) {
      Json series = Json::object();
      for (const auto& [k, v] : r.series) {
        series[k] = {{"values", v.values}, {"rtol", v.rtol}};
        if (!v.steps.empty()) series[k]["steps"] = v.steps;
      }
      s["series"] = std::move(series);
    }
    if (r.tolerances.declared) s["tolerances"] = Json::parse(tolerances_text(r.tolerances));
    if (!r.perf.empty()) {
      Json ranks = Json::array();
      for (const auto& phases : r.perf) {
        Json x = Json::object();
        for (const auto& [name, p] : phases) {
          x[name] = {{"iterations", p.iterations}, {"wall_s", p.wall_s}, {"cpu_s", p.cpu_s},
                     {"main_cpu_s", p.main_cpu_s}, {"user_s", p.user_s},   {"sys_s", p.sys_s}};
          for (const auto& [c, v] : p.counters) x[name][c] = v;
        }
        ranks.push_back(std::move(x));
      }
      s["perf"] = {{"counters", r.counters}, {"ranks", std::move(ranks)}};
    }
    if (!r.samples.empty()) s["samples"] = r.samples;
    s["artifacts"] = r.artifacts;
    if (!r.system.empty()) s["system"] = r.system;
    if (!r.notes.empty()) s["notes"] = r.notes;
    if (!r.waits.empty()) {
      s["waits"] = {{"summary", r.waits},
                    {"file", r.artifacts + "/waits.json"},
                    {"html", r.artifacts + "/waits.html"},
                    {"straggler", r.straggler.empty() ? Json() : Json(r.straggler)}};
    }
    scenarios.push_back(std::move(s));
  }
  root["scenarios"] = std::move(scenarios);
  write_file_atomically(path, root.dump(2, ' ', false, Json::error_handler_t::replace) + "\n");
}

void write_junit_xml(const RunSummary& run, const std::string& path) {
  const Counts c = count(run);
  const std::string totals = " tests=\"" + std::to_string(c.total) + "\" failures=\"" +
                             std::to_string(c.fail) + "\" errors=\"" + std::to_string(c.error) +
                             "\" skipped=\"" + std::to_string(c.skip + c.cancelled) + "\" time=\"" +
                             seconds(run.duration_s) + "\"";
  std::string xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  xml += "<testsuites name=\"lockstep\"" + totals + ">\n";
  xml += "  <testsuite name=\"lockstep\"" + totals;
  if (!run.started_at.empty()) xml += " timestamp=" + attr(run.started_at);
  xml += ">\n";
  for (const auto& r : run.results) {
    xml += "    <testcase classname=" + attr(r.file) + " name=" + attr(r.id) + " time=\"" +
           seconds(r.duration_s) + "\"";
    switch (r.status) {
      case Status::kPass:
        xml += "/>\n";
        continue;
      case Status::kSkip:
      case Status::kCancelled:
        xml += ">\n      <skipped message=" + attr(r.reason) + "/>\n";
        break;
      case Status::kFail:
      case Status::kError: {
        const bool fail = r.status == Status::kFail;
        const char* tag = fail ? "failure" : "error";
        xml += ">\n      <" + std::string(tag) +
               " message=" + attr(failure_message(r, fail ? "failed" : "error"));
        if (r.diagnosis) xml += " type=" + attr(to_string(r.diagnosis->kind));
        xml += ">" + xml_escape(failure_text(r), /*attribute=*/false) + "</" + tag + ">\n";
        break;
      }
    }
    xml += "    </testcase>\n";
  }
  xml += "  </testsuite>\n</testsuites>\n";
  write_file_atomically(path, xml);
}

namespace {

// One Markdown table cell: one line, pipes and backticks escaped, at most 300 characters.
std::string md_cell(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (ch == '\n' || ch == '\r' || ch == '\t') {
      out += ' ';
    } else if (ch == '|' || ch == '`' || ch == '<' || ch == '>' || ch == '*' || ch == '_' || ch == '[' || ch == ']') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) >= 0x20 || ch < 0) {
      out += ch;
    }
    if (out.size() > 300) {
      out += "...";
      break;
    }
  }
  return out;
}

}  // namespace

void write_markdown_summary(const RunSummary& run, const std::string& path) {
  const Counts c = count(run);
  std::ostringstream md;
  md << "# lockstep run\n\n";
  md << "lockstep " << md_cell(run.lockstep_version) << ", LibTorch " << md_cell(run.torch_version) << ", started "
     << md_cell(run.started_at) << ", " << std::fixed << std::setprecision(1) << run.duration_s << " s.\n\n";
  int xfail = 0;
  std::vector<std::string> systems;
  for (const auto& r : run.results) {
    xfail += r.status == Status::kPass && r.diagnosis;
    if (!r.system.empty() && std::find(systems.begin(), systems.end(), r.system) == systems.end()) systems.push_back(r.system);
  }
  // What the programs and systems under test ran on, beside lockstep's own LibTorch above.
  for (const auto& s : systems) md << "Ran on: " << md_cell(s) << ".\n\n";
  md << "**" << c.pass << " passed**";
  if (xfail) md << " (" << xfail << " XFAIL: the injected bug gave the expected diagnosis)";
  md << ", " << c.fail << " failed, " << c.error << " errors, " << c.skip << " skipped, " << c.cancelled << " not run";
  if (!run.cancelled_by.empty()) md << " (cancelled by " << run.cancelled_by << ")";
  md << ".\n\n";
  if (run.results.empty()) md << "No scenario was selected: nothing was checked.\n";
  if (!run.results.empty()) {
    md << "| status | scenario | expected | observed | s | reason |\n|---|---|---|---|---:|---|\n";
    auto rank = [](const ScenarioResult& r) {
      switch (r.status) {
        case Status::kFail: return 0;
        case Status::kError: return 1;
        case Status::kCancelled: return 2;
        case Status::kSkip: return 4;
        case Status::kPass: return 3;
      }
      return 5;
    };
    std::vector<const ScenarioResult*> order;
    for (const auto& r : run.results) order.push_back(&r);
    std::stable_sort(order.begin(), order.end(), [&](const auto* a, const auto* b) { return rank(*a) < rank(*b); });
    for (const auto* r : order) {
      const std::string status = r->status == Status::kPass && r->diagnosis ? "XFAIL" : std::string(to_string(r->status));
      const std::string observed = r->diagnosis ? std::string(to_string(r->diagnosis->kind)) : (r->status == Status::kPass ? "pass" : "");
      md << "| " << status << " | " << md_cell(r->id) << " | " << md_cell(r->expected) << " | " << observed << " | " << std::fixed
         << std::setprecision(2) << r->duration_s << " | " << md_cell(r->reason) << " |\n";
    }
    // What the checks said beside their verdict (declared semantics, tolerances and the worst
    // deviation each check saw), scenario by scenario.
    bool noted = false;
    for (const auto& r : run.results) {
      for (const auto& n : r.notes) {
        if (!noted) md << "\n**Notes**\n\n";
        noted = true;
        md << "- " << md_cell(r.id) << ": " << md_cell(n) << "\n";
      }
    }
    // Where the time went between ranks (the artifacts' waits.json has every call).
    bool waited = false;
    for (const auto& r : run.results) {
      if (r.waits.empty()) continue;
      if (!waited) md << "\n**Waits at collectives**\n\n| scenario | waits | straggler |\n|---|---|---|\n";
      waited = true;
      md << "| [" << md_cell(r.id) << "](" << md_cell(r.artifacts) << "/waits.html) | " << md_cell(r.waits) << " | "
         << (r.straggler.empty() ? "none" : md_cell(r.straggler)) << " |\n";
    }
  }
  md << "\nEach scenario's rank logs, traces (`trace.json` opens in Perfetto) and statuses are in its `artifacts` folder "
        "(results.json), under this report's folder.\n";
  if (!run.containment.contained) md << "\nNot contained: " << md_cell(run.containment.reason) << "\n";
  write_file_atomically(path, md.str());
}

}  // namespace lockstep::report
