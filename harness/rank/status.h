#pragma once
// The rank contract: what every rank the launcher watches (lockstep's own, and a program's under
// the program runtime) reports when it ends, and how. A rank writes DIR/<scenario>/rank<r>.status.json
// once, atomically, and exits with one of the codes below; the launcher reads it back
// (harness/launch/watch.cpp judges how it ended; launcher.cpp collects what it reported). Its way
// in is the rank plan (plan.h). The JSON form is documented in scenarios/README.md ("The rank
// status"); this file is its one reader and writer.
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/core/diagnosis.h"
#include "harness/perf/cost.h"
#include "harness/report/results.h"

namespace lockstep::rank {

// Exit codes of a rank.
inline constexpr int kExitClean = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitInput = 2;
inline constexpr int kExitDiagnosed = 3;   // the diagnosis is in the status file
inline constexpr int kExitCommError = 4;   // usually a consequence of another rank's failure
inline constexpr int kExitNoStatus = 5;    // the status file could not be written (the report disk)

// How the rank ended, as its status says ("ok", "diagnosis", ...); kNone: not yet.
enum class Outcome { kNone, kOk, kDiagnosis, kCommError, kInputError, kError };
std::string_view to_string(Outcome o);

struct RankStatus {
  int rank = 0;
  std::string scenario;  // the scenario id (lockstep's own ranks), "" for a program
  bool program = false;  // a program's rank (the program runtime wrote it)
  std::string system;    // a program's rank: "torch <version>", what its interpreter imported
  Outcome outcome = Outcome::kNone;
  std::optional<Diagnosis> diagnosis;  // outcome kDiagnosis
  std::string message;                 // outcome kCommError, kInputError, kError
  std::int64_t step = -1;              // outcome kError of a program: its step when it failed (-1 unknown)
  // outcome kOk:
  std::map<std::string, double> metrics;
  std::string digest;
  std::map<std::string, report::Series> series;
  std::optional<std::int64_t> collectives;
  std::optional<perf::RankCost> perf;  // lockstep's own ranks: what each phase cost (harness/perf/cost.h)
  // A program's rank: the calls it made that lockstep did not verify, by name ("allreduce_coalesced"),
  // with how many; named in the scenario's notes, never silent. Any outcome.
  std::map<std::string, std::int64_t> unverified;
};

nlohmann::json to_json(const RankStatus& s);
// Throws lockstep::Error naming the key when `j` is not a rank status.
RankStatus status_from_json(const nlohmann::json& j);
// Writes `s` to `path` atomically (a reader never sees half a file). Throws lockstep::Error.
void write_status(const std::string& path, const RankStatus& s);
// The status at `path`; nullopt when the rank wrote none, or it is not a rank status.
std::optional<RankStatus> read_status(const std::string& path);

// Paths of a scenario's per-rank artifacts under the report directory.
std::string artifacts_dir(const std::string& report_dir, const std::string& slug);
std::string status_path(const std::string& dir, int rank);
std::string trace_path(const std::string& dir, int rank);
std::string log_path(const std::string& dir, int rank);

}  // namespace lockstep::rank
