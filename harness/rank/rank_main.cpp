#include "harness/rank/rank_main.h"

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>

#include "harness/comm/engines.h"
#include "harness/comm/faults.h"
#include "harness/comm/verifier.h"
#include "harness/core/env.h"
#include "harness/core/error.h"
#include "harness/perf/cost.h"
#include "harness/rank/plan.h"
#include "harness/rank/runtime.h"
#include "harness/report/dump.h"
#include "harness/validate/validate.h"
#include "harness/workloads/workload.h"
#include "reference/common/device.h"

namespace lockstep::rank {

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

  const int rank = env::integer("RANK", 0);
  const int world_size = env::integer("WORLD_SIZE", 1);
  const int local_rank = env::integer("LOCAL_RANK", rank);
  const std::string master = env::str("MASTER_ADDR", "127.0.0.1");
  const int port = env::integer("MASTER_PORT", 29500);
  const bool store_hosted = env::str(env::kStoreHosted) == "1" || env::str("TORCHELASTIC_USE_AGENT_STORE") == "True";

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
  // The launcher's plan for this rank; under another launcher (torchrun), the scenario's own.
  const RankPlan plan = plan_from_env().value_or(plan_for(s, rank, dir));
  LOCKSTEP_INPUT_CHECK(plan.rank == rank && plan.world_size == world_size && plan.scenario == s.id(), "the rank plan ",
                       env::str(env::kPlan), " is for rank ", plan.rank, " of ", plan.world_size, " of scenario ", plan.scenario,
                       ", but this is rank ", rank, " of ", world_size, " of scenario ", s.id());
  RankStatus initial;
  initial.scenario = s.id();
  Runtime rt(rank, world_size, plan.status_path, std::move(initial), plan.timeout_s);
  rt.attach_board(plan.board_path);
  std::vector<std::string> kinds;
  for (const auto& inj : s.injections) kinds.push_back(inj.kind);
  comm::set_injection_kinds(std::move(kinds));
  // Opened before any thread starts, so that Gloo's and the loader's threads are counted.
  static perf::Counters counters;
  std::unique_ptr<perf::PhaseClock> clock;

  try {
    std::vector<comm::Fault> faults;
    std::vector<perf::Slowdown> slowdowns;
    for (const auto& inj : s.injections) {
      if (inj.fault) faults.push_back(*inj.fault);
      if (inj.slowdown && !plan.slowdown_off) slowdowns.push_back(*inj.slowdown);
    }
    // `lockstep run --slowdown`: the same fault on every scenario of a run.
    if (!plan.slowdown.empty()) slowdowns.push_back(perf::parse_slowdown_flag(plan.slowdown, "--slowdown"));
    clock = std::make_unique<perf::PhaseClock>(&counters, std::move(slowdowns), rank);
    comm::fire_startup_faults(faults, rank);
    comm::StoreOptions so;
    so.host = master;
    so.port = port;
    so.is_server = rank == 0 && !store_hosted;
    so.world_size = world_size;
    so.timeout_s = plan.engine_timeout_s;
    so.file = env::str(env::kStoreFile);
    so.token = env::str(env::kStoreToken);
    comm::set_activity("connecting to the store");
    auto store = comm::connect_store(so);
    const std::string gloo_host = env::is_loopback(master) ? "127.0.0.1" : "";
    const double engine_timeout = plan.engine_timeout_s;  // the launcher's watchdog fires first
    comm::set_activity("creating process groups");

    ChainSpec spec;
    if (s.backend == scenario::Backend::kNccl) {
      const int devices = ref::cuda_device_count();
      LOCKSTEP_CHECK(devices > 0, "backend nccl needs a CUDA device, none is visible");
      // One GPU per rank: NCCL rejects two ranks of one communicator on one device.
      LOCKSTEP_CHECK(local_rank < devices, "backend nccl: LOCAL_RANK ", local_rank, " needs CUDA device ",
                     local_rank, ", but only ", devices, " are visible (one GPU per rank)");
      spec.engine = comm::make_nccl_backend(store, rank, world_size, local_rank, engine_timeout);
    } else {
      spec.engine = comm::make_gloo_backend(store, "data/", rank, world_size, engine_timeout, gloo_host);
    }
    // Collectives are verified through the shared board when the launcher provides one, else
    // (ranks on several hosts) through the control group.
    spec.control = [&] { return comm::make_gloo_backend(store, "control/", rank, world_size, engine_timeout, gloo_host); };
    spec.mode = plan.mode;
    spec.trace_path = plan.trace_path;
    spec.faults = std::move(faults);
    comm::Communicator& communicator = rt.build(std::move(spec));
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
    const workloads::WorkloadSpec* wspec = workloads::find(s.workload);
    auto workload = wspec->make(s);
    workloads::RankContext ctx{s, rank, world_size, local_rank, communicator, dump, {}, "",
                               env::integer("LOCAL_WORLD_SIZE", world_size), {}};
    workload->run(ctx);
    clock->end_workload();

    // Every rank ends with one verified barrier: a rank that issued fewer collectives than
    // the others meets them here and is named.
    communicator.set_phase("finalize");
    communicator.set_step(-1);
    communicator.barrier();

    RankStatus& st = rt.status();
    st.outcome = Outcome::kOk;
    st.metrics = ctx.metrics;
    st.digest = ctx.digest;
    st.series = ctx.series;
    st.collectives = rt.collectives_issued();
    st.perf = perf::report(clock->finish(), counters, clock->slowdown_fired());
    rt.finish(kExitClean);
  } catch (const DiagnosisError& e) {
    Diagnosis d = e.diagnosis();
    // A mismatch of call records is already about the collective sequence; other failures
    // may be the consequence of a collective this rank skipped.
    const bool about_collectives = d.kind == DiagnosisKind::kCollectiveMismatch || d.kind == DiagnosisKind::kMissingParticipant;
    if (!about_collectives) {
      if (auto skipped = rt.explain(std::string(to_string(d.kind)) + ": " + d.message)) d = *skipped;
    }
    rt.diagnosed(d);
  } catch (const comm::CommError& e) {
    rt.comm_failed(e.what());
  } catch (const InputError& e) {
    rt.failed(Outcome::kInputError, e.what(), kExitInput);
  } catch (const std::exception& e) {
    rt.failed(Outcome::kError, e.what(), kExitError);
  }
  return kExitError;
}

}  // namespace lockstep::rank
