#include "harness/scenario/scenario.h"

#include <toml++/toml.h>

#include <algorithm>
#include <regex>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>
#include <utility>

#include "harness/core/error.h"
#include "harness/scenario/config_internal.h"

namespace lockstep::scenario {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxWorldSize = 64;
constexpr double kMaxTimeoutS = 3600.0;
constexpr double kMaxDeadlineS = 86400.0;
constexpr std::size_t kMaxInjections = 64;  // one bit each on the progress board
constexpr std::size_t kMaxVariants = 4096;
const std::vector<std::string> kRunKeys = {"world_size", "backend",   "device",
                                           "verify",     "timeout_s", "seed",
                                           "ranks_per_node", "startup_timeout_s", "deadline_s"};
const std::string kWorkloadPrefix = "workload.";

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

template <typename Enum>
Enum read_enum(const Config& table, const std::string& key, const std::string& fallback,
               const std::vector<std::pair<std::string, Enum>>& choices) {
  std::string value = table.get_string(key, fallback);
  std::vector<std::string> names;
  for (const auto& [name, e] : choices) {
    if (name == value) return e;
    names.push_back(name);
  }
  table.fail(key, "unknown value \"" + value + "\"; allowed: " + join(names, ", "));
}

// Returns the value of an optional integer key, or nullopt when it is absent.
std::optional<std::int64_t> optional_int(const Config& table, const std::string& key) {
  std::int64_t value = table.get_int(key, 0);
  if (!table.has(key)) return std::nullopt;
  return value;
}

// One [matrix] dimension: a [run] key or a "workload.<key>" and the values it takes.
struct Dimension {
  std::string key;  // as written in [matrix]
  bool workload = false;
  std::vector<const toml::node*> values;
  std::vector<std::string> labels;  // values as they appear in variant strings
  std::int64_t key_line = 0;
};

struct Matrix {
  std::vector<Dimension> dimensions;
  bool invariant = true;
};

Matrix read_matrix(const Config& root) {
  Matrix matrix;
  Config table = root.get_table("matrix");
  matrix.invariant = table.get_bool("invariant", true);
  const std::string allowed =
      "allowed keys in [matrix]: invariant, " + join(kRunKeys, ", ") + ", \"workload.<key>\"";
  for (const auto& [key, node, key_line] : internal::entries(table)) {
    if (key == "invariant") continue;
    Dimension dim;
    dim.key = key;
    dim.workload = key.size() > kWorkloadPrefix.size() && key.starts_with(kWorkloadPrefix);
    bool run_key = std::find(kRunKeys.begin(), kRunKeys.end(), key) != kRunKeys.end();
    if (!run_key && !dim.workload) internal::fail_at_key(table, key, "unknown key; " + allowed);
    internal::read_node(table, key);
    const toml::array* array = node->as_array();
    if (!array || array->empty()) {
      table.fail(key, "expected a non-empty array of values, got " +
                          (array ? std::string("an empty array") : internal::describe(*node)));
    }
    std::set<std::string> seen;
    for (std::size_t i = 0; i < array->size(); ++i) {
      const toml::node& element = *array->get(i);
      std::string name = internal::qualified_name(table, key) + "[" + std::to_string(i) + "]";
      std::string label = internal::format_scalar(element);
      if (element.is_array() || element.is_table()) {
        internal::fail_at_node(table, element, name,
                               "expected a single value, got " + internal::describe(element));
      }
      if (!seen.insert(label).second) {
        internal::fail_at_node(table, element, name, "duplicate value " + label);
      }
      dim.values.push_back(&element);
      dim.labels.push_back(label);
    }
    dim.key_line = key_line;
    matrix.dimensions.push_back(std::move(dim));
  }
  table.finish();
  std::size_t count = 1;
  for (const auto& dim : matrix.dimensions) {
    count *= dim.values.size();
    if (count > kMaxVariants) {
      table.fail("", "[matrix] expands to more than " + std::to_string(kMaxVariants) + " variants");
    }
  }
  return matrix;
}

// The file-level fields shared by every variant.
struct FileLevel {
  std::string name;
  std::string description;
  std::vector<std::string> tags;
};

FileLevel read_file_level(const Config& root) {
  FileLevel out;
  out.name = root.get_string("name");
  bool valid_name = !out.name.empty() && std::all_of(out.name.begin(), out.name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
  });
  if (!valid_name) root.fail("name", "must match [a-z0-9_.-]+, got \"" + out.name + "\"");
  out.description = root.get_string("description", "");
  out.tags = root.get_string_list("tags", {});
  for (const char* table : {"requires", "run", "workload", "system"}) root.get_table(table);
  internal::get_table_array(root, "inject");
  for (const char* table : {"expect", "matrix", "compare"}) root.get_table(table);
  if (!root.has("workload")) root.fail("", "missing required table [workload]");
  return out;
}

