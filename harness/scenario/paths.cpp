// Which scenario files a command loads (expand_paths), and loading all of them (load_paths),
// every broken file's error reported together.
#include <filesystem>
#include <map>
#include <string>
#include <system_error>
#include <vector>

#include "harness/core/error.h"
#include "harness/scenario/scenario.h"

namespace lockstep::scenario {
namespace {
namespace fs = std::filesystem;
constexpr const char* kCatalogFile = "catalog.toml";  // the known-bug catalog (catalog.h), not a scenario
}  // namespace

std::vector<std::string> expand_paths(const std::vector<std::string>& paths) {
  // Sorted and de-duplicated by normalised path; each keeps the spelling first seen.
  std::map<std::string, std::string> files;
  auto add = [&](const std::string& file) {
    files.emplace(fs::path(file).lexically_normal().generic_string(), file);
  };
  for (const auto& path : paths) {
    std::error_code ec;
    fs::file_status status = fs::status(path, ec);
    if (ec || !fs::exists(status)) throw InputError("no such file or directory: " + path);
    if (!fs::is_directory(status)) {
      // A FIFO or a device would block or never end: only regular files are scenarios.
      if (!fs::is_regular_file(status)) throw InputError(path + ": not a regular file (a scenario is a .toml file)");
      add(path);
      continue;
    }
    std::size_t found = 0;
    try {
      for (const auto& entry : fs::recursive_directory_iterator(path)) {
        // catalog.toml is the known-bug catalog (lockstep catalog), not a scenario.
        if (entry.path().extension() == ".toml" && entry.is_regular_file() && entry.path().filename() != kCatalogFile) {
          add(entry.path().generic_string());
          ++found;
        }
      }
    } catch (const fs::filesystem_error& e) {
      throw InputError(path + ": cannot list directory: " + e.code().message());
    }
    if (found == 0) throw InputError(path + ": no scenario files (*.toml) in this directory");
  }
  std::vector<std::string> out;
  out.reserve(files.size());
  for (auto& [normal, spelled] : files) out.push_back(std::move(spelled));
  return out;
}

std::vector<Scenario> load_paths(const std::vector<std::string>& paths, const VariantCheck& check) {
  std::vector<Scenario> out;
  std::map<std::string, std::string> file_of_id;
  // Every file is read: a broken one is reported with the others', all at once, as one error.
  std::vector<std::string> errors;
  std::size_t files = 0;
  for (const auto& file : expand_paths(paths)) {
    ++files;
    try {
      for (auto& s : load_file(file, check)) {
        auto [it, inserted] = file_of_id.emplace(s.id(), s.file);
        if (!inserted) {
          throw InputError(s.file + ": duplicate scenario id \"" + s.id() + "\" (also defined in " +
                           it->second + ")");
        }
        out.push_back(std::move(s));
      }
    } catch (const InputError& e) {
      errors.emplace_back(e.what());
    }
  }
  if (errors.size() == 1) throw InputError(errors.front());
  if (!errors.empty()) {
    std::string all = std::to_string(errors.size()) + " of " + std::to_string(files) + " scenario files have errors:";
    for (const auto& e : errors) all += "\n" + e;
    throw InputError(all);
  }
  return out;
}

}  // namespace lockstep::scenario
