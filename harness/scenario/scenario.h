#pragma once
// A scenario: one TOML file, expanded by its [matrix] into one or more variants. Loading
// checks the scenario schema (keys, types, values of every table but the workload's own keys
// and the injected faults) and throws InputError with file:line; the workload's keys and the
// faults are checked by the step after it, harness/validate/validate.h.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/comm/faults.h"
#include "harness/core/diagnosis.h"
#include "harness/core/tolerances.h"
#include "harness/core/verify_mode.h"
#include "harness/perf/cost.h"
#include "harness/scenario/config.h"

namespace lockstep::scenario {

enum class Backend { kGloo, kNccl };
using lockstep::VerifyMode;  // harness/core/verify_mode.h
enum class Device { kCpu, kCuda };

std::string_view to_string(Backend backend);
using lockstep::to_string;
std::string_view to_string(Device device);

// One `[[inject]]` entry. `kind` says what to inject; the rest of its keys are read by
// whoever handles that kind (the fault-injecting communicator or the workload).
struct Injection {
  std::string kind;
  Config config;       // the whole [[inject]] table, `kind` included
  std::size_t index = 0;  // its position among the file's [[inject]] tables (at most 64)
  // Parsed once, by validation (validate.h, with injections.h): the communicator fault of a
  // comm fault kind, the slowdown of kind slowdown; workload-level kinds are the workload's.
  std::optional<comm::Fault> fault;
  std::optional<perf::Slowdown> slowdown;
  // "#2 (count_mismatch, scenario.toml:14)", for messages.
  std::string label() const;
};

struct Expectation {
  std::optional<DiagnosisKind> kind;  // nullopt: the scenario must pass
  std::optional<int> rank;            // when set, the diagnosis must blame this rank
  std::optional<std::int64_t> seq;    // when set, the diagnosis must name this sequence number
  std::optional<std::int64_t> step;   // when set, the diagnosis must name this step (Diagnosis::step)
  std::vector<std::string> message_contains;  // substrings the message must contain

  std::string expected_label() const;  // "pass" or the kind's name
};

// [system]: a system under test does the scenario's work in place of lockstep's own ranks
// (scenarios/README.md, "Systems under test").
struct SystemSpec {
  std::string name;                         // the system's label, e.g. "dgl"
  std::vector<std::string> command;         // one rank's argv; {python} and {dir} are substituted
  std::vector<std::string> python_modules;  // the interpreter must import these, else skip
  std::vector<std::string> env;             // extra KEY=VALUE for the ranks
  int runs = 1;                             // fresh-process runs that must give the same outputs
  Config profile;                           // [system.profile]: declared semantics, read by the capability
  std::string where;                        // file:line of [system]
};

// [workload] kind = "program": the user's own program runs as the ranks, unchanged, and
// lockstep wraps its default process group and verifies its collectives (scenarios/README.md, "Programs").
struct ProgramSpec {
  std::vector<std::string> command;         // one rank's argv; {python} and {dir} are substituted
  std::vector<std::string> python_modules;  // the interpreter must import these, else skip
  std::vector<std::string> env;             // extra KEY=VALUE for the ranks
  // The backend that lockstep's replaces in init_process_group: "gloo", or "none" (the program
  // runs on its own backend, unobserved: for overhead baselines only).
  std::string wrap = "gloo";
  std::string where;                        // file:line of [workload]
};

struct Scenario {
  // Identity.
  std::string name;         // from `name`, e.g. "comm.dtype_mismatch"
  std::string file;         // path as given on the command line
  std::string variant;      // "" or e.g. "world_size=2" for matrix variants
  std::string description;
  std::vector<std::string> tags;

  // Requirements: unmet ones make the scenario `skip`, with the reason.
  bool requires_cuda = false;
  int requires_ranks = 1;   // the launcher must be able to start this many ranks
  // Distinct CUDA devices the run needs on this host: 0 without CUDA, 1 for a CUDA scenario,
  // run.world_size with backend nccl (NCCL cannot put two ranks of one communicator on one
  // GPU, and every rank is a process of this host).
  int requires_cuda_devices = 0;

  // [run]
  int world_size = 1;
  Backend backend = Backend::kGloo;
  Device device = Device::kCpu;
  VerifyMode verify = VerifyMode::kVerify;
  double timeout_s = 60.0;          // no progress for this long, once every rank has started
  double startup_timeout_s = 120.0;  // from spawn to a rank's first collective
  double deadline_s = 3600.0;        // the whole run, whatever progress it makes (default:
                                     // max(3600, startup_timeout_s + 2 * timeout_s))
  std::uint64_t seed = 0;
  int ranks_per_node = 1;   // the launcher's node layout: LOCAL_RANK = rank % ranks_per_node
                            // (default world_size: one node; capped at world_size)

  // [workload]: `kind` plus the workload's own keys, validated by the workload (validate::check).
  std::string workload;
  Config workload_config;

  std::vector<Injection> injections;
  Expectation expect;
  // [expect.torch."<version prefix>"]: a program's expectation under a torch whose version starts
  // with the prefix (the interpreter's torch, e.g. "1.13"), in file order; the first match wins,
  // else `expect` applies. What the program's own engine can do differs between torch versions
  // (torch 1.13's Gloo has no bf16).
  std::vector<std::pair<std::string, Expectation>> expect_torch;
  // [expect] straggler_share: the straggler rule's wait share for this scenario (harness/rules/
  // waits.h); set, a straggler is the diagnosis `straggler` (unset: a note).
  std::optional<double> straggler_share;
  // The expectation for a run whose program imported torch `torch_version` ("" unknown).
  const Expectation& expectation_for(const std::string& torch_version) const;
  std::optional<SystemSpec> system;  // set when [system] names a system under test
  std::optional<ProgramSpec> program;  // set when [workload] kind = "program"

  // [compare]: how far a comparison across environments may move the results, and the curve a
  // program logs: `curve` an ECMAScript regex over rank 0's log whose groups are (step, value) or
  // (value), named `curve_name` ("" none).
  Tolerances tolerances;
  std::string curve, curve_name;

  // Variants of one file must give identical result digests when true ([matrix] invariant).
  bool matrix_invariant = true;
  std::size_t variant_index = 0;  // position of this variant within its file

  // "name" or "name[variant]": unique within a suite, used in reports.
  std::string id() const;
  // A filesystem-safe form of id(), used for per-scenario report folders.
  std::string slug() const;
};

// Why `regex` cannot be a [compare] curve ("" it can): not an ECMAScript regular expression, or
// not 1 group (the value) or 2 (the step, the value).
std::string curve_problem(const std::string& regex);

// Called with each variant as soon as it is parsed, before the next one (validate::check).
using VariantCheck = std::function<void(Scenario&)>;

// Parses one file and expands its matrix, passing each variant to `check` when set. Throws
// InputError with file:line on any problem of the scenario schema (and whatever `check` throws).
std::vector<Scenario> load_file(const std::string& path, const VariantCheck& check = {});
// Expands each path (a file, or a directory searched recursively for *.toml, sorted), and
// loads every file. Throws InputError on the first bad file or a missing path.
std::vector<Scenario> load_paths(const std::vector<std::string>& paths, const VariantCheck& check = {});
// Returns the *.toml files under `paths`, sorted, without parsing them.
std::vector<std::string> expand_paths(const std::vector<std::string>& paths);

}  // namespace lockstep::scenario
