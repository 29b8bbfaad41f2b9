#include "harness/rank/rank_main.h"

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>

#include <nlohmann/json.hpp>

#include "harness/comm/board.h"
#include "harness/comm/communicator.h"
#include "reference/common/device.h"
#include "harness/comm/engines.h"
#include "harness/comm/faults.h"
#include "harness/comm/monitor.h"
#include "harness/comm/verifier.h"
#include "harness/core/error.h"
#include "harness/core/fs.h"
#include "harness/launch/watchdog.h"
#include "harness/perf/cost.h"
#include "harness/report/dump.h"
#include "harness/validate/validate.h"
#include "harness/workloads/workload.h"

namespace lockstep::rank {
namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  LOCKSTEP_INPUT_CHECK(end && *end == '\0', "environment variable ", name, " must be an integer, got '", v, "'");
  return static_cast<int>(x);
}

std::string env_str(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

nlohmann::json diagnosis_json(const Diagnosis& d) {
  return {{"kind", to_string(d.kind)}, {"message", d.message}, {"rank", d.rank}, {"seq", d.seq}};
}

void write_status(const std::string& path, const nlohmann::json& status) {
  write_file_atomically(path, status.dump(2) + "\n");
}

}  // namespace

std::string artifacts_dir(const std::string& report_dir, const std::string& slug) {
  return (std::filesystem::path(report_dir) / slug).string();
}
std::string status_path(const std::string& dir, int rank) {
  return dir + "/rank" + std::to_string(rank) + ".status.json";
}
std::string trace_path(const std::string& dir, int rank) {
  return dir + "/rank" + std::to_string(rank) + ".trace.jsonl";
}
std::string log_path(const std::string& dir, int rank) {
  return dir + "/rank" + std::to_string(rank) + ".log";
}

