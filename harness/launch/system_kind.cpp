// A system under test's ranks (rank_kind.h); the contract is scenarios/README.md, "Systems under test".
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "harness/core/env.h"
#include "harness/core/error.h"
#include "harness/launch/cancel.h"
#include "harness/launch/processes.h"
#include "harness/launch/python.h"
#include "harness/launch/rank_kind.h"
#include "harness/launch/watch.h"
#include "harness/launch/watchdog.h"
#include "harness/rank/status.h"
#include "harness/sut/capability.h"
#include "harness/sut/io.h"
#include "reference/io/npy.h"

namespace lockstep::launch {
namespace {

namespace fs = std::filesystem;


// The first output that differs between two runs' rank folders, described; "" when none.
std::string first_difference(const std::string& a, const std::string& b, int rank) {
  sut::DoneRecord da, db;
  try {
    da = sut::read_done(a, rank);
    db = sut::read_done(b, rank);
  } catch (...) {
    return "";
  }
  const auto clip = [](std::string t) { return t.size() > sut::kMaxText ? t.substr(0, sut::kMaxText) + "..." : t; };
  if (da.rejected != db.rejected) {
    return "rank " + std::to_string(rank) + ": the calls the system rejected differ: " + clip(nlohmann::json(da.rejected).dump()) +
           " vs " + clip(nlohmann::json(db.rejected).dump());
  }
  for (const auto& [name, file] : da.arrays) {
    io::NpyArray x, y;
    try {
      x = sut::read_output_npy(a, file);
      y = sut::read_output_npy(b, file);
    } catch (const std::exception& e) {
      return "rank " + std::to_string(rank) + ": output '" + name + "' is missing in one run";
    }
    if (x.descr == y.descr && x.shape == y.shape && x.data == y.data) continue;
    std::ostringstream os;
    os << "rank " << rank << ": output '" << name << "'";
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

// A system under test's ranks ([system]): its command once per rank, watched through the files it
// writes (progress.json, done.json); its outputs judged by the capability's checks, then, with
// runs > 1, the system run again in fresh processes while the outputs keep run 0's digest.
class SystemRanks final : public RankKind {
 public:
  SystemRanks(const scenario::Scenario& s, const LaunchOptions& options)
      : s_(s), options_(options), cap_(sut::find_capability(s.workload)) {
    LOCKSTEP_CHECK(cap_, "no capability '", s.workload, "'");
  }
  std::string skip_reason() const override { return system_skip_reason(s_); }
  int rank_count() const override { return s_.world_size; }

  void prepare(const std::string& dir) override {
    dir_ = dir;
    outputs_ = dir + "/sut/outputs";
    sut::InputWriter writer(dir + "/sut/inputs", cap_->name, s_.id(), s_.system->name, s_.world_size, s_.seed);
    cap_->write_inputs(s_, writer);
    writer.finish();
    try {
      argv_ = command_argv(s_, s_.system->command);
    } catch (const InputError& e) {
      throw InputError(s_.system->where + ": system.command: " + e.what());
    }
  }

  RankStart start(int r) override {
    // A free loopback port for MASTER_PORT, one per run: rank 0 of a torch.distributed system
    // hosts the store there, as under torchrun --standalone (hosting it here would tie every
    // system to the TCPStore protocol of lockstep's own LibTorch).
    if (r == 0) port_ = loopback_port();
    const std::string rank_out = run_outputs() + "/rank" + std::to_string(r);
    fs::create_directories(rank_out);
    RankStart rs;
    rs.argv = argv_;
    rs.env = system_base_env();
    for (auto& kv : torchrun_env(r, s_.world_size, s_.ranks_per_node, port_)) rs.env.push_back(std::move(kv));
    rs.env.push_back(env::assign(env::kSutInputs, fs::absolute(dir_ + "/sut/inputs").string()));
    rs.env.push_back(env::assign(env::kSutOutputs, fs::absolute(rank_out).string()));
    for (const auto& kv : s_.system->env) set_env(rs.env, kv);  // [system] env overrides what lockstep set
    rs.log = rank::log_path(dir_, r) + log_suffix();
    return rs;
  }

  std::unique_ptr<ProgressSource> progress() override {
    return file_source(s_.world_size, run_outputs(), dir_, log_suffix(), s_.system->name, s_.startup_timeout_s, s_.deadline_s);
  }

  void collect(RanksEnd end, report::ScenarioResult& res) override {
    res.system = s_.system->name;
    std::optional<Diagnosis> d = end.judgement.diagnosis;
    double run_s = end.wall_s;
    if (!d) {
      try {
        d = check_runs(res, run_s);
      } catch (const Cancelled&) {
        res.cancelled = cancelled_reason();
        return;
      } catch (const std::exception& e) {
        res.error = std::string("checking the outputs of system ") + s_.system->name + ": " + e.what();
      }
    }
    // A digest stands for outputs that passed; a diagnosed run has none (as lockstep's own ranks).
    if (d) res.digest.clear();
    res.diagnosis = d;
    res.metrics["system_run_s"] = run_s;
    if (options_.dump) dump(res);
  }

 private:
  std::string run_outputs() const { return run_ ? outputs_ + "/run" + std::to_string(run_) : outputs_; }
  std::string log_suffix() const { return run_ ? ".run" + std::to_string(run_) : ""; }

  // Judges run 0's outputs, then runs the system again while the outputs keep its digest
  // (stopping at the first run that differs). The diagnosis, or nullopt when every run passed.
  std::optional<Diagnosis> check_runs(report::ScenarioResult& res, double& run_s) {
    const int ws = s_.world_size;
    try {
      const sut::SystemOutputs outs(outputs_, ws);
      for (const auto& [k, v] : outs.metrics()) res.metrics[k] = v;
      res.notes = outs.notes();
      std::string ident;
      for (const auto& [k, v] : outs.system()) ident += (ident.empty() ? "" : ", ") + k + " " + v;
      if (!ident.empty()) res.system += " (" + ident + ")";
      // A cancel that arrives while the outputs are read is honoured between reads (each read is
      // bounded: harness/sut/io.h's limits).
      if (cancelled()) throw Cancelled();
      sut::CheckResult first = cap_->check(s_, outs);
      if (cancelled()) throw Cancelled();
      res.digest = first.digest;
      for (run_ = 1; run_ < s_.system->runs; ++run_) {
        const RanksEnd end = run_ranks(*this, s_, dir_);
        run_s += end.wall_s;
        if (auto d = end.judgement.diagnosis) {
          d->message = "run " + std::to_string(run_) + ": " + d->message;
          return d;
        }
        sut::CheckResult other;
        try {
          other = cap_->check(s_, sut::SystemOutputs(run_outputs(), ws));
          if (cancelled()) throw Cancelled();
        } catch (DiagnosisError& e) {
          Diagnosis d = e.diagnosis();
          d.message = "run " + std::to_string(run_) + " (a fresh process): " + d.message;
          return d;
        }
        if (other.digest == first.digest) continue;
        std::string where;
        for (int r = 0; r < ws && where.empty(); ++r) {
          where = first_difference(outputs_ + "/rank" + std::to_string(r), run_outputs() + "/rank" + std::to_string(r), r);
        }
        int blamed = -1;
        if (where.rfind("rank ", 0) == 0) blamed = std::stoi(where.substr(5));
        return Diagnosis{DiagnosisKind::kNondeterminism,
                         "system " + s_.system->name + ": run 0 and run " + std::to_string(run_) +
                             " (fresh processes, the same inputs and seed) gave different outputs (digest " + first.digest +
                             " vs " + other.digest + ")" + (where.empty() ? "" : ": " + where),
                         blamed, -1};
      }
      for (const auto& [k, v] : first.metrics) res.metrics[k] = v;
      res.notes.insert(res.notes.begin(), first.notes.begin(), first.notes.end());
      return std::nullopt;
    } catch (const DiagnosisError& e) {
      return e.diagnosis();
    }
  }

  // --dump: the system's inputs and outputs, and what lockstep expected of them.
  void dump(report::ScenarioResult& res) const {
    const fs::path dump = fs::path(options_.report_dir) / "dump" / s_.slug();
    std::error_code ec;
    fs::remove_all(dump, ec);
    fs::create_directories(dump, ec);
    fs::copy(dir_ + "/sut", dump, fs::copy_options::recursive | fs::copy_options::copy_symlinks, ec);  // a symlink is copied as one, never followed
    if (ec) res.notes.push_back("--dump: could not copy the inputs and outputs: " + ec.message());
    if (!cap_->write_expected) return;
    try {
      sut::InputWriter w((dump / "expected").string(), cap_->name, s_.id(), s_.system->name, s_.world_size, s_.seed);
      w.schema("lockstep.sut.expected");
      cap_->write_expected(s_, w);
      w.finish();
    } catch (const std::exception& e) {
      res.notes.push_back(std::string("--dump: could not write the expected outputs: ") + e.what());
    }
  }

  const scenario::Scenario& s_;
  const LaunchOptions& options_;
  const sut::Capability* cap_;
  std::string dir_, outputs_;
  std::vector<std::string> argv_;
  int run_ = 0;
  int port_ = 0;
};

}  // namespace

std::unique_ptr<RankKind> system_ranks(const scenario::Scenario& s, const LaunchOptions& options) {
  return std::make_unique<SystemRanks>(s, options);
}

}  // namespace lockstep::launch
