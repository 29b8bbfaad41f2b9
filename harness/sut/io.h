#pragma once
// The files of the system-under-test contract (scenarios/README.md, "Systems under test"):
// inputs lockstep writes before the ranks start, outputs each rank writes, read back for the
// checks. Arrays are NumPy .npy files; manifests are JSON.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference/io/npy.h"

namespace lockstep::sut {

// Version of the inputs manifest and of done.json. Bump it with any incompatible change.
inline constexpr int kSutSchemaVersion = 1;

// Writes DIR/<name>.npy arrays and, on finish(), DIR/manifest.json:
//   {schema, schema_version, capability, scenario, system, world_size, seed, config, arrays:
//    {name: {file, dtype, shape, meaning}}}
class InputWriter {
 public:
  InputWriter(std::string dir, std::string capability, std::string scenario_id, std::string system, int world_size,
              std::uint64_t seed);
  int world_size() const { return world_size_; }
  // Names the manifest's schema ("lockstep.sut.inputs" unless changed).
  void schema(const std::string& name) { manifest_["schema"] = name; }
  // A scalar, list or table the adapter reads from manifest["config"][key].
  void config(const std::string& key, nlohmann::json value) { config_[key] = std::move(value); }
  // Writes a C-order array of `shape` (prod(shape) == values.size()).
  void array(const std::string& name, const std::vector<std::int64_t>& values, std::vector<std::int64_t> shape,
             const std::string& meaning);
  void array(const std::string& name, const std::vector<std::int32_t>& values, std::vector<std::int64_t> shape,
             const std::string& meaning);
  void array(const std::string& name, const std::vector<float>& values, std::vector<std::int64_t> shape,
             const std::string& meaning);
  void array(const std::string& name, const std::vector<double>& values, std::vector<std::int64_t> shape,
             const std::string& meaning);
  // shares.<name>: offsets [k, world_size + 1] (k splits, one per batch or step) or
  // [world_size + 1] (k == 0) giving each rank's rows of `name`.
  void shares(const std::string& name, const std::vector<std::int64_t>& offsets, std::int64_t splits);
  // Writes manifest.json. Throws lockstep::Error when it cannot.
  void finish();

 private:
  void raw(const std::string& name, const std::string& descr, std::vector<std::int64_t> shape, const void* data,
           std::size_t bytes, const std::string& meaning);
  std::string dir_;
  int world_size_;
  nlohmann::json manifest_;
  nlohmann::json config_ = nlohmann::json::object();
};

// Limits on what a system writes (its outputs are untrusted input; scenarios/README.md,
// "Systems under test", documents them). Anything beyond them is invariant_violation naming
// the rank and the file, found before the launcher allocates for it.
inline constexpr std::size_t kMaxJsonBytes = 16u << 20;       // done.json
inline constexpr int kMaxJsonDepth = 64;                      // nested arrays and objects
inline constexpr std::size_t kMaxJsonValues = 1u << 20;       // values (bounds the parsed form)
inline constexpr std::size_t kMaxProgressBytes = 64u << 10;   // progress.json
inline constexpr std::size_t kMaxArrayBytes = 256u << 20;     // one .npy output's data
inline constexpr std::size_t kMaxArrayElements = 32u << 20;   // and its elements (widened to 8 bytes)
inline constexpr std::size_t kMaxNotes = 1000;                // notes kept (merged over the ranks)
inline constexpr std::size_t kMaxEntries = 1000;              // metrics and system entries kept
inline constexpr std::size_t kMaxText = 2000;                 // characters kept of a note or message

// Parses JSON text a system wrote. Throws std::runtime_error when it is not JSON or nests
// deeper than kMaxJsonDepth or holds more than kMaxJsonValues values.
nlohmann::json parse_untrusted_json(const std::string& text);

// One rank's done.json (scenarios/README.md, "Systems under test"), read once into this form:
// every value has the type it is used as, texts cut at kMaxText, at most kMaxEntries metrics and
// system entries.
struct DoneRecord {
  int rank = 0;
  std::map<std::string, std::string> arrays;    // output name -> its file in the rank's folder
  std::map<std::string, std::string> rejected;  // output name -> the exception the system raised
  std::vector<std::string> notes;
  std::map<std::string, double> metrics;        // the numeric ones
  std::map<std::string, std::string> system;    // package -> version
};
// Reads DIR/done.json (regular, at most kMaxJsonBytes, bounded parse) of rank `rank`. Throws
// DiagnosisError (invariant_violation blaming `rank`, "rank R: output 'done.json': ...") when it
// breaks the contract: unreadable, another schema_version, a missing or mistyped key, or the
// done.json of another rank (its "rank").
DoneRecord read_done(const std::string& dir, int rank);

// Reads DIR/FILE, a .npy output (regular, at most kMaxArrayBytes of data, its size matching
// its header's shape, checked before the data is read). Throws std::runtime_error.
io::NpyArray read_output_npy(const std::string& dir, const std::string& file);

// One rank's done.json and arrays, read back.
struct RankOutputs {
  int rank = 0;
  DoneRecord done;
  std::string dir;
};

// The element type the contract declares for an output (scenarios/README.md, "Capabilities"):
// one NumPy dtype, or, where the contract leaves it open, any integer or any float type.
// Every reader of an output states it, so every declared dtype is checked.
enum class Declared { kFloat32, kInt64, kAnyInteger, kAnyFloat };

// "float32 ('<f4')" for a NumPy dtype string; the string itself when it is not a known one.
std::string dtype_name(const std::string& descr);

// Every rank's outputs. Accessors throw DiagnosisError (invariant_violation, blaming the
// rank) when an output breaks the contract: missing, not an array the helper wrote, an
// element type other than the declared one, or a wrong shape.
class SystemOutputs {
 public:
  // Reads DIR/rank<r>/done.json for every rank (the launcher has checked they exist), and
  // checks that a rank's progress.json, if any, is a regular file.
  SystemOutputs(std::string dir, int world_size);
  int world_size() const { return static_cast<int>(ranks_.size()); }
  bool has(int rank, const std::string& name) const;
  // The system's error message when it rejected the call behind output `name`.
  std::optional<std::string> rejected(int rank, const std::string& name) const;
  // Output `name` of `rank`, whose element type must be `declared`: else invariant_violation
  // naming the rank, the file and both dtypes.
  io::NpyArray array(int rank, const std::string& name, Declared declared) const;
  // An integer array (kInt64 or kAnyInteger; bool counts as an integer) as int64, with its NumPy
  // dtype in *descr when given.
  std::vector<std::int64_t> int64s(int rank, const std::string& name, Declared declared,
                                   std::vector<std::int64_t>* shape = nullptr, std::string* descr = nullptr) const;
  // A float array (kFloat32, or kAnyFloat: float32, or float64 rounded to float32).
  std::vector<float> floats(int rank, const std::string& name, Declared declared,
                            std::vector<std::int64_t>* shape = nullptr) const;
  // Notes, metrics and system identity the ranks reported, merged (rank 0 first); at most
  // kMaxNotes notes (then one saying how many more) and kMaxEntries of the others.
  std::vector<std::string> notes() const;
  std::map<std::string, double> metrics() const;  // rank 0's
  std::map<std::string, std::string> system() const;
  const RankOutputs& rank(int r) const { return ranks_.at(static_cast<std::size_t>(r)); }

 private:
  std::vector<RankOutputs> ranks_;
};

// Fails with invariant_violation blaming `rank`: "rank R: output 'name': what".
[[noreturn]] void contract_violation(int rank, const std::string& name, const std::string& what);

}  // namespace lockstep::sut
