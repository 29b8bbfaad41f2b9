#include "harness/baseline/store.h"

#include "harness/baseline/store_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <tuple>

#include <nlohmann/json.hpp>

#include "harness/core/error.h"

namespace lockstep::baseline {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;


std::string new_uid() {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^
                      static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                      (static_cast<std::uint64_t>(getpid()) << 17));
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(gen()),
                static_cast<unsigned long long>(gen()));
  return buf;
}

std::string hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

// A call the waits check lines up (harness/launch/waits_check.h: read_arrivals): a collective
// of the default group, with its clocks.
bool lined_up(const CallRecord& c) { return c.kind == "collective" && c.group.empty() && c.t_start_us != 0; }

std::string timeline_json(const Sequence& s) {
  std::int64_t t0 = 0;
  bool first = true;
  for (const auto& rank : s)
    for (const auto& c : rank)
      if (c.t_start_us != 0 && (first || c.t_start_us < t0)) {
        t0 = c.t_start_us;
        first = false;
      }
  Json j;
  j["t0_us"] = t0;
  Json ranks = Json::array();
  for (const auto& rank : s) {
    Json spans = Json::array();
    for (std::size_t i = 0; i < rank.size() && i < static_cast<std::size_t>(kTimelineCallsPerRank); ++i) {
      const CallRecord& c = rank[i];
      spans.push_back(Json::array({c.op, c.t_start_us - t0, c.t_end_us - t0, c.seq, c.step, c.phase, lined_up(c) ? 1 : 0}));
    }
    ranks.push_back(std::move(spans));
  }
  j["ranks"] = std::move(ranks);
  return j.dump();
}

StoredResult stored_result(const report::ScenarioResult& r) {
  StoredResult s;
  s.scenario = r.id;
  s.name = r.name;
  s.file = r.file;
  s.variant = r.variant;
  s.status = std::string(report::to_string(r.status));
  s.expected = r.expected;
  s.diagnosis = r.diagnosis ? std::string(to_string(r.diagnosis->kind)) : "";
  s.digest = r.digest;
  s.duration_s = r.duration_s;
  s.world_size = r.world_size;
  s.metrics = r.metrics;
  s.samples = r.samples;
  s.system = r.system;
  s.tolerances = report::tolerances_text(r.tolerances);
  return s;
}


// What a run ran on, by component: "torch 2.15.0, cuda 13.2, python 3.11.2" -> {torch: 2.15.0, ...}
// (a program's identity, lockstep_torch/identity.py; before it, "torch <version>" alone); a
// system under test's "pyg (torch 2.14.1, torch_geometric 2.8.1)" -> {system: pyg, torch: ...}.
std::map<std::string, std::string> components_of(std::string system) {
  std::map<std::string, std::string> out;
  const std::size_t open = system.find(" (");
  if (open != std::string::npos && !system.empty() && system.back() == ')') {
    out["system"] = system.substr(0, open);
    system = system.substr(open + 2, system.size() - open - 3);
  }
  std::size_t at = 0;
  while (at < system.size()) {
    std::size_t end = system.find(", ", at);
    if (end == std::string::npos) end = system.size();
    const std::string part = system.substr(at, end - at);
    const std::size_t space = part.find(' ');
    if (space == std::string::npos) out[part] = "";
    else out[part.substr(0, space)] = part.substr(space + 1);
    at = end + 2;
  }
  return out;
}

// The components both runs name whose versions differ, "torch 1.13.0 -> 2.15.0, python 3.11.2 ->
// 3.12.1"; "" when none does (a package one of them did not import is not a difference).
std::string differences(const std::string& before, const std::string& now) {
  const auto a = components_of(before), b = components_of(now);
  std::string out;
  for (const auto& [name, version] : a) {
    const auto it = b.find(name);
    if (it == b.end() || it->second == version) continue;
    out += (out.empty() ? "" : ", ") + name + " " + version + " -> " + it->second;
  }
  return out;
}
}  // namespace

Store::Store(const std::string& path, Access access) : db_(file::open_checked(path, access)) {
  db_.exec("PRAGMA foreign_keys = ON");
  migrate();
}

