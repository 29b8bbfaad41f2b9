#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "harness/scenario/config_internal.h"

namespace lockstep::scenario::internal {
namespace fs = std::filesystem;

// A command that cannot start is refused when its file is loaded (validate and run alike), naming
// the key: argv[0], after {dir} is replaced by the scenario's folder, must be {python}, on PATH,
// or (an absolute path) an executable file; after {python}, a first argument naming a .py file by
// an absolute path (or under {dir}) must exist. Paths relative to where the ranks start are not
// checked here, nor the interpreter (the command that runs it checks --python, LOCKSTEP_PYTHON).
void check_command(const Config& t, const std::vector<std::string>& command, const std::string& file) {
  const std::string dir = fs::path(file).parent_path().empty() ? "." : fs::path(file).parent_path().string();
  auto with_dir = [&](std::string arg) {
    for (auto at = arg.find("{dir}"); at != std::string::npos; at = arg.find("{dir}", at + dir.size())) arg.replace(at, 5, dir);
    return arg;
  };
  std::error_code ec;
  const std::string argv0 = with_dir(command.at(0));
  if (argv0.find("{python}") != std::string::npos) {
    if (command.size() < 2) return;
    const std::string script = with_dir(command[1]);
    const bool placed = fs::path(script).is_absolute() || command[1].find("{dir}") != std::string::npos;
    if (script.size() > 3 && placed && script.compare(script.size() - 3, 3, ".py") == 0 &&
        script.find('{') == std::string::npos && !fs::is_regular_file(script, ec)) {
      t.fail("command", "the script '" + command[1] + "' (" + script + ") does not exist");
    }
    return;
  }
  if (argv0.find('{') != std::string::npos) return;  // another placeholder: resolved when the ranks start
  if (argv0.find('/') != std::string::npos) {
    if (!fs::path(argv0).is_absolute() && command[0].find("{dir}") == std::string::npos) return;  // relative to where the ranks start
    if (!fs::exists(argv0, ec)) t.fail("command", "'" + command[0] + "' (" + argv0 + ") does not exist");
    if (fs::is_directory(argv0, ec) || ::access(argv0.c_str(), X_OK) != 0) {
      t.fail("command", "'" + command[0] + "' (" + argv0 + ") is not an executable file");
    }
    return;
  }
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string d; std::getline(dirs, d, ':');) {
    const fs::path candidate = fs::path(d.empty() ? "." : d) / argv0;
    if (::access(candidate.c_str(), X_OK) == 0 && !fs::is_directory(candidate, ec)) return;
  }
  t.fail("command", "'" + argv0 + "' is not on PATH");
}

}  // namespace lockstep::scenario::internal
