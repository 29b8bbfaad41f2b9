#include "harness/baseline/check.h"

#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "harness/core/error.h"

namespace lockstep::baseline {

std::map<std::string, ScenarioBaseline> load_baseline(Store& store, const std::string& environment) {
  std::map<std::string, ScenarioBaseline> out;
  for (const auto& run : store.runs(environment)) {
    if (run.kind != "record") continue;
    for (const auto& r : run.results) {
      auto& b = out[r.scenario];
      ++b.runs;
      b.status = r.status;  // runs are oldest first: the latest wins
      b.expected = r.expected;
      b.diagnosis = r.diagnosis;
      b.digest = r.digest;
      b.sequence = r.sequence;
      b.row = r.row;
      b.system = r.system;
      b.tolerances = r.tolerances;
      if (r.status == "pass") add_run_samples(r.metrics, r.samples, b.samples, b.run_medians);
    }
  }
  return out;
}

std::optional<Diagnosis> check_exact(Store& store, const ScenarioBaseline& base, const Observation& obs) {
  if (!obs.clean || base.status != "pass" || !base.diagnosis.empty()) return std::nullopt;
  for (std::size_t i = 0; i < obs.digests.size(); ++i) {
    if (!base.digest.empty() && obs.digests[i] != base.digest) {
      // What moved, where both sides kept their numbers: exactly (a check is of the same
      // environment, so [compare]'s tolerances do not apply).
      std::string what;
      const Numerics observed = i < obs.numbers.size() && obs.numbers[i] && base.row ? obs.numbers[i]() : Numerics{};
      if (!observed.empty()) {
        const Numerics recorded = store.numerics(base.row);
        if (!recorded.empty()) {
          const auto nc = compare_numerics(recorded, observed, Tolerances{});
          if (!nc.identical) what = ": " + nc.detail;
        }
      }
      return Diagnosis{DiagnosisKind::kResultMismatch,
                       obs.scenario + ": output digest " + (obs.digests[i].empty() ? "(none)" : obs.digests[i]) +
                           " differs from the recorded " + base.digest +
                           (obs.digests.size() > 1 ? " (repeat " + std::to_string(i + 1) + ")" : "") + what,
                       -1, -1};
    }
  }
  if (!base.sequence.empty()) {
    std::optional<Sequence> golden;
    for (std::size_t i = 0; i < obs.sequences.size(); ++i) {
      const auto& seq = obs.sequences[i];
      if (!seq || sequence_hash(*seq) == base.sequence) continue;
      if (!golden) golden = store.sequence(base.sequence);
      if (auto d = first_divergence(*golden, *seq)) {
        const auto& rec = (*golden)[std::min<std::size_t>(static_cast<std::size_t>(d->rank), golden->size() - 1)];
        std::int64_t seqno = static_cast<std::size_t>(d->position) < rec.size() ? rec[static_cast<std::size_t>(d->position)].seq : -1;
        return Diagnosis{DiagnosisKind::kSequenceChanged,
                         obs.scenario + ": collective sequence differs from the golden one at " + d->message(), d->rank,
                         seqno};
      }
    }
  }
  return std::nullopt;
}

namespace {
const std::vector<double>& runs_of(const std::map<std::string, std::vector<double>>& m, const std::string& metric) {
  static const std::vector<double> none;
  auto it = m.find(metric);
  return it == m.end() ? none : it->second;
}
}  // namespace

std::vector<std::pair<std::string, Judgement>> throughput_suspects(
    const ScenarioBaseline& base, const std::map<std::string, std::vector<double>>& samples,
    const std::map<std::string, std::vector<double>>& run_medians, const RuleOptions& rule) {
  std::vector<std::pair<std::string, Judgement>> out;
  if (base.status != "pass") return out;
  for (const auto& [metric, observed] : samples) {
    auto it = base.samples.find(metric);
    if (it == base.samples.end()) continue;
    const Judgement j = judge(metric, it->second, observed, rule_for(metric, rule), runs_of(base.run_medians, metric),
                              runs_of(run_medians, metric));
    if (j.slower) out.emplace_back(metric, j);
  }
  return out;
}

std::string_view to_string(Verdict v) {
  switch (v) {
    case Verdict::kSame: return "same";
    case Verdict::kResultsChanged: return "results_changed";
    case Verdict::kSequenceChanged: return "sequence_changed";
    case Verdict::kThroughputChanged: return "throughput_changed";
    case Verdict::kOnlyInFrom: return "only_in_from";
    case Verdict::kOnlyInTo: return "only_in_to";
    case Verdict::kWithinTolerance: return "within_tolerance";
  }
  return "?";
}

Comparison compare(Store& store, const std::string& from, const std::string& to, const RuleOptions& rule) {
  Comparison c;
  auto fe = store.environment(from);
  auto te = store.environment(to);
  if (!fe) throw InputError("--from: no environment named '" + from + "' in " + store.db().path());
  if (!te) throw InputError("--to: no environment named '" + to + "' in " + store.db().path());
  c.from = *fe;
  c.to = *te;
  for (const auto& r : store.runs(from)) c.from_runs += r.kind == "record";
  for (const auto& r : store.runs(to)) c.to_runs += r.kind == "record";
  const auto a = load_baseline(store, from);
  const auto b = load_baseline(store, to);
  std::set<std::string> fs, ts;
  for (const auto& [_, x] : a) if (!x.system.empty()) fs.insert(x.system);
  for (const auto& [_, y] : b) if (!y.system.empty()) ts.insert(y.system);
  c.from_systems.assign(fs.begin(), fs.end());
  c.to_systems.assign(ts.begin(), ts.end());
  std::set<std::string> ids;
  for (const auto& [k, _] : a) ids.insert(k);
  for (const auto& [k, _] : b) ids.insert(k);
  for (const auto& id : ids) {
    ScenarioComparison s;
    s.scenario = id;
    auto ia = a.find(id), ib = b.find(id);
    // A scenario skipped in one environment (it cannot run there: a module its interpreter lacks)
    // was not run there: it is in the other only, not a changed result.
    const bool skipped_a = ia != a.end() && ia->second.status == "skip", skipped_b = ib != b.end() && ib->second.status == "skip";
    if (skipped_a && skipped_b) {
      s.detail = "skipped in both";
    } else if (ib == b.end() || skipped_b) {
      s.verdict = Verdict::kOnlyInFrom;
      s.detail = skipped_b ? "skipped in " + to + " (it could not run there), run in " + from : "recorded only in " + from;
    } else if (ia == a.end() || skipped_a) {
      s.verdict = Verdict::kOnlyInTo;
      s.detail = skipped_a ? "skipped in " + from + " (it could not run there), run in " + to : "recorded only in " + to;
    } else {
      const auto& x = ia->second;
      const auto& y = ib->second;
      for (const auto& [metric, xs] : x.samples) {
        auto it = y.samples.find(metric);
        if (it == y.samples.end()) continue;
        // Equal numbers of runs are paired in recording order (ci/compat interleaves them).
        const auto& ra = runs_of(x.run_medians, metric);
        const auto& rb = runs_of(y.run_medians, metric);
        const Judgement j = judge(metric, xs, it->second, rule_for(metric, rule), ra, rb, ra.size() == rb.size());
        if (j.judged) s.metrics[metric] = j;
      }
      // The detail keeps every finding in this order: the collective sequence, the numbers
      // (digest, curves, tensors), throughput. The verdict is the most severe beyond what
      // [compare] tolerates: results_changed (the outcome, or the numbers), sequence_changed,
      // throughput_changed, within_tolerance.
      s.from_system = x.system;
      s.to_system = y.system;
      const Tolerances tol = report::tolerances_from_text(!y.tolerances.empty() ? y.tolerances : x.tolerances);
      if (x.status != y.status || x.diagnosis != y.diagnosis) {
        s.verdict = Verdict::kResultsChanged;
        s.detail = "status " + x.status + (x.diagnosis.empty() ? "" : " (" + x.diagnosis + ")") + " -> " + y.status +
                   (y.diagnosis.empty() ? "" : " (" + y.diagnosis + ")");
      } else {
        std::vector<std::string> notes;
        if (x.sequence != y.sequence && !x.sequence.empty() && !y.sequence.empty()) {
          if (auto d = first_divergence(store.sequence(x.sequence), store.sequence(y.sequence))) {
            if (!tol.sequence_may_change) s.verdict = Verdict::kSequenceChanged;
            s.sequence = d->message();
            notes.push_back(std::string(tol.sequence_may_change ? "collective sequence changed ([compare] sequence = \"may_change\"): " : "") +
                            "first divergence: " + d->message());
          } else {
            notes.push_back("same collective sequence; engines carried some calls differently (wire)");
          }
        }
        // Equal digests cover the parameters: then only the curves are read and compared.
        const bool tensors = x.digest != y.digest || x.digest.empty();
        const Numerics na = x.row ? store.numerics(x.row, tensors) : Numerics{};
        const Numerics nb = y.row ? store.numerics(y.row, tensors) : Numerics{};
        const bool numbers = !na.empty() && !nb.empty();
        const NumericsComparison nc = numbers ? compare_numerics(na, nb, tol) : NumericsComparison{};
        if (numbers) s.numbers = nc;
        for (const auto& ca : na.curves)
          for (const auto& cb : nb.curves)
            if (ca.name == cb.name) s.curves.emplace_back(ca, cb);
        const std::string digests = "digest " + (x.digest.empty() ? "(none)" : x.digest) + " -> " + (y.digest.empty() ? "(none)" : y.digest);
        if ((x.digest != y.digest && (!numbers || nc.identical)) || (numbers && !nc.within)) {
          s.verdict = Verdict::kResultsChanged;
          notes.insert(notes.begin(), numbers ? (nc.identical ? digests + " (the recorded tensors and curves are identical: the digest covers more)"
                                                              : nc.detail + " (" + digests + ")")
                                              : digests);
        } else if (numbers && !nc.identical) {
          if (s.verdict == Verdict::kSame) s.verdict = Verdict::kWithinTolerance;
          notes.push_back("within tolerance: " + nc.detail);
        }
        for (const auto& n : notes) s.detail += (s.detail.empty() ? "" : "; ") + n;
      }
      if (s.verdict == Verdict::kSame || s.verdict == Verdict::kWithinTolerance) {
        std::string changed;
        for (const auto& [metric, j] : s.metrics) {
          if (!j.slower && !j.faster) continue;
          changed += (changed.empty() ? "" : "; ") + metric + " " + describe(j);
        }
        if (!changed.empty()) {
          s.verdict = Verdict::kThroughputChanged;
          s.detail = changed + (s.detail.empty() ? "" : "; " + s.detail);
        }
      }
    }
    c.scenarios.push_back(std::move(s));
  }
  return c;
}

namespace {
nlohmann::ordered_json env_json(const Environment& e) {
  return {{"name", e.name},   {"torch", e.torch},       {"torch_line", e.torch_line}, {"cuda", e.cuda},
          {"nccl", e.nccl},   {"compiler", e.compiler}, {"cpu", e.cpu},               {"gpu", e.gpu},
          {"driver", e.driver}, {"lockstep_rev", e.lockstep_rev}};
}
std::string md_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '|' || ch == '\\' || ch == '`' || ch == '*' || ch == '_' || ch == '<' || ch == '>' || ch == '[' || ch == ']')
      out += '\\';
    if (ch == '\n') {
      out += ' ';
      continue;
    }
    out += ch;
  }
  return out;
}
}  // namespace