int Store::schema_version() {
  Statement st(db_, "PRAGMA user_version");
  st.step();
  return static_cast<int>(st.int64(0));
}

void Store::migrate() {
  if (schema_version() == kSchemaVersion) return;
  if (db_.read_only())
    throw InputError(db_.path() + ": baseline schema version " + std::to_string(schema_version()) + " must be migrated to " +
                     std::to_string(kSchemaVersion) + ", which needs write access to the file");
  file::enable_wal(db_);
  Transaction tx(db_);
  // Re-read under the write lock: another process may have migrated meanwhile.
  const int version = schema_version();
  file::refuse_newer(db_.path(), version);
  if (version == kSchemaVersion) return;
  file::upgrade(db_, version);
  tx.commit();
}

std::vector<std::string> Store::integrity_problems() {
  std::vector<std::string> out;
  Statement st(db_, "PRAGMA integrity_check");
  while (st.step()) {
    const std::string line = st.text(0);
    if (line != "ok") out.push_back(line);
  }
  Statement fk(db_, "PRAGMA foreign_key_check");
  while (fk.step()) out.push_back("foreign key violation in table " + fk.text(0) + " row " + std::to_string(fk.int64(1)));
  return out;
}

void Store::put_environment(const Environment& e) {
  Transaction tx(db_);
  add_environment(e);
  tx.commit();
}

void Store::add_environment(const Environment& e) {
  if (auto have = environment(e.name)) {
    auto differ = [&](const char* what, const std::string& a, const std::string& b) {
      if (a != b)
        throw InputError("environment '" + e.name + "' was recorded with " + what + " " + a + ", this run has " + b +
                         "; choose another name with --env");
    };
    differ("LibTorch", have->torch, e.torch);
    differ("CUDA", have->cuda, e.cuda);
    differ("NCCL", have->nccl, e.nccl);
    differ("compiler", have->compiler, e.compiler);
    differ("CPU", have->cpu, e.cpu);
    differ("GPU", have->gpu, e.gpu);
    differ("driver", have->driver, e.driver);
    return;
  }
  Statement ins(db_,
                "INSERT INTO environments(name, torch, torch_line, cuda, nccl, compiler, cpu, gpu, driver, lockstep_rev,"
                " counters) VALUES(?,?,?,?,?,?,?,?,?,?,?)");
  ins.bind(1, e.name).bind(2, e.torch).bind(3, e.torch_line).bind(4, e.cuda).bind(5, e.nccl).bind(6, e.compiler);
  ins.bind(7, e.cpu).bind(8, e.gpu).bind(9, e.driver).bind(10, e.lockstep_rev).bind(11, e.counters);
  ins.run();
}

std::vector<Environment> Store::environments() {
  std::vector<Environment> out;
  Statement st(db_, "SELECT name, torch, torch_line, cuda, nccl, compiler, cpu, gpu, driver, lockstep_rev, counters"
                    " FROM environments ORDER BY name");
  while (st.step()) {
    out.push_back(Environment{st.text(0), st.text(1), st.text(2), st.text(3), st.text(4), st.text(5), st.text(6),
                              st.text(7), st.text(8), st.text(9), st.text(10)});
  }
  return out;
}

std::optional<Environment> Store::environment(const std::string& name) {
  for (auto& e : environments())
    if (e.name == name) return e;
  return std::nullopt;
}

std::int64_t Store::env_id(const std::string& name) {
  Statement st(db_, "SELECT id FROM environments WHERE name = ?");
  st.bind(1, name);
  if (!st.step()) throw InputError("no environment named '" + name + "' in " + db_.path());
  return st.int64(0);
}