// The rule of each [run] key on its own (its type and range), whatever the other keys are.
// Each reads `key` from `run` (the fallback when absent) and throws InputError naming file:line.
std::int64_t run_world_size(const Config& run) { return read_int(run, "world_size", 1, 1, kMaxWorldSize); }
Backend run_backend(const Config& run) {
  return read_enum<Backend>(run, "backend", "gloo", {{"gloo", Backend::kGloo}, {"nccl", Backend::kNccl}});
}
Device run_device(const Config& run) {
  return read_enum<Device>(run, "device", "cpu", {{"cpu", Device::kCpu}, {"cuda", Device::kCuda}});
}
VerifyMode run_verify(const Config& run) {
  return read_enum<VerifyMode>(run, "verify", "verify",
                               {{"off", VerifyMode::kOff}, {"record", VerifyMode::kRecord}, {"verify", VerifyMode::kVerify}});
}
// timeout_s and startup_timeout_s: (0, 3600] seconds.
double run_timeout(const Config& run, const std::string& key, double fallback) {
  const double v = run.get_double(key, fallback);
  if (!(v > 0.0 && v <= kMaxTimeoutS)) {
    run.fail(key, "must be in (0, " + internal::format_double(kMaxTimeoutS) + "] seconds, got " + internal::format_double(v));
  }
  return v;
}
std::int64_t run_seed(const Config& run) { return read_int(run, "seed", 0, 0); }
std::int64_t run_ranks_per_node(const Config& run, std::int64_t fallback) {
  return read_int(run, "ranks_per_node", fallback, 1, kMaxWorldSize);
}

// Checks every key that [run] itself sets by its own rule (run_*), so that a value a [matrix]
// dimension overrides in every variant is still a valid value. deadline_s alone must be in
// (0, 86400]; the rules between keys (deadline_s >= startup_timeout_s + timeout_s, nccl needs
// cuda) apply to each variant's values, in read_run.
void check_run_keys(const Config& run) {
  if (run.has("world_size")) run_world_size(run);
  if (run.has("backend")) run_backend(run);
  if (run.has("device")) run_device(run);
  if (run.has("verify")) run_verify(run);
  if (run.has("timeout_s")) run_timeout(run, "timeout_s", 60.0);
  if (run.has("startup_timeout_s")) run_timeout(run, "startup_timeout_s", 120.0);
  if (run.has("deadline_s")) {
    const double v = run.get_double("deadline_s");
    if (!(v > 0.0 && v <= kMaxDeadlineS)) {
      run.fail("deadline_s", "must be in (0, " + internal::format_double(kMaxDeadlineS) + "] seconds, got " +
                                 internal::format_double(v));
    }
  }
  if (run.has("seed")) run_seed(run);
  if (run.has("ranks_per_node")) run_ranks_per_node(run, 1);
}

void read_run(const Config& run, Scenario& s) {
  const std::int64_t world_size = run_world_size(run);
  s.world_size = static_cast<int>(world_size);
  s.backend = run_backend(run);
  s.device = run_device(run);
  // NCCL is the backend on CUDA, Gloo on the CPU, unless the scenario names one (Gloo with
  // device "cuda": GPU compute with host exchanges, for the workloads that have it).
  if (s.device == Device::kCuda && !run.has("backend")) s.backend = Backend::kNccl;
  s.verify = run_verify(run);
  s.timeout_s = run_timeout(run, "timeout_s", 60.0);
  s.startup_timeout_s = run_timeout(run, "startup_timeout_s", s.startup_timeout_s);
  const double least = s.startup_timeout_s + s.timeout_s;
  s.deadline_s = run.get_double("deadline_s", std::max(s.deadline_s, least + s.timeout_s));
  if (!(s.deadline_s >= least && s.deadline_s <= kMaxDeadlineS)) {
    run.fail("deadline_s", "must be in [startup_timeout_s + timeout_s, " + internal::format_double(kMaxDeadlineS) + "] = [" +
                               internal::format_double(least) + ", " + internal::format_double(kMaxDeadlineS) +
                               "] seconds, got " + internal::format_double(s.deadline_s));
  }
  s.seed = static_cast<std::uint64_t>(run_seed(run));
  const std::int64_t ranks_per_node = run_ranks_per_node(run, world_size);
  s.ranks_per_node = static_cast<int>(std::min(ranks_per_node, world_size));
  if (s.backend == Backend::kNccl && s.device != Device::kCuda) {
    run.fail("backend", "backend \"nccl\" requires device \"cuda\", got device \"" +
                            std::string(to_string(s.device)) + "\"");
  }
  run.finish();
}