nlohmann::ordered_json comparison_json(const Comparison& c) {
  nlohmann::ordered_json j;
  j["from"] = env_json(c.from);
  j["to"] = env_json(c.to);
  j["from"]["ran_on"] = c.from_systems;
  j["to"]["ran_on"] = c.to_systems;
  j["from_runs"] = c.from_runs;
  j["to_runs"] = c.to_runs;
  std::map<std::string, int> counts;
  auto arr = nlohmann::ordered_json::array();
  for (const auto& s : c.scenarios) {
    ++counts[std::string(to_string(s.verdict))];
    nlohmann::ordered_json x;
    x["scenario"] = s.scenario;
    x["verdict"] = std::string(to_string(s.verdict));
    x["detail"] = s.detail;
    auto m = nlohmann::ordered_json::object();
    for (const auto& [name, jd] : s.metrics) {
      m[name] = {{"direction", std::string(to_string(direction_of(name)))},
                 {"ratio", jd.ratio},
                 {"ci95", {jd.ci_low, jd.ci_high}},
                 {"p_slower", jd.p_slower},
                 {"p_faster", jd.p_faster},
                 {"tolerated", jd.threshold},
                 {"changed", jd.slower ? "slower" : jd.faster ? "faster" : "no"}};
    }
    x["metrics"] = std::move(m);
    if (!s.from_system.empty() || !s.to_system.empty()) x["ran_on"] = {s.from_system, s.to_system};
    if (!s.sequence.empty()) x["first_sequence_divergence"] = s.sequence;
    if (!s.numbers.tensors.empty() || !s.numbers.curves.empty()) {
      auto tensors = nlohmann::ordered_json::array(), curves = nlohmann::ordered_json::array();
      for (const auto& t : s.numbers.tensors)
        tensors.push_back({{"name", t.name}, {"elements", t.elements}, {"differ", t.differ}, {"beyond", t.beyond},
                           {"max_abs", t.max_abs}, {"max_rel", t.max_rel}, {"problem", t.problem}});
      for (const auto& cd : s.numbers.curves)
        curves.push_back({{"name", cd.name}, {"steps", cd.points}, {"first_differ_step", cd.first_differ_step},
                          {"first_beyond_step", cd.first_beyond_step}, {"max_rel", cd.max_rel}, {"problem", cd.problem}});
      x["numbers"] = {{"identical", s.numbers.identical}, {"within", s.numbers.within}, {"tensors", std::move(tensors)},
                      {"curves", std::move(curves)}};
    }
    arr.push_back(std::move(x));
  }
  j["summary"] = counts;
  j["scenarios"] = std::move(arr);
  return j;
}

