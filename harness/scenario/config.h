#pragma once
// A read-only view of one TOML table of a scenario file that remembers where each value came
// from. Every getter throws InputError with "file:line: key: ..." on a wrong type or bad value;
// finish() throws on keys that no getter asked for (unknown keys), so typos never pass silently.
// toml++ stays out of this header.
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::scenario {

class Config {
 public:
  Config();  // an empty table with no source
  ~Config();
  Config(const Config&);
  Config& operator=(const Config&);
  Config(Config&&) noexcept;
  Config& operator=(Config&&) noexcept;

  bool has(const std::string& key) const;

  // Required getters: throw InputError naming the table's file:line when the key is missing.
  std::int64_t get_int(const std::string& key) const;
  double get_double(const std::string& key) const;  // accepts integers too
  std::string get_string(const std::string& key) const;
  bool get_bool(const std::string& key) const;

  // Optional getters: return `fallback` when the key is absent.
  std::int64_t get_int(const std::string& key, std::int64_t fallback) const;
  double get_double(const std::string& key, double fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
  std::vector<std::int64_t> get_int_list(const std::string& key,
                                         const std::vector<std::int64_t>& fallback) const;
  std::vector<std::string> get_string_list(const std::string& key,
                                           const std::vector<std::string>& fallback) const;
  // A sub-table; an absent key yields an empty Config located at this table.
  Config get_table(const std::string& key) const;

  // Returns "file:line" of `key` if present, else of this table.
  std::string where(const std::string& key = "") const;
  // Throws InputError("file:line: <key>: message") pointing at `key`.
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;
  // Throws InputError for the first key that no getter read, naming its file:line and the
  // keys that are allowed here.
  void finish() const;

  struct Impl;
  explicit Config(std::shared_ptr<Impl> impl);

 private:
  friend struct ConfigAccess;  // config_internal.h reaches impl_ through it
  std::shared_ptr<Impl> impl_;
};

// The candidate closest to `word` by edit distance when it is close (at most 2 edits, and fewer
// than the candidate's length), for "did you mean"; "" when none is.
std::string closest(const std::string& word, const std::vector<std::string>& candidates);

// Range-checked readers for the keys of a table (workloads, systems under test, faults), so
// that one key has one rule wherever it is read. Each returns `fallback` when `key` is absent
// and throws InputError "file:line: <key>: must be in [lo, hi], got v" (or "must be >= lo")
// when the value is outside the range; `fallback` itself is not checked.
constexpr std::int64_t kNoUpperBound = std::numeric_limits<std::int64_t>::max();
std::int64_t read_int(const Config& c, const std::string& key, std::int64_t fallback, std::int64_t lo,
                      std::int64_t hi = kNoUpperBound);

// An interval of doubles for read_double; an infinite end is unbounded.
struct Interval {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false;  // lo itself is outside
  bool hi_open = false;  // hi itself is outside
  bool contains(double v) const;
  std::string describe() const;  // "[0, 1)", "(0, 10]", ">= 0"
};
// Throws InputError "file:line: <key>: must be in (0, 10], got 0" outside `range`.
double read_double(const Config& c, const std::string& key, double fallback, const Interval& range);
double read_double(const Config& c, const std::string& key, double fallback, double lo, double hi);  // [lo, hi]

// Returns the string under `key` (or `fallback`), which must be one of `allowed`; throws
// InputError "file:line: <key>: unknown value \"x\"; allowed: a, b" otherwise.
std::string read_choice(const Config& c, const std::string& key, const std::string& fallback,
                        std::initializer_list<const char*> allowed);

// Formats a double in its shortest exact form, as messages show it: "60", "0.5", "1e-05".
std::string format_double(double value);

}  // namespace lockstep::scenario