void read_requires(const Config& requires_table, Scenario& s) {
  s.requires_cuda = requires_table.get_bool("cuda", false) || s.device == Device::kCuda;
  s.requires_cuda_devices = !s.requires_cuda ? 0 : s.backend == Backend::kNccl ? s.world_size : 1;
  std::int64_t ranks = requires_table.get_int("ranks", s.world_size);
  if (ranks < s.world_size || ranks > kMaxWorldSize) {
    requires_table.fail("ranks", "must be in [run.world_size, " + std::to_string(kMaxWorldSize) +
                                     "] = [" + std::to_string(s.world_size) + ", " +
                                     std::to_string(kMaxWorldSize) + "], got " +
                                     std::to_string(ranks));
  }
  s.requires_ranks = static_cast<int>(ranks);
  requires_table.finish();
}

bool valid_module_name(const std::string& m) {
  return !m.empty() && std::all_of(m.begin(), m.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; });
}

void check_env_list(const Config& t, const std::vector<std::string>& env) {
  for (const auto& kv : env) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) t.fail("env", "expected \"KEY=VALUE\", got \"" + kv + "\"");
  }
}

std::optional<SystemSpec> read_system(const Config& root) {
  if (!root.has("system")) return std::nullopt;
  const Config t = root.get_table("system");
  SystemSpec sys;
  sys.where = t.where();
  // Read every key first, so that a misspelt key is named before a missing one.
  sys.name = t.get_string("name", "");
  const bool has_command = t.has("command");
  sys.command = t.get_string_list("command", {});
  sys.python_modules = t.get_string_list("python_modules", {});
  sys.env = t.get_string_list("env", {});
  sys.profile = t.get_table("profile");
  const std::int64_t runs = t.get_int("runs", 1);
  t.finish();
  if (runs < 1 || runs > 16) t.fail("runs", "must be in [1, 16], got " + std::to_string(runs));
  sys.runs = static_cast<int>(runs);
  if (!t.has("name")) t.fail("", "[system] is missing required key 'name'");
  const bool valid_name = !sys.name.empty() && std::all_of(sys.name.begin(), sys.name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
  });
  if (!valid_name) t.fail("name", "must match [a-z0-9_.-]+, got \"" + sys.name + "\"");
  if (!has_command) t.fail("", "[system] is missing required key 'command'");
  if (sys.command.empty() || sys.command[0].empty()) t.fail("command", "must be a non-empty list of strings (the argv of one rank)");
  for (const auto& m : sys.python_modules) {
    if (!valid_module_name(m)) t.fail("python_modules", "not a module name: \"" + m + "\"");
  }
  check_env_list(t, sys.env);
  return sys;
}

// [workload] kind = "program": every key is read here (the launcher runs the program, no
// workload of lockstep's).
ProgramSpec read_program(const Config& t) {
  ProgramSpec p;
  p.where = t.where();
  const bool has_command = t.has("command");
  p.command = t.get_string_list("command", {});
  p.python_modules = t.get_string_list("python_modules", {});
  p.env = t.get_string_list("env", {});
  p.wrap = t.get_string("wrap", "gloo");
  t.finish();
  if (!has_command) t.fail("", "[workload] kind = \"program\" is missing required key 'command'");
  if (p.command.empty() || p.command[0].empty()) t.fail("command", "must be a non-empty list of strings (the argv of one rank)");
  for (const auto& m : p.python_modules) {
    if (!valid_module_name(m)) t.fail("python_modules", "not a module name: \"" + m + "\"");
  }
  check_env_list(t, p.env);
  if (p.wrap != "gloo" && p.wrap != "none") t.fail("wrap", "must be \"gloo\" or \"none\", got \"" + p.wrap + "\"");
  return p;
}