std::string comparison_markdown(const Comparison& c) {
  std::ostringstream os;
  os << "# Compatibility: " << md_escape(c.from.name) << " vs " << md_escape(c.to.name) << "\n\n";
  os << "| | " << md_escape(c.from.name) << " | " << md_escape(c.to.name) << " |\n|---|---|---|\n";
  auto row = [&](const char* what, const std::string& a, const std::string& b) {
    os << "| " << what << " | " << md_escape(a) << " | " << md_escape(b) << " |\n";
  };
  auto joined = [](const std::vector<std::string>& v) {
    std::string out;
    for (const auto& x : v) out += (out.empty() ? "" : "; ") + x;
    return out.empty() ? std::string("(lockstep's own workloads only)") : out;
  };
  if (!c.from_systems.empty() || !c.to_systems.empty()) row("programs ran on", joined(c.from_systems), joined(c.to_systems));
  row("lockstep's LibTorch", c.from.torch + " (" + c.from.torch_line + ")", c.to.torch + " (" + c.to.torch_line + ")");
  row("CUDA", c.from.cuda, c.to.cuda);
  row("NCCL", c.from.nccl, c.to.nccl);
  row("compiler", c.from.compiler, c.to.compiler);
  row("CPU", c.from.cpu, c.to.cpu);
  row("GPU / driver", c.from.gpu + " / " + c.from.driver, c.to.gpu + " / " + c.to.driver);
  row("lockstep", c.from.lockstep_rev, c.to.lockstep_rev);
  row("records (runs recorded)", std::to_string(c.from_runs), std::to_string(c.to_runs));
  std::map<std::string, int> counts;
  for (const auto& s : c.scenarios) ++counts[std::string(to_string(s.verdict))];
  os << "\n**Verdicts:**";
  for (const auto& [k, n] : counts) os << " " << k << " " << n << ";";
  os << "\n\nThroughput ratios are " << md_escape(c.to.name) << " / " << md_escape(c.from.name)
     << " of the metric's medians, with a 95% Hodges-Lehmann interval; a change needs a one-sided exact "
        "Mann-Whitney p below alpha and a ratio beyond the noise-aware tolerance (reports/README.md).\n\n";
  os << "| scenario | verdict | detail | metrics |\n|---|---|---|---|\n";
  for (const auto& s : c.scenarios) {
    std::string metrics;
    for (const auto& [name, j] : s.metrics) metrics += (metrics.empty() ? "" : "<br>") + md_escape(name) + " " + md_escape(describe(j));
    const bool ok = s.verdict == Verdict::kSame || s.verdict == Verdict::kWithinTolerance;
    os << "| " << md_escape(s.scenario) << " | " << (ok ? md_escape(std::string(to_string(s.verdict))) : "**" + std::string(to_string(s.verdict)) + "**")
       << " | " << md_escape(s.detail) << " | " << metrics << " |\n";
  }
  return os.str();
}

}  // namespace lockstep::baseline
