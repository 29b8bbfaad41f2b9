#pragma once
// The baseline store: one SQLite file (WAL, busy timeout, every write in a BEGIN IMMEDIATE
// transaction) holding environments, runs, per-scenario results (status, digest), golden
// collective sequences (per rank, in order, with the fingerprint fields), metric samples and
// per-rank collective timelines. The schema is versioned through PRAGMA user_version and
// migrated forward on open; a database newer than this binary is refused (InputError).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/baseline/environment.h"
#include "harness/baseline/sequence.h"
#include "harness/baseline/sqlite.h"
#include "harness/report/results.h"

namespace lockstep::baseline {

inline constexpr int kSchemaVersion = 2;
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
  std::string timeline;   // compact JSON {"t0_us":..,"ranks":[[[op,start,end],..],..]}, "" when none
};

struct StoredRun {
  std::string uid;        // unique across databases (import skips a run it already has)
  std::string environment;
  std::string started_at;
  std::string kind;       // "record"
  int repeat = 0;         // 0-based index within one `record --repeat k`
  std::string lockstep_rev;
  std::string host;
  std::vector<StoredResult> results;
};

class Store {
 public:
  // Opens `path` (creating it when `create`), enables WAL and migrates the schema. Throws
  // InputError for a file that is not a baseline database, is corrupt, or is newer than this
  // binary.
  Store(const std::string& path, bool create);

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

  // Runs of `environment` ("" for all), oldest first, with their results.
  std::vector<StoredRun> runs(const std::string& environment = "");
  // The stored sequence with this hash. Throws Error when absent.
  Sequence sequence(const std::string& hash);

  // The reviewable text export (JSON, deterministic order); only `environment` when not "".
  std::string export_text(const std::string& environment = "");
  // Merges an export: environments by name, sequences by hash, runs by uid (present ones are
  // skipped). Returns the number of runs added. Throws InputError naming `source` for bad input.
  int import_text(const std::string& text, const std::string& source);

  Db& db() { return db_; }

 private:
  void migrate();
  std::int64_t env_id(const std::string& name);
  std::int64_t put_sequence(const std::string& hash, const Sequence& sequence);
  void insert_run(const StoredRun& run);
  Db db_;
};

}  // namespace lockstep::baseline