// [compare] (scenarios/README.md, "Comparing across environments").
void read_compare(const Config& t, Scenario& s) {
  Tolerances& tol = s.tolerances;
  tol.declared = true;
  tol.param_rtol = read_double(t, "param_rtol", 0, 0, 1e30);
  tol.param_atol = read_double(t, "param_atol", 0, 0, 1e30);
  tol.curve_rtol = read_double(t, "curve_rtol", 0, 0, 1e30);
  tol.sequence_may_change = read_choice(t, "sequence", "same", {"same", "may_change"}) == "may_change";
  s.curve = t.get_string("curve", "");
  s.curve_name = t.get_string("curve_name", s.curve.empty() ? "" : "loss");
  t.finish();
  if (!s.curve.empty()) {
    if (!s.program) t.fail("curve", "a curve is read from a program's log: only [workload] kind = \"program\" has one");
    if (const std::string why = curve_problem(s.curve); !why.empty()) t.fail("curve", why);
  } else if (t.has("curve_name")) {
    t.fail("curve_name", "names the curve that `curve` reads; there is no `curve`");
  }
  if (s.curve_name.find_first_of(" \t\n/") != std::string::npos)
    t.fail("curve_name", "must be one word, got \"" + s.curve_name + "\"");
}

Expectation read_expectation(const Config& expect, int world_size) {
  Expectation e;
  std::string outcome = expect.get_string("outcome");
  if (outcome != "pass") {
    e.kind = diagnosis_kind_from_string(outcome);
    if (!e.kind) {
      std::vector<std::string> allowed = {"pass"};
      for (DiagnosisKind kind : all_diagnosis_kinds()) allowed.emplace_back(to_string(kind));
      expect.fail("outcome",
                  "unknown outcome \"" + outcome + "\"; allowed: " + join(allowed, ", "));
    }
  }
  if (auto rank = optional_int(expect, "rank")) {
    if (*rank < 0 || *rank >= world_size) {
      expect.fail("rank", "must be in [0, run.world_size) = [0, " + std::to_string(world_size) +
                              "), got " + std::to_string(*rank));
    }
    e.rank = static_cast<int>(*rank);
  }
  if (auto seq = optional_int(expect, "seq")) {
    if (*seq < 0) expect.fail("seq", "must be >= 0, got " + std::to_string(*seq));
    e.seq = *seq;
  }
  if (auto step = optional_int(expect, "step")) {
    if (*step < 0) expect.fail("step", "must be >= 0, got " + std::to_string(*step));
    e.step = *step;
  }
  e.message_contains = expect.get_string_list("message_contains", {});
  if (!e.kind) {
    for (const char* key : {"rank", "seq", "step", "message_contains"}) {
      if (expect.has(key)) {
        expect.fail(key, "only applies when outcome is a diagnosis kind, not \"pass\"");
      }
    }
  }
  return e;
}

// The waits check runs on the ranks' traces: a straggler gate where there are none would check
// nothing, and a straggler expected without a gate could never be diagnosed.
void check_straggler_gate(const Config& expect, const Scenario& s) {
  const bool expects = s.expect.kind == DiagnosisKind::kStraggler ||
                       std::any_of(s.expect_torch.begin(), s.expect_torch.end(),
                                   [](const auto& e) { return e.second.kind == DiagnosisKind::kStraggler; });
  if (expects && !s.straggler_share) {
    expect.fail("outcome", "a straggler is a diagnosis only where the scenario sets straggler_share (the share of the median "
                           "step the others may wait for one rank): add it");
  }
  if (!s.straggler_share) return;
  const char* why = s.system                                    ? "a system under test runs its own collectives, which lockstep does not trace"
                    : s.verify == VerifyMode::kOff              ? "run.verify = \"off\" writes no traces to line up"
                    : s.program && s.program->wrap == "none"    ? "a program with wrap = \"none\" runs unobserved: no traces to line up"
                                                                : nullptr;
  if (why) expect.fail("straggler_share", std::string("has nothing to judge: ") + why);
}