std::int64_t Store::put_sequence(const std::string& hash, const Sequence& s) {
  {
    Statement find(db_, "SELECT id FROM sequences WHERE hash = ?");
    find.bind(1, hash);
    if (find.step()) return find.int64(0);
  }
  Statement ins(db_, "INSERT INTO sequences(hash, ranks) VALUES(?, ?)");
  ins.bind(1, hash).bind(2, static_cast<std::int64_t>(s.size()));
  ins.run();
  const std::int64_t id = db_.last_insert_id();
  Statement call(db_,
                 "INSERT INTO sequence_calls(sequence_id, rank, pos, seq, kind, op, dtype, count, device, reduce, root,"
                 " peer, tag, send_counts, recv_counts, phase, step, call_index, wire, grp, fields)"
                 " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  for (std::size_t r = 0; r < s.size(); ++r) {
    for (std::size_t i = 0; i < s[r].size(); ++i) {
      const auto& c = s[r][i];
      call.bind(1, id).bind(2, static_cast<std::int64_t>(r)).bind(3, static_cast<std::int64_t>(i)).bind(4, c.seq);
      call.bind(5, c.kind).bind(6, c.op).bind(7, c.dtype).bind(8, c.count).bind(9, c.device).bind(10, c.reduce);
      // The table's first rows in their own columns (11-13), later ones in `fields`.
      for (int k = 0; k < trace::kCallFieldsBeforeTable; ++k) call.bind(11 + k, c.*kCallRecordFields[k].member);
      call.bind(14, c.send_counts).bind(15, c.recv_counts);
      call.bind(16, c.phase).bind(17, c.step).bind(18, c.index).bind(19, c.wire).bind(20, c.group);
      call.bind(21, later_fields_text(c));
      call.run();
    }
  }
  return id;
}

Sequence Store::sequence(const std::string& hash) {
  Statement st(db_,
               "SELECT s.ranks, c.rank, c.seq, c.kind, c.op, c.dtype, c.count, c.device, c.reduce, c.root, c.peer,"
               " c.tag, c.send_counts, c.recv_counts, c.phase, c.step, c.call_index, c.wire, c.grp, c.fields"
               " FROM sequences s LEFT JOIN sequence_calls c ON c.sequence_id = s.id WHERE s.hash = ?"
               " ORDER BY c.rank, c.pos");
  st.bind(1, hash);
  Sequence out;
  bool found = false;
  while (st.step()) {
    if (!found) out.resize(static_cast<std::size_t>(st.int64(0)));
    found = true;
    if (st.is_null(1)) continue;
    CallRecord c;
    c.seq = st.int64(2);
    c.kind = st.text(3);
    c.op = st.text(4);
    c.dtype = st.text(5);
    c.count = st.int64(6);
    c.device = st.text(7);
    c.reduce = st.text(8);
    for (int k = 0; k < trace::kCallFieldsBeforeTable; ++k) c.*kCallRecordFields[k].member = st.int64(9 + k);
    c.send_counts = st.text(12);
    c.recv_counts = st.text(13);
    c.phase = st.text(14);
    c.step = st.int64(15);
    c.index = st.int64(16);
    c.wire = st.text(17);
    c.group = st.text(18);
    read_later_fields(st.text(19), &c);
    const auto r = static_cast<std::size_t>(st.int64(1));
    LOCKSTEP_CHECK(r < out.size(), "sequence ", hash, ": call on rank ", r, " of ", out.size());
    out[r].push_back(std::move(c));
  }
  LOCKSTEP_CHECK(found, "no sequence with hash ", hash, " in ", db_.path());
  return out;
}

