#pragma once
// The baseline store: one SQLite file (WAL, busy timeout, every write in a BEGIN IMMEDIATE
// transaction) holding environments, runs, per-scenario results (status, digest), golden
// collective sequences (per rank, in order, with the fingerprint fields), metric samples and
// per-rank collective timelines. The schema is versioned through PRAGMA user_version and
// migrated forward on open; a database newer than this binary is refused (InputError).
// Opening checks the file before anything writes to it: a file that is empty, not SQLite,
// another application's SQLite database, damaged (PRAGMA quick_check), newer, or read-only
// when the command writes is refused with InputError and left as it was.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/baseline/environment.h"
#include "harness/baseline/numerics.h"
#include "harness/baseline/sequence.h"
#include "harness/baseline/sqlite.h"
#include "harness/report/results.h"

namespace lockstep::baseline {

inline constexpr int kSchemaVersion = 6;
// PRAGMA application_id of files this lockstep creates or migrates ("LkSt"). Files made by
// earlier versions have 0 and are recognised by their tables.
inline constexpr std::int32_t kApplicationId = 0x4c6b5374;
// Calls per rank kept in a stored timeline (the sequence itself is always complete).
inline constexpr int kTimelineCallsPerRank = 256;

struct StoredResult {
  std::string scenario;  // id: name[variant]
  std::string name, file, variant;
  std::string status;     // pass, fail, skip, error
  std::string expected;   // "pass" or a diagnosis kind
  std::string diagnosis;  // kind observed, "" when clean
  std::string digest;
  double duration_s = 0;
  int world_size = 1;
  std::string sequence;   // sequence hash, "" when none was recorded
  std::map<std::string, double> metrics;
  // Per-iteration samples ("<phase>/rank<r>/cpu_s", ...), in iteration order.
  std::map<std::string, std::vector<double>> samples;
  // Runs of kind "check": what the baseline check declared ("ok", "result_mismatch",
  // "sequence_changed", "throughput_regression", "not checked") and why; "" for records.
  std::string verdict, verdict_detail;
  // Compact JSON {"t0_us":..,"ranks":[[[op,start,end,seq,step,phase,lined_up],..],..]} (an
  // older lockstep's runs: [op,start,end], not lined up), the first kTimelineCallsPerRank calls
  // of each rank in trace order; "" when none. lined_up is 1 for a default-group collective with
  // clocks, which the baseline report lines up as the waits check does (waits per call), else 0.
  std::string timeline;
  // What ran, as the ranks reported it: a program's "torch 2.15.0" (its interpreter's torch), a
  // system's "numpy (numpy 1.26.4)"; "" for lockstep's own workloads (their stack is the
  // environment's LibTorch).
  std::string system;
  // The scenario's [compare] tolerances (report::tolerances_text; "" undeclared), and its numbers
  // beyond the digest (a program's final parameters, its logged curve) for comparisons. `numerics`
  // is filled when recording and importing; runs() leaves it empty and sets `row`, from which
  // Store::numerics reads it.
  std::string tolerances;
  Numerics numerics;
  std::int64_t row = 0;  // the results row (0: not read from a database)
};

struct StoredRun {
  std::string uid;        // unique across databases (import skips a run it already has)
  std::string environment;
  std::string started_at;
  std::string kind;       // "record" (a baseline sample) or "check" (run --baseline: not a sample)
  int repeat = 0;         // 0-based index within one `record --repeat k`
  std::string lockstep_rev;
  std::string host;
  std::vector<StoredResult> results;
};

// What the command opening a store will do with it.
enum class Access {
  kRead,    // only reads (an older schema is still migrated, which writes)
  kWrite,   // writes: the file and its directory must be writable
  kCreate,  // as kWrite, creating the file (complete, in WAL mode) when the path does not exist
};

// The second format, JSON (store_json.cpp): Store::export_text writes it, parse_export and
// Store::import_exports read it back into a store.

// A parsed text export (Store::export_text), ready to import.
struct Export {
  std::string source;  // where it came from, for messages
  std::vector<Environment> environments;
  std::vector<std::pair<std::string, Sequence>> sequences;  // by hash
  std::vector<StoredRun> runs;
};

// Parses an export without touching any database. Throws InputError naming `source` for
// malformed or unsupported input.
Export parse_export(const std::string& text, const std::string& source);

// A clean result's numbers beyond its digest: its series as curves (value i at step i when the
// series has no steps) and the tensors its ranks wrote in `artifacts_dir` (numerics-rank<r>.bin).
Numerics numerics_of(const report::ScenarioResult& r, const std::string& artifacts_dir);

class Store {
 public:
  // Opens `path` for `access` after checking it (see the top of this file); a writing open
  // enables WAL, and any open migrates an older schema. Throws InputError naming `path` for a
  // missing (unless kCreate), empty, foreign, damaged, newer or (for writing) read-only file,
  // which is then left byte for byte as it was, without -wal or -shm files of ours.
  Store(const std::string& path, Access access);