void read_expect(const Config& expect, Scenario& s) {
  if (expect.has("straggler_share")) {
    const double share = expect.get_double("straggler_share");
    if (!(share > 0 && share <= 1)) {
      expect.fail("straggler_share", "must be in (0, 1] (the share of the run the others may wait for one rank), got " + std::to_string(share));
    }
    if (s.world_size < 2) expect.fail("straggler_share", "needs run.world_size >= 2 (a rank for the others to wait for)");
    s.straggler_share = share;
  }
  s.expect = read_expectation(expect, s.world_size);
  if (expect.has("torch")) {
    if (!s.program) expect.fail("torch", "[expect.torch] only applies to kind = \"program\" (the interpreter's torch)");
    const Config versions = expect.get_table("torch");
    for (const auto& entry : internal::entries(versions)) {
      if (entry.key.empty() || entry.key.find_first_not_of("0123456789.") != std::string::npos) {
        versions.fail(entry.key, "must be a torch version prefix such as \"1.13\" or \"2\", got \"" + entry.key + "\"");
      }
      const Config one = versions.get_table(entry.key);
      s.expect_torch.emplace_back(entry.key, read_expectation(one, s.world_size));
      one.finish();
    }
    versions.finish();
  }
  expect.finish();
}

std::vector<Scenario> load(const std::string& path, const VariantCheck& check) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw InputError("no such file or directory: " + path);
  if (fs::is_directory(path, ec)) {
    throw InputError(path + ": is a directory; expected a scenario file (*.toml)");
  }
  if (!fs::is_regular_file(path, ec)) throw InputError(path + ": not a regular file (a scenario is a .toml file)");
  if (fs::path(path).extension() == ".py") {
    throw InputError(path + ": a Python program, not a scenario file (TOML); to check a training script, run `lockstep torchrun "
                     "--nproc-per-node N " + path + " [args]`");
  }
  std::shared_ptr<const toml::table> document;
  try {
    document = std::make_shared<const toml::table>(toml::parse_file(path));
  } catch (const toml::parse_error& e) {
    std::string description(e.description());
    if (!description.empty()) description[0] = static_cast<char>(std::tolower(description[0]));
    const auto& begin = e.source().begin;
    if (begin.line == 0) throw InputError(path + ": " + description);  // e.g. unreadable
    throw InputError(path + ":" + std::to_string(begin.line) + ":" + std::to_string(begin.column) +
                     ": " + description);
  }
  Config root = internal::make_root_config(document, path);
  FileLevel file_level = read_file_level(root);
  root.finish();
  Matrix matrix = read_matrix(root);
  // Before any variant: a [run] value that a [matrix] dimension overrides in every variant is
  // never read by read_run, but it is still the file's value and must be valid.
  check_run_keys(root.get_table("run"));

  std::size_t count = 1;
  for (const auto& dim : matrix.dimensions) count *= dim.values.size();

  std::vector<Scenario> out;
  out.reserve(count);
  for (std::size_t index = 0; index < count; ++index) {
    // The last dimension varies fastest.
    std::vector<std::size_t> choice(matrix.dimensions.size());
    std::size_t rest = index;
    for (std::size_t d = matrix.dimensions.size(); d-- > 0;) {
      choice[d] = rest % matrix.dimensions[d].values.size();
      rest /= matrix.dimensions[d].values.size();
    }
    std::vector<internal::Override> run_overrides;
    std::vector<internal::Override> workload_overrides;
    std::vector<std::string> variant_parts;
    for (std::size_t d = 0; d < matrix.dimensions.size(); ++d) {
      const Dimension& dim = matrix.dimensions[d];
      internal::Override o;
      o.key = dim.workload ? dim.key.substr(kWorkloadPrefix.size()) : dim.key;
      o.value = dim.values[choice[d]];
      o.name = "matrix." + (dim.workload ? "\"" + dim.key + "\"" : dim.key);
      o.key_line = dim.key_line;
      (dim.workload ? workload_overrides : run_overrides).push_back(std::move(o));
      variant_parts.push_back(dim.key + "=" + dim.labels[choice[d]]);
    }

    Scenario s;
    s.name = file_level.name;
    s.file = path;
    s.variant = join(variant_parts, ",");
    s.description = file_level.description;
    s.tags = file_level.tags;
    s.matrix_invariant = matrix.invariant;
    s.variant_index = index;

    read_run(internal::with_overrides(root.get_table("run"), std::move(run_overrides)), s);
    read_requires(root.get_table("requires"), s);

    Config workload =
        internal::with_overrides(root.get_table("workload"), std::move(workload_overrides));
    s.workload = workload.get_string("kind");
    if (s.workload.empty()) workload.fail("kind", "must not be empty");
    s.workload_config = workload;
    if (s.workload == "program") s.program = read_program(workload);

    for (const Config& entry : internal::get_table_array(root, "inject")) {
      if (s.program && entry.get_string("kind") != "slow_rank") {
        entry.fail("kind", "[[inject]] of a kind = \"program\" can only be slow_rank (lockstep slows the rank's calls); a program's "
                           "bugs are its own options (put them in command)");
      }
      if (s.program) {
        // A program's calls are wrapped one by one (no call index within a step), its rank plan
        // carries one slow_rank, and a program left unobserved has no calls of lockstep's to slow.
        if (entry.has("call")) entry.fail("call", "a program's calls have no index within the step: match its phase (\"file:line\") or op");
        if (s.program->wrap == "none") entry.fail("kind", "slow_rank slows the calls lockstep wraps: wrap = \"none\" has none");
        if (entry.has("rank")) {
          for (const auto& other : s.injections) {
            if (other.config.has("rank") && other.config.get_int("rank") == entry.get_int("rank")) {
              entry.fail("rank", "a program's rank takes one slow_rank; " + other.label() + " is already on rank " +
                                     std::to_string(entry.get_int("rank")));
            }
          }
        }
      }
      Injection injection;
      injection.kind = entry.get_string("kind");
      if (injection.kind.empty()) entry.fail("kind", "must not be empty");
      injection.config = entry;
      injection.index = s.injections.size();
      if (injection.index >= kMaxInjections) entry.fail("kind", "at most " + std::to_string(kMaxInjections) + " [[inject]] tables per scenario");
      s.injections.push_back(std::move(injection));
    }

    // Without [expect] the scenario must pass.
    if (root.has("expect")) read_expect(root.get_table("expect"), s);
    s.system = read_system(root);
    if (s.system && s.program) root.fail("system", "[system] and [workload] kind = \"program\" exclude each other");
    if (root.has("compare")) read_compare(root.get_table("compare"), s);
    if (root.has("expect")) check_straggler_gate(root.get_table("expect"), s);
    if (check) check(s);
    if (s.program) internal::check_command(workload, s.program->command, path);
    if (s.system) internal::check_command(root.get_table("system"), s.system->command, path);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

std::string curve_problem(const std::string& regex) {
  std::regex re;
  try {
    re = std::regex(regex, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return "not a regular expression (ECMAScript): " + std::string(e.what());
  }
  if (re.mark_count() != 1 && re.mark_count() != 2)
    return "needs 1 group (the value) or 2 (the step, then the value), got " + std::to_string(re.mark_count());
  return "";
}

std::string_view to_string(Backend backend) {
  switch (backend) {
    case Backend::kGloo:
      return "gloo";
    case Backend::kNccl:
      return "nccl";
  }
  return "unknown";
}

std::string_view to_string(Device device) {
  switch (device) {
    case Device::kCpu:
      return "cpu";
    case Device::kCuda:
      return "cuda";
  }
  return "unknown";
}

std::string Injection::label() const {
  return "#" + std::to_string(index) + " (" + kind + ", " + config.where() + ")";
}

const Expectation& Scenario::expectation_for(const std::string& torch_version) const {
  for (const auto& [prefix, e] : expect_torch) {
    // "1.13" matches "1.13.0a0" and "1.13.1", not "1.130"; "2" matches "2.15.0+cu132".
    if (torch_version.rfind(prefix, 0) == 0 &&
        (torch_version.size() == prefix.size() || !std::isdigit(static_cast<unsigned char>(torch_version[prefix.size()])))) {
      return e;
    }
  }
  return expect;
}

std::string Expectation::expected_label() const {
  return kind ? std::string(to_string(*kind)) : std::string("pass");
}

std::string Scenario::id() const { return variant.empty() ? name : name + "[" + variant + "]"; }

std::string Scenario::slug() const {
  std::string out = id();
  for (char& c : out) {
    bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '.' || c == '_' || c == '-';
    if (!safe) c = '_';
  }
  return out;
}

std::vector<Scenario> load_file(const std::string& path, const VariantCheck& check) { return load(path, check); }

namespace internal {

Config load_document(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw InputError(path + ": not a regular file");
  try {
    return make_root_config(std::make_shared<const toml::table>(toml::parse_file(path)), path);
  } catch (const toml::parse_error& e) {
    const auto& begin = e.source().begin;
    throw InputError(path + ":" + std::to_string(begin.line) + ":" + std::to_string(begin.column) + ": " +
                     std::string(e.description()));
  }
}

}  // namespace internal
}  // namespace lockstep::scenario