int rank_main(const RankOptions& options) {
  // A crash injected on purpose must not leave core files behind.
  struct rlimit no_core {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  // A write to a peer that already exited must fail as an engine error, not kill this rank
  // with SIGPIPE (which would blame it instead of the peer); Python ranks ignore it too.
  std::signal(SIGPIPE, SIG_IGN);
  comm::install_engine_failure_handler();
  // Fixed allocator thresholds. glibc raises its mmap threshold the first time a large block is
  // freed, so whether an iteration's multi-MB tensors page-fault depends on the order of earlier
  // frees, and one run of a phase can cost 20% more CPU time than the next. A long training job
  // reaches the raised threshold within its first steps; fixing it from the start measures that
  // steady state in every run. Unless the user tunes malloc; programs and systems under test
  // are not lockstep processes and are left alone.
  if (!std::getenv("GLIBC_TUNABLES") && !std::getenv("MALLOC_MMAP_THRESHOLD_") && !std::getenv("MALLOC_TRIM_THRESHOLD_")) {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
  }

  const int rank = env_int("RANK", 0);
  const int world_size = env_int("WORLD_SIZE", 1);
  const int local_rank = env_int("LOCAL_RANK", rank);
  const std::string master = env_str("MASTER_ADDR", "127.0.0.1");
  const int port = env_int("MASTER_PORT", 29500);
  const bool store_hosted = env_str("LOCKSTEP_STORE_HOSTED", "") == "1" ||
                            env_str("TORCHELASTIC_USE_AGENT_STORE", "") == "True";

  auto scenarios = lockstep::validate::load_file(options.scenario_file);
  LOCKSTEP_INPUT_CHECK(options.variant < scenarios.size(), options.scenario_file, ": variant ",
                       options.variant, " does not exist (", scenarios.size(), " variants)");
  const scenario::Scenario& s = scenarios[options.variant];
  LOCKSTEP_INPUT_CHECK(world_size == s.world_size, options.scenario_file, ": scenario ", s.id(),
                       " needs world_size ", s.world_size, ", but WORLD_SIZE is ", world_size);
  LOCKSTEP_INPUT_CHECK(rank >= 0 && rank < world_size, "RANK must be in [0, WORLD_SIZE), got ", rank);
  LOCKSTEP_INPUT_CHECK(!s.program && !s.system, options.scenario_file, ": scenario ", s.id(),
                       " runs a program or system of its own as its ranks; start it with `lockstep run`, not `lockstep rank`");

  const std::string dir = artifacts_dir(options.report_dir, s.slug());
  std::filesystem::create_directories(dir);
  const std::string status_file = status_path(dir, rank);
  nlohmann::json status = {{"rank", rank}, {"scenario", s.id()}};

  comm::Board board;
  comm::BoardSlot* slot = nullptr;
  if (const std::string path = env_str("LOCKSTEP_BOARD", ""); !path.empty()) {
    board = comm::Board::attach(path);
    slot = &board.slot(rank);
    slot->state.store(static_cast<int>(comm::RankState::kRunning));
    comm::set_own_slot(slot);
  }
  std::vector<std::string> kinds;
  for (const auto& inj : s.injections) kinds.push_back(inj.kind);
  comm::set_injection_kinds(std::move(kinds));
  std::vector<comm::Fault> faults;
  // Opened before any thread starts, so that Gloo's and the loader's threads are counted.
  static perf::Counters counters;
  std::unique_ptr<perf::PhaseClock> clock;
  // Set once the chain exists: what a failure needs to tell a skipped collective from its own.
  comm::Communicator* communicator_ptr = nullptr;
  comm::Monitor* monitor_ptr = nullptr;
  bool board_verifies = false;  // peers publish their call records on the board
  // A rank that fails on its own after passing a collective its peers wait in skipped it.
  auto explain = [&](const std::string& failure) -> std::optional<Diagnosis> {
    if (!board_verifies || !communicator_ptr || !monitor_ptr) return std::nullopt;
    // Peers explaining their own failure wait for this rank to end or go on: it has ended.
    slot->state.store(static_cast<int>(comm::RankState::kFailed));
    return comm::skipped_collective(board, rank, monitor_ptr->collectives_issued(), communicator_ptr->site(), failure,
                                    std::min(s.timeout_s / 2, 5.0));
  };
  // Called from the main thread, or from the verifier's watcher thread: the first caller ends
  // the process, a second one blocks until it has.
  static std::mutex finishing;
  auto finish = [&](int code) {
    comm::hold_engine_failures();
    finishing.lock();
    if (slot) {
      slot->state.store(static_cast<int>(code == kExitClean ? comm::RankState::kFinished
                                                            : comm::RankState::kFailed));
    }
    try {
      write_status(status_file, status);
    } catch (const std::exception& e) {
      // A full or read-only report disk: say so, and still end (never throw out of here: the
      // handler that catches it would call finish() again and wait on `finishing` forever).
      std::cerr << "lockstep rank " << rank << ": cannot write " << status_file << ": " << e.what() << '\n';
      code = kExitNoStatus;
    }
    std::fflush(nullptr);
    // Engine threads may still be blocked in a collective that will never complete; do not
    // run their destructors.
    std::_Exit(code);
  };

  try {
    std::vector<perf::Slowdown> slowdowns;
    for (const auto& inj : s.injections) {
      if (comm::is_comm_fault(inj.kind)) faults.push_back(comm::parse_fault(inj, world_size));
      if (inj.kind == "slowdown" && env_str("LOCKSTEP_SLOWDOWN_OFF", "") != "1")
        slowdowns.push_back(perf::parse_slowdown(inj, world_size));
    }
    // `lockstep run --slowdown`: the same fault on every scenario of a run.
    if (const std::string flag = env_str("LOCKSTEP_SLOWDOWN", ""); !flag.empty())
      slowdowns.push_back(perf::parse_slowdown_flag(flag, "LOCKSTEP_SLOWDOWN"));
    clock = std::make_unique<perf::PhaseClock>(&counters, std::move(slowdowns), rank);
    comm::fire_startup_faults(faults, rank);
    comm::StoreOptions so;
    so.host = master;
    so.port = port;
    so.is_server = rank == 0 && !store_hosted;
    so.world_size = world_size;
    so.timeout_s = launch::engine_timeout_s(s);
    so.file = env_str("LOCKSTEP_STORE_FILE", "");
    so.token = env_str("LOCKSTEP_STORE_TOKEN", "");
    comm::set_activity("connecting to the store");
    auto store = comm::connect_store(so);
    const std::string gloo_host = is_loopback(master) ? "127.0.0.1" : "";
    const double engine_timeout = launch::engine_timeout_s(s);  // the launcher's watchdog fires first
    comm::set_activity("creating process groups");

    std::unique_ptr<comm::Backend> chain;
    if (s.backend == scenario::Backend::kNccl) {
      const int devices = ref::cuda_device_count();
      LOCKSTEP_CHECK(devices > 0, "backend nccl needs a CUDA device, none is visible");
      // One GPU per rank: NCCL rejects two ranks of one communicator on one device.
      LOCKSTEP_CHECK(local_rank < devices, "backend nccl: LOCAL_RANK ", local_rank, " needs CUDA device ",
                     local_rank, ", but only ", devices, " are visible (one GPU per rank)");
      chain = comm::make_nccl_backend(store, rank, world_size, local_rank, engine_timeout);
    } else {
      chain = comm::make_gloo_backend(store, "data/", rank, world_size, engine_timeout, gloo_host);
    }
    // Collectives are verified through the shared board when the launcher provides one, else
    // (ranks on several hosts) through the control group; LOCKSTEP_VERIFY_CHANNEL=control
    // forces the latter.
    const bool use_board_for_verify = board.valid() &&
                                      board.fingerprint_words() == comm::fingerprint_words(world_size) &&
                                      comm::verify_channel_from_env() == comm::VerifyChannel::kAuto;
    board_verifies = use_board_for_verify && s.verify == scenario::VerifyMode::kVerify;
    if (s.verify == scenario::VerifyMode::kVerify) {
      auto on_async_diagnosis = [&](const Diagnosis& d) {
        status["outcome"] = "diagnosis";
        status["diagnosis"] = diagnosis_json(d);
        std::cerr << "lockstep rank " << rank << ": " << to_string(d.kind) << ": " << d.message << '\n';
        finish(kExitDiagnosed);
      };
      chain = std::make_unique<comm::Verifier>(
          std::move(chain),
          comm::make_gloo_backend(store, "control/", rank, world_size, engine_timeout, gloo_host),
          use_board_for_verify ? &board : nullptr,
          on_async_diagnosis, std::min(5.0, s.timeout_s / 2));
    }
    const bool record = s.verify != scenario::VerifyMode::kOff;
    auto monitor = std::make_unique<comm::Monitor>(std::move(chain), slot,
                                                   record ? trace_path(dir, rank) : "");
    monitor_ptr = monitor.get();
    chain = std::move(monitor);
    if (!faults.empty()) chain = std::make_unique<comm::FaultInjector>(std::move(chain), std::move(faults));

    // Deliberately never destroyed: ~ProcessGroupGloo joins worker threads that may be stuck
    // in a collective that a diagnosed peer will never join. The rank ends with _Exit.
    auto& communicator = *new comm::Communicator(std::move(chain));
    communicator_ptr = &communicator;
    communicator.set_site_observer([&clock, marked = false](const std::string& phase, std::int64_t step) mutable {
      clock->mark(phase, step);
      if (!marked && clock->slowdown_fired()) {
        comm::mark_fired("slowdown");
        marked = true;
      }
    });
    comm::set_activity("building the workload");
    report::DumpWriter dump(options.dump ? (std::filesystem::path(options.report_dir) / "dump" / s.slug()).string() : "",
                            rank);
    const workloads::WorkloadSpec* spec = workloads::find(s.workload);
    auto workload = spec->make(s);
    workloads::RankContext ctx{s, rank, world_size, local_rank, communicator, dump, {}, "",
                               env_int("LOCAL_WORLD_SIZE", world_size), {}};
    workload->run(ctx);
    clock->end_workload();

    // Every rank ends with one verified barrier: a rank that issued fewer collectives than
    // the others meets them here and is named.
    communicator.set_phase("finalize");
    communicator.set_step(-1);
    communicator.barrier();

    status["outcome"] = "ok";
    status["metrics"] = ctx.metrics;
    status["digest"] = ctx.digest;
    for (const auto& [name, curve] : ctx.series) status["series"][name] = {{"values", curve.values}, {"rtol", curve.rtol}};
    status["collectives"] = monitor_ptr->collectives_issued();
    status["perf"] = perf::to_json(clock->finish(), counters);
    status["perf"]["slowdown_fired"] = clock->slowdown_fired();
    finish(kExitClean);
  } catch (const DiagnosisError& e) {
    Diagnosis d = e.diagnosis();
    // A mismatch of call records is already about the collective sequence; other failures
    // may be the consequence of a collective this rank skipped.
    const bool about_collectives = d.kind == DiagnosisKind::kCollectiveMismatch || d.kind == DiagnosisKind::kMissingParticipant;
    if (!about_collectives) {
      if (auto skipped = explain(std::string(to_string(d.kind)) + ": " + d.message)) d = *skipped;
    }
    status["outcome"] = "diagnosis";
    status["diagnosis"] = diagnosis_json(d);
    std::cerr << "lockstep rank " << rank << ": " << to_string(d.kind) << ": " << d.message << '\n';
    finish(kExitDiagnosed);
  } catch (const comm::CommError& e) {
    status["outcome"] = "comm_error";
    status["message"] = e.what();
    std::cerr << "lockstep rank " << rank << ": communication error: " << e.what() << '\n';
    finish(kExitCommError);
  } catch (const InputError& e) {
    status["outcome"] = "input_error";
    status["message"] = e.what();
    std::cerr << "lockstep rank " << rank << ": " << e.what() << '\n';
    finish(kExitInput);
  } catch (const std::exception& e) {
    if (auto skipped = explain(std::string("error: ") + e.what())) {
      status["outcome"] = "diagnosis";
      status["diagnosis"] = diagnosis_json(*skipped);
      std::cerr << "lockstep rank " << rank << ": " << to_string(skipped->kind) << ": " << skipped->message << '\n';
      finish(kExitDiagnosed);
    }
    status["outcome"] = "error";
    status["message"] = e.what();
    std::cerr << "lockstep rank " << rank << ": error: " << e.what() << '\n';
    finish(kExitError);
  }
  return kExitError;
}

}  // namespace lockstep::rank
