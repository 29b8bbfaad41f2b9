// The baseline store's second format: the reviewable JSON export of a store (environments,
// sequences, runs) and its import into another (store.h declares both).
#include "harness/baseline/store.h"

#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/core/error.h"

namespace lockstep::baseline {
namespace {

using Json = nlohmann::ordered_json;

Json call_json(const CallRecord& c) {
  Json j;
  j["seq"] = c.seq;
  j["kind"] = c.kind;
  j["op"] = c.op;
  if (!c.dtype.empty()) j["dtype"] = c.dtype;
  if (c.count != 0) j["count"] = c.count;
  if (!c.device.empty()) j["device"] = c.device;
  if (!c.reduce.empty()) j["reduce"] = c.reduce;
  for (const auto& f : kCallRecordFields) {
    if (c.*f.member != f.none) j[f.name] = c.*f.member;
  }
  if (!c.send_counts.empty()) j["send_counts"] = c.send_counts;
  if (!c.recv_counts.empty()) j["recv_counts"] = c.recv_counts;
  if (!c.group.empty()) j["group"] = c.group;
  j["phase"] = c.phase;
  j["step"] = c.step;
  j["index"] = c.index;
  if (!c.wire.empty()) j["wire"] = c.wire;
  return j;
}

CallRecord call_from_json(const Json& j) {
  CallRecord c;
  c.seq = j.at("seq").get<std::int64_t>();
  c.kind = j.at("kind").get<std::string>();
  c.op = j.at("op").get<std::string>();
  c.dtype = j.value("dtype", "");
  c.count = j.value("count", std::int64_t{0});
  c.device = j.value("device", "");
  c.reduce = j.value("reduce", "");
  for (const auto& f : kCallRecordFields) c.*f.member = j.value(f.name, f.none);
  c.send_counts = j.value("send_counts", "");
  c.recv_counts = j.value("recv_counts", "");
  c.group = j.value("group", "");
  c.phase = j.value("phase", "");
  c.step = j.value("step", std::int64_t{-1});
  c.index = j.value("index", std::int64_t{0});
  c.wire = j.value("wire", "");
  return c;
}

Json env_json(const Environment& e) {
  return Json{{"name", e.name},         {"torch", e.torch}, {"torch_line", e.torch_line}, {"cuda", e.cuda},
              {"nccl", e.nccl},         {"compiler", e.compiler}, {"cpu", e.cpu},       {"gpu", e.gpu},
              {"driver", e.driver},     {"lockstep_rev", e.lockstep_rev}, {"counters", e.counters}};
}

}  // namespace

std::string Store::export_text(const std::string& environment) {
  // Read everything inside one read transaction so the export is a consistent snapshot.
  db_.exec("BEGIN");
  std::ostringstream os;
  try {
    const auto all_runs = runs(environment);
    std::set<std::string> used_envs, used_sequences;
    for (const auto& r : all_runs) {
      used_envs.insert(r.environment);
      for (const auto& x : r.results)
        if (!x.sequence.empty()) used_sequences.insert(x.sequence);
    }
    if (!environment.empty()) {
      env_id(environment);  // throws for an unknown name
      used_envs.insert(environment);
    }
    os << "{\n\"format\": \"lockstep-baseline\",\n\"schema_version\": " << kSchemaVersion << ",\n\"environments\": [";
    bool first = true;
    for (const auto& e : environments()) {
      if (!environment.empty() && !used_envs.count(e.name)) continue;
      os << (first ? "\n" : ",\n") << env_json(e).dump();
      first = false;
    }
    os << "\n],\n\"sequences\": [";
    first = true;
    for (const auto& hash : used_sequences) {
      const Sequence s = sequence(hash);
      os << (first ? "\n" : ",\n") << "{\"hash\": " << Json(hash).dump() << ", \"ranks\": [";
      for (std::size_t r = 0; r < s.size(); ++r) {
        os << (r ? ",\n[" : "\n[");
        for (std::size_t i = 0; i < s[r].size(); ++i) os << (i ? ",\n " : "\n ") << call_json(s[r][i]).dump();
        os << "\n]";
      }
      os << "]}";
      first = false;
    }
    os << "\n],\n\"runs\": [";
    first = true;
    for (const auto& r : all_runs) {
      Json head{{"uid", r.uid},       {"environment", r.environment}, {"started_at", r.started_at},
                {"kind", r.kind},     {"repeat", r.repeat},           {"lockstep_rev", r.lockstep_rev},
                {"host", r.host}};
      std::string h = head.dump();
      h.pop_back();
      os << (first ? "\n" : ",\n") << h << ", \"results\": [";
      for (std::size_t i = 0; i < r.results.size(); ++i) {
        const auto& x = r.results[i];
        Json j{{"scenario", x.scenario}, {"name", x.name},         {"file", x.file},
               {"variant", x.variant},   {"status", x.status},     {"expected", x.expected},
               {"diagnosis", x.diagnosis}, {"digest", x.digest},   {"duration_s", x.duration_s},
               {"world_size", x.world_size}, {"sequence", x.sequence}, {"metrics", x.metrics}};
        if (!x.samples.empty()) j["samples"] = x.samples;
        if (!x.verdict.empty()) j["verdict"] = {x.verdict, x.verdict_detail};
        if (!x.system.empty()) j["system"] = x.system;
        if (!x.tolerances.empty()) j["tolerances"] = Json::parse(x.tolerances);
        if (const Numerics n = x.row ? numerics(x.row) : x.numerics; !n.empty()) j["numerics"] = numerics_json(n);
        j["timeline"] = x.timeline.empty() ? Json(nullptr) : Json::parse(x.timeline);
        os << (i ? ",\n " : "\n ") << j.dump();
      }
      os << "\n]}";
      first = false;
    }
    os << "\n]\n}\n";
  } catch (...) {
    db_.exec("ROLLBACK");
    throw;
  }
  db_.exec("COMMIT");
  return os.str();
}

Export parse_export(const std::string& text, const std::string& source) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const std::exception& e) {
    throw InputError(source + ": not JSON: " + e.what());
  }
  if (!j.is_object() || j.value("format", "") != "lockstep-baseline")
    throw InputError(source + ": not a lockstep baseline export (format must be \"lockstep-baseline\")");
  const int version = j.value("schema_version", 0);
  if (version < 1 || version > kSchemaVersion)
    throw InputError(source + ": export schema_version " + std::to_string(version) + " is not supported (this lockstep: 1.." +
                     std::to_string(kSchemaVersion) + ")");
  Export out;
  out.source = source;
  try {
    for (const auto& e : j.at("environments")) {
      out.environments.push_back(Environment{e.at("name"), e.at("torch"), e.at("torch_line"), e.at("cuda"), e.at("nccl"),
                                             e.at("compiler"), e.at("cpu"), e.at("gpu"), e.at("driver"),
                                             e.at("lockstep_rev"), e.value("counters", "")});
    }
    for (const auto& s : j.at("sequences")) {
      Sequence seq;
      for (const auto& rank : s.at("ranks")) {
        seq.emplace_back();
        for (const auto& c : rank) seq.back().push_back(call_from_json(c));
      }
      out.sequences.emplace_back(s.at("hash").get<std::string>(), std::move(seq));
    }
    for (const auto& r : j.at("runs")) {
      StoredRun run{r.at("uid"), r.at("environment"), r.at("started_at"), r.at("kind"), r.at("repeat").get<int>(),
                    r.at("lockstep_rev"), r.value("host", ""), {}};
      std::set<std::string> scenarios;
      for (const auto& x : r.at("results")) {
        StoredResult s;
        s.scenario = x.at("scenario");
        s.name = x.at("name");
        s.file = x.at("file");
        s.variant = x.at("variant");
        s.status = x.at("status");
        s.expected = x.at("expected");
        s.diagnosis = x.at("diagnosis");
        s.digest = x.at("digest");
        s.duration_s = x.at("duration_s").get<double>();
        s.world_size = x.at("world_size").get<int>();
        s.sequence = x.at("sequence");
        for (const auto& [k, v] : x.at("metrics").items()) s.metrics[k] = v.get<double>();
        if (x.contains("samples"))
          for (const auto& [k, v] : x["samples"].items()) s.samples[k] = v.get<std::vector<double>>();
        if (x.contains("verdict")) {
          s.verdict = x["verdict"].at(0).get<std::string>();
          s.verdict_detail = x["verdict"].at(1).get<std::string>();
        }
        if (x.contains("timeline") && !x["timeline"].is_null()) s.timeline = x["timeline"].dump();
        s.system = x.value("system", "");
        try {
          if (x.contains("tolerances") && !x["tolerances"].is_null()) s.tolerances = report::tolerances_text(report::tolerances_from_text(x["tolerances"].dump()));
          if (x.contains("numerics")) s.numerics = Store::numerics_from_json(x["numerics"]);
        } catch (const InputError& e) {
          throw InputError(source + ": run " + run.uid + ", " + s.scenario + ": " + e.what());
        }
        if (!scenarios.insert(s.scenario).second)
          throw InputError(source + ": run " + run.uid + " has scenario " + s.scenario + " twice");
        run.results.push_back(std::move(s));
      }
      out.runs.push_back(std::move(run));
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError(source + ": malformed baseline export: " + e.what());
  }
  return out;
}

std::vector<int> Store::import_exports(const std::vector<Export>& exports) {
  std::vector<int> added;
  Transaction tx(db_);
  for (const auto& x : exports) {
    int n = 0;
    try {
      for (const auto& e : x.environments) add_environment(e);
      for (const auto& [hash, seq] : x.sequences) put_sequence(hash, seq);
      for (const auto& run : x.runs) {
        Statement have(db_, "SELECT 1 FROM runs WHERE uid = ?");
        have.bind(1, run.uid);
        if (have.step()) continue;
        insert_run(run);
        ++n;
      }
    } catch (const InputError& e) {
      // A conflict with the database (an environment bound to another stack, a run of an
      // unknown environment): name the export. Failures of the file itself name the file.
      const std::string what = e.what();
      if (what.rfind(db_.path() + ":", 0) == 0) throw;
      throw InputError(x.source + ": " + what);
    }
    added.push_back(n);
  }
  tx.commit();
  return added;
}

int Store::import_text(const std::string& text, const std::string& source) {
  return import_exports({parse_export(text, source)}).front();
}

}  // namespace lockstep::baseline