  int schema_version();
  // PRAGMA integrity_check plus foreign_key_check; empty when the database is sound.
  std::vector<std::string> integrity_problems();

  // Adds `env` unless an environment of that name exists. Throws InputError when it exists
  // with a different engine stack or machine (the lockstep revision may differ).
  void put_environment(const Environment& env);
  std::vector<Environment> environments();
  std::optional<Environment> environment(const std::string& name);

  // Records one suite run: results, digests, metrics, and for clean results the sequence and
  // timeline read from the traces under `report_dir`. Returns the run's uid.
  std::string record(const Environment& env, const report::RunSummary& run, const std::string& report_dir,
                     int repeat);
  // Records a `run --baseline` check of `environment` as a run of kind "check", with each
  // scenario's verdict (scenario id -> {verdict, detail}). Returns the run's uid.
  std::string record_check(const Environment& env, const report::RunSummary& run,
                           const std::map<std::string, std::pair<std::string, std::string>>& verdicts);

  // Runs of `environment` ("" for all), oldest first, with their results.
  std::vector<StoredRun> runs(const std::string& environment = "");
  // The numerics of the results row `row` (StoredResult::row; empty when it has none), and the
  // JSON the text export keeps them in and its reader (store_numerics.cpp).
  Numerics numerics(std::int64_t row, bool with_tensors = true);
  static nlohmann::ordered_json numerics_json(const Numerics& n);
  static Numerics numerics_from_json(const nlohmann::ordered_json& j);
  // The stored sequence with this hash. Throws Error when absent.
  Sequence sequence(const std::string& hash);

  // The JSON export and import (store_json.cpp).
  // The reviewable text export (JSON, deterministic order); only `environment` when not "".
  std::string export_text(const std::string& environment = "");
  // Merges exports in one transaction, all or nothing: environments by name, sequences by
  // hash, runs by uid (present ones are skipped). Returns the number of runs added per export.
  // Throws InputError naming the export's source when one conflicts with the database.
  std::vector<int> import_exports(const std::vector<Export>& exports);
  // parse_export then import_exports of that one export.
  int import_text(const std::string& text, const std::string& source);

  Db& db() { return db_; }

 private:
  void migrate();
  void add_environment(const Environment& env);  // put_environment inside the caller's transaction
  // Throws InputError when a result of `run` ran on another system (a program's torch, a system's
  // packages) than the last record of its scenario under `environment`.
  void refuse_other_system(const std::string& environment, const StoredRun& run);
  std::int64_t env_id(const std::string& name);
  std::int64_t put_sequence(const std::string& hash, const Sequence& sequence);
  void insert_run(const StoredRun& run);
  void put_numerics(std::int64_t result_id, const Numerics& n);
  Db db_;
};

}  // namespace lockstep::baseline
