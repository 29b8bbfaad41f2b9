#include "harness/core/fs.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "harness/core/error.h"

namespace lockstep {

void write_file_atomically(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  LOCKSTEP_CHECK(!ec, "cannot create directory ", parent.string(), ": ", ec.message());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    LOCKSTEP_CHECK(out.good(), "cannot open ", tmp, " for writing: ", std::strerror(errno));
    out << text;
    out.close();
    LOCKSTEP_CHECK(out.good(), "cannot write ", tmp);
  }
  fs::rename(tmp, path, ec);
  LOCKSTEP_CHECK(!ec, "cannot rename ", tmp, " to ", path, ": ", ec.message());
}

}  // namespace lockstep
