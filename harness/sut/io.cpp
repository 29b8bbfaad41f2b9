#include "harness/sut/io.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include "harness/core/diagnosis.h"
#include "harness/core/error.h"
#include "harness/core/fs.h"

namespace lockstep::sut {
namespace fs = std::filesystem;

InputWriter::InputWriter(std::string dir, std::string capability, std::string scenario_id, std::string system,
                         int world_size, std::uint64_t seed)
    : dir_(std::move(dir)), world_size_(world_size) {
  fs::create_directories(dir_);
  manifest_ = {{"schema", "lockstep.sut.inputs"}, {"schema_version", kSutSchemaVersion},
               {"capability", std::move(capability)}, {"scenario", std::move(scenario_id)},
               {"system", std::move(system)}, {"world_size", world_size}, {"seed", seed},
               {"arrays", nlohmann::json::object()}};
}

void InputWriter::raw(const std::string& name, const std::string& descr, std::vector<std::int64_t> shape,
                      const void* data, std::size_t bytes, const std::string& meaning) {
  const std::string file = name + ".npy";
  io::write_npy(dir_ + "/" + file, descr, shape, data, bytes);
  manifest_["arrays"][name] = {{"file", file}, {"dtype", descr}, {"shape", shape}, {"meaning", meaning}};
}

void InputWriter::array(const std::string& name, const std::vector<std::int64_t>& v, std::vector<std::int64_t> shape,
                        const std::string& meaning) {
  raw(name, "<i8", std::move(shape), v.data(), v.size() * sizeof(std::int64_t), meaning);
}
void InputWriter::array(const std::string& name, const std::vector<std::int32_t>& v, std::vector<std::int64_t> shape,
                        const std::string& meaning) {
  raw(name, "<i4", std::move(shape), v.data(), v.size() * sizeof(std::int32_t), meaning);
}
void InputWriter::array(const std::string& name, const std::vector<float>& v, std::vector<std::int64_t> shape,
                        const std::string& meaning) {
  raw(name, "<f4", std::move(shape), v.data(), v.size() * sizeof(float), meaning);
}
void InputWriter::array(const std::string& name, const std::vector<double>& v, std::vector<std::int64_t> shape,
                        const std::string& meaning) {
  raw(name, "<f8", std::move(shape), v.data(), v.size() * sizeof(double), meaning);
}

void InputWriter::shares(const std::string& name, const std::vector<std::int64_t>& offsets, std::int64_t splits) {
  const std::int64_t w1 = world_size_ + 1;
  LOCKSTEP_CHECK(static_cast<std::int64_t>(offsets.size()) == (splits ? splits : 1) * w1, "shares of ", name,
                 ": ", offsets.size(), " offsets for ", splits, " splits");
  std::vector<std::int64_t> shape = splits ? std::vector<std::int64_t>{splits, w1} : std::vector<std::int64_t>{w1};
  array("shares." + name, offsets, shape,
        "rows of '" + name + "' per rank: rank r reads [o[r], o[r+1])" + (splits ? " of each split" : ""));
}

void InputWriter::finish() {
  manifest_["config"] = config_;
  write_file_atomically(dir_ + "/manifest.json", manifest_.dump(1) + "\n");
}

[[noreturn]] void contract_violation(int rank, const std::string& name, const std::string& what) {
  throw DiagnosisError(Diagnosis{DiagnosisKind::kInvariantViolation,
                                 "rank " + std::to_string(rank) + ": output '" + name + "': " + what +
                                     " (see scenarios/README.md, Systems under test)",
                                 rank, -1});
}

namespace {
std::string clip(std::string s) {
  if (s.size() > kMaxText) s = s.substr(0, kMaxText) + "... (" + std::to_string(s.size()) + " characters)";
  return s;
}
}  // namespace

nlohmann::json parse_untrusted_json(const std::string& text) {
  // nlohmann's parser does not recurse, but dumping or copying a deep value does: refuse it here.
  // The count of values bounds the parsed form's memory (a short text can hold many values).
  std::size_t values = 0;
  const auto limit = [&values](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
    using E = nlohmann::json::parse_event_t;
    if (event != E::object_start && event != E::array_start && event != E::value) return true;
    if (event != E::value && depth >= kMaxJsonDepth) {
      throw std::runtime_error("nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    }
    if (++values > kMaxJsonValues) throw std::runtime_error("holds more than " + std::to_string(kMaxJsonValues) + " values");
    return true;
  };
  try {
    return nlohmann::json::parse(text, limit);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("not JSON: ") + e.what());
  }
}

DoneRecord read_done(const std::string& dir, int rank) {
  nlohmann::json done;
  try {
    done = parse_untrusted_json(read_regular(dir, "done.json", kMaxJsonBytes));
  } catch (const std::exception& e) {
    contract_violation(rank, "done.json", e.what());
  }
  auto refuse = [&](const std::string& what) { contract_violation(rank, "done.json", what); };
  if (!done.is_object() || !done.contains("schema_version") || !done["schema_version"].is_number_integer() ||
      done["schema_version"].get<int>() != kSutSchemaVersion) {
    refuse("schema_version must be " + std::to_string(kSutSchemaVersion));
  }
  if (!done.contains("rank") || !done["rank"].is_number_integer()) refuse("lacks the integer 'rank'");
  DoneRecord out;
  out.rank = done["rank"].get<int>();
  if (out.rank != rank) refuse("is rank " + std::to_string(out.rank) + "'s, in rank " + std::to_string(rank) + "'s folder");
  for (const char* key : {"arrays", "rejected"}) {
    if (!done.contains(key) || !done[key].is_object()) refuse(std::string("lacks the object '") + key + "'");
  }
  for (const char* key : {"metrics", "system"}) {
    if (done.contains(key) && !done[key].is_object()) refuse(std::string("'") + key + "' must be an object");
  }
  if (done.contains("notes") && !done["notes"].is_array()) refuse("'notes' must be a list");
  for (auto it = done["arrays"].begin(); it != done["arrays"].end(); ++it) {
    if (!it.value().is_object() || (it.value().contains("file") && !it.value()["file"].is_string())) {
      refuse("arrays." + clip(it.key()) + " must be an object whose 'file' is a string");
    }
    out.arrays[it.key()] = it.value().value("file", it.key() + ".npy");
  }
  const auto text = [](const nlohmann::json& v) { return clip(v.is_string() ? v.get<std::string>() : v.dump()); };
  for (auto it = done["rejected"].begin(); it != done["rejected"].end(); ++it) out.rejected[it.key()] = text(it.value());
  for (const auto& n : done.value("notes", nlohmann::json::array())) out.notes.push_back(text(n));
  const auto metrics = done.value("metrics", nlohmann::json::object());
  for (auto it = metrics.begin(); it != metrics.end() && out.metrics.size() < kMaxEntries; ++it) {
    if (it.value().is_number()) out.metrics[clip(it.key())] = it.value().get<double>();
  }
  const auto system = done.value("system", nlohmann::json::object());
  for (auto it = system.begin(); it != system.end() && out.system.size() < kMaxEntries; ++it) {
    out.system.emplace(clip(it.key()), text(it.value()));
  }
  return out;
}

io::NpyArray read_output_npy(const std::string& dir, const std::string& file) {
  Fd f;
  try {
    f = open_regular(dir, file);
  } catch (const std::exception& e) {
    throw std::runtime_error(file + ": " + e.what());
  }
  if (!f) throw std::runtime_error(file + ": missing");
  return io::read_npy(f.get(), file, kMaxArrayBytes);
}

SystemOutputs::SystemOutputs(std::string dir, int world_size) {
  // The system can write beside its outputs as well as in them: the outputs folder and the one
  // that holds it must still be lockstep's own folders, not symlinks to others' files.
  for (const std::string& folder : {dir, fs::path(dir).parent_path().string()}) {
    struct stat st {};
    if (::lstat(folder.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) continue;
    std::error_code ec;
    const auto target = fs::read_symlink(folder, ec);
    throw DiagnosisError(Diagnosis{DiagnosisKind::kInvariantViolation,
                                   "the outputs folder " + folder + " was replaced by " +
                                       (S_ISLNK(st.st_mode) ? "a symlink" + (ec ? std::string() : " to " + target.string()) : std::string("something that is not a folder")) +
                                       " while the system ran: outputs are never read through symlinks (see scenarios/README.md, Systems under test)",
                                   -1, -1});
  }
  for (int r = 0; r < world_size; ++r) {
    RankOutputs ro;
    ro.rank = r;
    ro.dir = dir + "/rank" + std::to_string(r);
    try {
      open_regular(ro.dir, "progress.json");
    } catch (const std::exception& e) {
      contract_violation(r, "progress.json", e.what());
    }
    ro.done = read_done(ro.dir, r);
    ranks_.push_back(std::move(ro));
  }
}

bool SystemOutputs::has(int rank, const std::string& name) const {
  return ranks_.at(static_cast<std::size_t>(rank)).done.arrays.count(name) > 0;
}

std::optional<std::string> SystemOutputs::rejected(int rank, const std::string& name) const {
  const auto& rej = ranks_.at(static_cast<std::size_t>(rank)).done.rejected;
  const auto it = rej.find(name);
  if (it == rej.end()) return std::nullopt;
  return it->second;
}

std::string dtype_name(const std::string& descr) {
  static const std::pair<const char*, const char*> kNames[] = {
      {"<f4", "float32"}, {"<f8", "float64"}, {"<f2", "float16"}, {"<i8", "int64"}, {"<i4", "int32"}, {"<i2", "int16"},
      {"|i1", "int8"},    {"|u1", "uint8"},   {"<u2", "uint16"},  {"<u4", "uint32"}, {"<u8", "uint64"}, {"|b1", "bool"}};
  for (const auto& [d, n] : kNames) {
    if (descr == d) return std::string(n) + " ('" + descr + "')";
  }
  std::string quoted(1, '\'');
  quoted += clip(descr);
  quoted += '\'';
  return quoted;
}

namespace {
bool is_integer(const std::string& d) {
  for (const char* x : {"<i8", "<i4", "<i2", "|i1", "|u1", "|b1", "<u2", "<u4", "<u8"}) {
    if (d == x) return true;
  }
  return false;
}
bool matches(Declared want, const std::string& d) {
  switch (want) {
    case Declared::kFloat32: return d == "<f4";
    case Declared::kInt64: return d == "<i8";
    case Declared::kAnyInteger: return is_integer(d);
    case Declared::kAnyFloat: return d == "<f4" || d == "<f8";
  }
  return false;
}
std::string describe(Declared want) {
  switch (want) {
    case Declared::kFloat32: return dtype_name("<f4");
    case Declared::kInt64: return dtype_name("<i8");
    case Declared::kAnyInteger: return "an integer dtype";
    case Declared::kAnyFloat: return "float32 or float64";
  }
  return "";
}
}  // namespace

io::NpyArray SystemOutputs::array(int rank, const std::string& name, Declared declared) const {
  const auto& ro = ranks_.at(static_cast<std::size_t>(rank));
  if (!has(rank, name)) {
    if (auto why = rejected(rank, name)) contract_violation(rank, name, "the system raised " + *why);
    contract_violation(rank, name, "missing (neither written nor rejected)");
  }
  const std::string& file = ro.done.arrays.at(name);
  if (file.find('/') != std::string::npos) contract_violation(rank, name, "file name '" + clip(file) + "' has a '/'");
  io::NpyArray a;
  try {
    a = read_output_npy(ro.dir, file);
  } catch (const std::exception& e) {
    contract_violation(rank, name, std::string("unreadable: ") + e.what());
  }
  if (!matches(declared, a.descr)) {
    contract_violation(rank, name, "rank" + std::to_string(rank) + "/" + clip(file) + " has dtype " + dtype_name(a.descr) +
                                       ", but the contract declares " + describe(declared));
  }
  return a;
}

namespace {
template <typename T>
void widen(const io::NpyArray& a, std::vector<std::int64_t>& out) {
  const std::size_t n = a.data.size() / sizeof(T);
  out.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, a.data.data() + i * sizeof(T), sizeof(T));
    out[i] = static_cast<std::int64_t>(v);
  }
}
}  // namespace

std::vector<std::int64_t> SystemOutputs::int64s(int rank, const std::string& name, Declared declared,
                                                std::vector<std::int64_t>* shape, std::string* descr) const {
  LOCKSTEP_CHECK(declared == Declared::kInt64 || declared == Declared::kAnyInteger, "int64s of output '", name,
                 "' read as a float type");
  io::NpyArray a = array(rank, name, declared);
  std::vector<std::int64_t> out;
  const std::string& d = a.descr;
  if (const std::size_t n = a.data.size() / std::max<std::size_t>(io::npy_item_size(d), 1); n > kMaxArrayElements) {
    contract_violation(rank, name, "holds " + std::to_string(n) + " elements, more than the " + std::to_string(kMaxArrayElements) + " allowed");
  }
  if (d == "<i8") widen<std::int64_t>(a, out);
  else if (d == "<i4") widen<std::int32_t>(a, out);
  else if (d == "<i2") widen<std::int16_t>(a, out);
  else if (d == "|i1") widen<std::int8_t>(a, out);
  else if (d == "|u1" || d == "|b1") widen<std::uint8_t>(a, out);
  else if (d == "<u2") widen<std::uint16_t>(a, out);
  else if (d == "<u4") widen<std::uint32_t>(a, out);
  else widen<std::uint64_t>(a, out);  // "<u8": array() admitted only integer dtypes
  if (shape) *shape = a.shape;
  if (descr) *descr = d;
  return out;
}

std::vector<float> SystemOutputs::floats(int rank, const std::string& name, Declared declared,
                                         std::vector<std::int64_t>* shape) const {
  LOCKSTEP_CHECK(declared == Declared::kFloat32 || declared == Declared::kAnyFloat, "floats of output '", name,
                 "' read as an integer type");
  io::NpyArray a = array(rank, name, declared);
  std::vector<float> out;
  if (a.descr == "<f4") {
    out.resize(a.data.size() / 4);
    if (!out.empty()) std::memcpy(out.data(), a.data.data(), a.data.size());
  } else {  // "<f8" (kAnyFloat), rounded
    out.resize(a.data.size() / 8);
    for (std::size_t i = 0; i < out.size(); ++i) {
      double v;
      std::memcpy(&v, a.data.data() + i * 8, 8);
      out[i] = static_cast<float>(v);
    }
  }
  if (shape) *shape = a.shape;
  return out;
}

std::vector<std::string> SystemOutputs::notes() const {
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  std::size_t dropped = 0;
  for (const auto& ro : ranks_) {
    for (const auto& s : ro.done.notes) {
      if (seen.count(s)) continue;
      if (out.size() < kMaxNotes) {
        seen.insert(s);
        out.push_back(s);
      } else {
        ++dropped;
      }
    }
  }
  if (dropped) out.push_back("the system wrote " + std::to_string(dropped) + " more notes (not shown; the first " + std::to_string(kMaxNotes) + " are kept)");
  return out;
}

std::map<std::string, double> SystemOutputs::metrics() const {
  return ranks_.empty() ? std::map<std::string, double>{} : ranks_[0].done.metrics;
}

std::map<std::string, std::string> SystemOutputs::system() const {
  std::map<std::string, std::string> out;
  for (const auto& ro : ranks_) {
    for (const auto& [k, v] : ro.done.system) {
      if (out.size() >= kMaxEntries) break;
      out.emplace(k, v);
    }
  }
  return out;
}

}  // namespace lockstep::sut