void Store::insert_run(const StoredRun& run) {
  const std::int64_t env = env_id(run.environment);
  Statement ins(db_, "INSERT INTO runs(uid, env_id, started_at, kind, repeat, lockstep_rev, host) VALUES(?,?,?,?,?,?,?)");
  ins.bind(1, run.uid).bind(2, env).bind(3, run.started_at).bind(4, run.kind).bind(5, run.repeat);
  ins.bind(6, run.lockstep_rev).bind(7, run.host);
  ins.run();
  const std::int64_t run_id = db_.last_insert_id();
  Statement res(db_,
                "INSERT INTO results(run_id, scenario, name, file, variant, status, expected, diagnosis, digest,"
                " duration_s, world_size, sequence_id, verdict, verdict_detail, system, tolerances)"
                " VALUES(?,?,?,?,?,?,?,?,?,?,?,(SELECT id FROM sequences WHERE hash = ?),?,?,?,?)");
  Statement ser(db_, "INSERT INTO sample_series(result_id, name, vals) VALUES(?,?,?)");
  Statement met(db_, "INSERT INTO metric_samples(result_id, name, value) VALUES(?,?,?)");
  Statement tl(db_, "INSERT INTO timelines(result_id, spans) VALUES(?,?)");
  for (const auto& r : run.results) {
    res.bind(1, run_id).bind(2, r.scenario).bind(3, r.name).bind(4, r.file).bind(5, r.variant).bind(6, r.status);
    res.bind(7, r.expected).bind(8, r.diagnosis).bind(9, r.digest).bind(10, r.duration_s).bind(11, r.world_size);
    if (r.sequence.empty()) res.bind_null(12);
    else res.bind(12, r.sequence);
    res.bind(13, r.verdict).bind(14, r.verdict_detail).bind(15, r.system).bind(16, r.tolerances);
    res.run();
    const std::int64_t result_id = db_.last_insert_id();
    put_numerics(result_id, r.numerics);
    for (const auto& [k, v] : r.metrics) {
      met.bind(1, result_id).bind(2, k).bind(3, v);
      met.run();
    }
    for (const auto& [k, v] : r.samples) {
      ser.bind(1, result_id).bind(2, k).bind(3, Json(v).dump());
      ser.run();
    }
    if (!r.timeline.empty()) {
      tl.bind(1, result_id).bind(2, r.timeline);
      tl.run();
    }
  }
}

Numerics numerics_of(const report::ScenarioResult& r, const std::string& artifacts_dir) {
  Numerics n;
  for (const auto& [name, series] : r.series) {
    if (series.values.empty()) continue;
    CurveValues c{name, series.steps, series.values};
    if (c.steps.size() != c.values.size()) {
      c.steps.clear();
      for (std::size_t i = 0; i < c.values.size(); ++i) c.steps.push_back(static_cast<std::int64_t>(i));
    }
    n.curves.push_back(std::move(c));
  }
  try {
    n.tensors = read_tensor_files(artifacts_dir, r.world_size);
  } catch (const InputError& e) {
    // What a program wrote is untrusted: one bad file costs its tensors, not the record.
    std::cerr << "lockstep: " << e.what() << ": " << r.id << "'s parameters are not kept for comparisons\n";
  }
  return n;
}

std::string Store::record(const Environment& env, const report::RunSummary& summary, const std::string& report_dir,
                          int repeat) {
  StoredRun run;
  run.uid = new_uid();
  run.environment = env.name;
  run.started_at = summary.started_at;
  run.kind = "record";
  run.repeat = repeat;
  run.lockstep_rev = env.lockstep_rev;
  run.host = hostname();
  std::map<std::string, Sequence> sequences;
  for (const auto& r : summary.results) {
    StoredResult s = stored_result(r);
    if (r.status == report::Status::kPass && !r.diagnosis && !r.artifacts.empty()) {
      s.numerics = numerics_of(r, (fs::path(report_dir) / r.artifacts).string());
      if (auto seq = read_sequence((fs::path(report_dir) / r.artifacts).string(), r.world_size)) {
        s.sequence = sequence_hash(*seq);
        s.timeline = timeline_json(*seq);
        sequences.emplace(s.sequence, std::move(*seq));
      }
    }
    run.results.push_back(std::move(s));
  }
  Transaction tx(db_);
  add_environment(env);
  refuse_other_system(env.name, run);
  for (const auto& [hash, seq] : sequences) put_sequence(hash, seq);
  insert_run(run);
  tx.commit();
  return run.uid;
}

void Store::refuse_other_system(const std::string& environment, const StoredRun& run) {
  Statement st(db_,
               "SELECT x.system FROM results x JOIN runs r ON r.id = x.run_id JOIN environments e ON e.id = r.env_id"
               " WHERE e.name = ? AND r.kind = 'record' AND x.scenario = ? AND x.system != ''"
               " ORDER BY r.started_at DESC, r.repeat DESC LIMIT 1");
  for (const auto& r : run.results) {
    if (r.system.empty()) continue;
    st.reset();
    st.bind(1, environment).bind(2, r.scenario);
    if (!st.step()) continue;
    const std::string changed = differences(st.text(0), r.system);
    if (changed.empty()) continue;
    throw InputError("environment '" + environment + "' recorded " + r.scenario + " running on " + st.text(0) +
                     ", this run ran it on " + r.system + " (" + changed + "): record it under an environment of its own (--env NAME); " +
                     "nothing of this run was recorded");
  }
}

