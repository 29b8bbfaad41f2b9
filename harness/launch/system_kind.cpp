#include "harness/launch/system_run.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "harness/core/env.h"
#include "harness/core/error.h"
#include "harness/launch/cancel.h"
#include "harness/launch/processes.h"
#include "harness/launch/python.h"
#include "harness/launch/watch.h"
#include "harness/launch/watchdog.h"
#include "harness/rank/status.h"
#include "harness/sut/capability.h"
#include "harness/sut/io.h"
#include "reference/io/npy.h"

namespace lockstep::launch {
namespace {

namespace fs = std::filesystem;


// Starts the system's command once per rank (run `run`), watches the ranks and returns the
// diagnosis of a crash, an exit without outputs or a hang, or nullopt when every rank finished.
// Throws Cancelled when the run is cancelled.
std::optional<Diagnosis> launch_once(const scenario::Scenario& s, const std::vector<std::string>& argv, const std::string& dir,
                                     const std::string& outputs, int run, double& run_s) {
  const auto& sys = *s.system;
  const int ws = s.world_size;
  const std::string log_suffix = run ? ".run" + std::to_string(run) : "";
  const std::string inputs = dir + "/sut/inputs";
  // A free loopback port for MASTER_PORT: rank 0 of a torch.distributed system hosts the store
  // there, as under torchrun --standalone (hosting it here would tie every system to the
  // TCPStore protocol of lockstep's own LibTorch).
  const int port = loopback_port();
  RankProcesses procs;
  const auto t0 = Clock::now();
  for (int r = 0; r < ws; ++r) {
    const std::string rank_out = outputs + "/rank" + std::to_string(r);
    fs::create_directories(rank_out);
    std::vector<std::string> env = system_base_env();
    for (auto& kv : torchrun_env(r, ws, s.ranks_per_node, port)) env.push_back(std::move(kv));
    env.push_back(env::assign(env::kSutInputs, fs::absolute(inputs).string()));
    env.push_back(env::assign(env::kSutOutputs, fs::absolute(rank_out).string()));
    for (const auto& kv : sys.env) set_env(env, kv);  // [system] env overrides what lockstep set
    procs.spawn(argv, env, rank::log_path(dir, r) + log_suffix);
  }

  Watchdog dog(ws, watchdog_limits(s), t0);
  const auto source = file_source(ws, outputs, dir, log_suffix, sys.name, s.startup_timeout_s, s.deadline_s);
  const WatchEnd end = watch(procs, *source, dog);
  if (end.cancelled()) throw Cancelled();
  run_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::optional<Diagnosis> d = judge(procs.children(), *source, dog, end, s.timeout_s, dir).diagnosis;
  procs.kill_all();
  if (d && run) d->message = "run " + std::to_string(run) + ": " + d->message;
  return d;
}

// The first output that differs between two runs' rank folders, described; "" when none.
std::string first_difference(const std::string& a, const std::string& b, int rank) {
  nlohmann::json da, db;
  try {
    da = sut::read_done_json(a);
    db = sut::read_done_json(b);
  } catch (...) {
    return "";
  }
  const auto rej_a = da.value("rejected", nlohmann::json::object()), rej_b = db.value("rejected", nlohmann::json::object());
  const auto clip = [](std::string t) { return t.size() > sut::kMaxText ? t.substr(0, sut::kMaxText) + "..." : t; };
  if (rej_a != rej_b) return "rank " + std::to_string(rank) + ": the calls the system rejected differ: " + clip(rej_a.dump()) + " vs " + clip(rej_b.dump());
  const auto arr_a = da.value("arrays", nlohmann::json::object());
  for (auto it = arr_a.begin(); it != arr_a.end(); ++it) {
    const std::string file = it.value().value("file", it.key() + ".npy");
    io::NpyArray x, y;
    try {
      x = sut::read_output_npy(a, file);
      y = sut::read_output_npy(b, file);
    } catch (const std::exception& e) {
      return "rank " + std::to_string(rank) + ": output '" + it.key() + "' is missing in one run";
    }
    if (x.descr == y.descr && x.shape == y.shape && x.data == y.data) continue;
    std::ostringstream os;
    os << "rank " << rank << ": output '" << it.key() << "'";
    if (x.shape != y.shape || x.descr != y.descr) {
      os << " has shape/dtype " << nlohmann::json(x.shape).dump() << " " << x.descr << " in one run and " << nlohmann::json(y.shape).dump() << " " << y.descr
         << " in the other";
      return os.str();
    }
    const std::size_t item = io::npy_item_size(x.descr);
    std::size_t i = 0;
    while (i < x.data.size() && x.data[i] == y.data[i]) ++i;
    const std::size_t elem = i / item;
    os << " differs first at element " << elem;
    if (x.descr == "<i8") {
      const std::size_t row_len = x.shape.size() == 2 ? static_cast<std::size_t>(x.shape[1]) : 1;
      const std::size_t row = elem / row_len;
      auto row_of = [&](const io::NpyArray& arr) {
        std::vector<std::int64_t> v(row_len);
        std::memcpy(v.data(), arr.data.data() + row * row_len * 8, row_len * 8);
        return nlohmann::json(v).dump();
      };
      os << " (row " << row << ": " << row_of(x) << " vs " << row_of(y) << ")";
    }
    return os.str();
  }
  return "";
}

}  // namespace

SystemOutcome run_system(const scenario::Scenario& s, const LaunchOptions& options, const std::string& dir) {
  SystemOutcome out;
  const auto& sys = *s.system;
  const sut::Capability* cap = sut::find_capability(s.workload);
  LOCKSTEP_CHECK(cap, "no capability '", s.workload, "'");
  const std::string inputs = dir + "/sut/inputs", outputs = dir + "/sut/outputs";
  const int ws = s.world_size;
  try {
    sut::InputWriter writer(inputs, cap->name, s.id(), sys.name, ws, s.seed);
    cap->write_inputs(s, writer);
    writer.finish();
  } catch (const InputError& e) {
    out.error = e.what();
    return out;
  }
  std::vector<std::string> argv;
  try {
    argv = command_argv(s, sys.command);
  } catch (const InputError& e) {
    out.error = sys.where + ": system.command: " + e.what();
    return out;
  }

  double run_s = 0;
  try {
    out.diagnosis = launch_once(s, argv, dir, outputs, 0, run_s);
  } catch (const Cancelled&) {
    out.cancelled = true;
    return out;
  }

  // Judge the outputs of run 0, then run the system again in fresh processes while their
  // outputs keep the same digest (stopping at the first run that differs).
  if (!out.diagnosis) {
    try {
      const sut::SystemOutputs outs(outputs, ws);
      for (const auto& [k, v] : outs.metrics()) out.metrics[k] = v;
      out.notes = outs.notes();
      std::string ident;
      const auto system = outs.system();
      for (const auto& [k, v] : system) ident += (ident.empty() ? "" : ", ") + k + " " + v;
      out.system = ident;
      // A cancel that arrives while the outputs are read is honoured between reads (each read is
      // bounded: harness/sut/io.h's limits).
      if (cancelled()) throw Cancelled();
      sut::CheckResult res = cap->check(s, outs);
      if (cancelled()) throw Cancelled();
      out.digest = res.digest;
      for (int run = 1; run < sys.runs; ++run) {
        const std::string other_dir = outputs + "/run" + std::to_string(run);
        double t = 0;
        if (auto d = launch_once(s, argv, dir, other_dir, run, t)) throw DiagnosisError(*d);
        run_s += t;
        sut::CheckResult other;
        try {
          other = cap->check(s, sut::SystemOutputs(other_dir, ws));
          if (cancelled()) throw Cancelled();
        } catch (DiagnosisError& e) {
          Diagnosis d = e.diagnosis();
          d.message = "run " + std::to_string(run) + " (a fresh process): " + d.message;
          throw DiagnosisError(d);
        }
        if (other.digest == res.digest) continue;
        std::string where;
        for (int r = 0; r < ws && where.empty(); ++r) {
          where = first_difference(outputs + "/rank" + std::to_string(r), other_dir + "/rank" + std::to_string(r), r);
        }
        int blamed = -1;
        if (where.rfind("rank ", 0) == 0) blamed = std::stoi(where.substr(5));
        throw DiagnosisError(Diagnosis{DiagnosisKind::kNondeterminism,
                                       "system " + sys.name + ": run 0 and run " + std::to_string(run) +
                                           " (fresh processes, the same inputs and seed) gave different outputs (digest " + res.digest +
                                           " vs " + other.digest + ")" + (where.empty() ? "" : ": " + where),
                                       blamed, -1});
      }
      for (const auto& [k, v] : res.metrics) out.metrics[k] = v;
      out.notes.insert(out.notes.begin(), res.notes.begin(), res.notes.end());
    } catch (const Cancelled&) {
      out.cancelled = true;
      return out;
    } catch (const DiagnosisError& e) {
      out.diagnosis = e.diagnosis();
    } catch (const std::exception& e) {
      out.error = std::string("checking the outputs of system ") + sys.name + ": " + e.what();
    }
  }
  // A digest stands for outputs that passed; a diagnosed run has none (as lockstep's own ranks).
  if (out.diagnosis) out.digest.clear();
  out.metrics["system_run_s"] = run_s;
  if (options.dump) {
    const fs::path dump = fs::path(options.report_dir) / "dump" / s.slug();
    std::error_code ec;
    fs::remove_all(dump, ec);
    fs::create_directories(dump, ec);
    fs::copy(dir + "/sut", dump, fs::copy_options::recursive | fs::copy_options::copy_symlinks, ec);  // a symlink is copied as one, never followed
    if (ec) out.notes.push_back("--dump: could not copy the inputs and outputs: " + ec.message());
    if (cap->write_expected) {
      try {
        sut::InputWriter w((dump / "expected").string(), cap->name, s.id(), sys.name, ws, s.seed);
        w.schema("lockstep.sut.expected");
        cap->write_expected(s, w);
        w.finish();
      } catch (const std::exception& e) {
        out.notes.push_back(std::string("--dump: could not write the expected outputs: ") + e.what());
      }
    }
  }
  return out;
}

}  // namespace lockstep::launch