std::string Store::record_check(const Environment& env, const report::RunSummary& summary,
                                const std::map<std::string, std::pair<std::string, std::string>>& verdicts) {
  StoredRun run;
  run.uid = new_uid();
  run.environment = env.name;
  run.started_at = summary.started_at;
  run.kind = "check";
  run.lockstep_rev = env.lockstep_rev;
  run.host = hostname();
  for (const auto& r : summary.results) {
    StoredResult s = stored_result(r);
    if (auto it = verdicts.find(r.id); it != verdicts.end()) std::tie(s.verdict, s.verdict_detail) = it->second;
    run.results.push_back(std::move(s));
  }
  Transaction tx(db_);
  env_id(env.name);  // a check is of an environment that has records
  insert_run(run);
  tx.commit();
  return run.uid;
}

std::vector<StoredRun> Store::runs(const std::string& environment) {
  std::vector<StoredRun> out;
  std::map<std::int64_t, std::size_t> by_id;
  {
    Statement st(db_,
                 "SELECT r.id, r.uid, e.name, r.started_at, r.kind, r.repeat, r.lockstep_rev, r.host FROM runs r"
                 " JOIN environments e ON e.id = r.env_id WHERE ?1 = '' OR e.name = ?1"
                 " ORDER BY r.started_at, r.repeat, r.uid");
    st.bind(1, environment);
    while (st.step()) {
      by_id[st.int64(0)] = out.size();
      out.push_back(StoredRun{st.text(1), st.text(2), st.text(3), st.text(4), static_cast<int>(st.int64(5)),
                              st.text(6), st.text(7), {}});
    }
  }
  std::map<std::int64_t, std::pair<std::size_t, std::size_t>> result_at;
  {
    Statement st(db_,
                 "SELECT x.id, x.run_id, x.scenario, x.name, x.file, x.variant, x.status, x.expected, x.diagnosis,"
                 " x.digest, x.duration_s, x.world_size, s.hash, t.spans, x.verdict, x.verdict_detail, x.system, x.tolerances FROM results x"
                 " LEFT JOIN sequences s ON s.id = x.sequence_id LEFT JOIN timelines t ON t.result_id = x.id"
                 " ORDER BY x.run_id, x.scenario");
    while (st.step()) {
      auto it = by_id.find(st.int64(1));
      if (it == by_id.end()) continue;
      StoredResult r;
      r.scenario = st.text(2);
      r.name = st.text(3);
      r.file = st.text(4);
      r.variant = st.text(5);
      r.status = st.text(6);
      r.expected = st.text(7);
      r.diagnosis = st.text(8);
      r.digest = st.text(9);
      r.duration_s = st.real(10);
      r.world_size = static_cast<int>(st.int64(11));
      r.sequence = st.text(12);
      r.timeline = st.text(13);
      r.verdict = st.text(14);
      r.verdict_detail = st.text(15);
      r.system = st.text(16);
      r.tolerances = st.text(17);
      r.row = st.int64(0);
      auto& results = out[it->second].results;
      result_at[st.int64(0)] = {it->second, results.size()};
      results.push_back(std::move(r));
    }
  }
  {
    Statement st(db_, "SELECT result_id, name, value FROM metric_samples");
    while (st.step()) {
      auto it = result_at.find(st.int64(0));
      if (it == result_at.end()) continue;
      out[it->second.first].results[it->second.second].metrics[st.text(1)] = st.real(2);
    }
  }
  {
    Statement st(db_, "SELECT result_id, name, vals FROM sample_series");
    while (st.step()) {
      auto it = result_at.find(st.int64(0));
      if (it == result_at.end()) continue;
      out[it->second.first].results[it->second.second].samples[st.text(1)] =
          Json::parse(st.text(2)).get<std::vector<double>>();
    }
  }
  return out;
}

}  // namespace lockstep::baseline
