#pragma once
#include <string>

namespace lockstep {

// Writes `text` to path.tmp and renames it over `path`, so readers never see a torn file.
// Creates missing parent directories. Throws lockstep::Error on failure.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace lockstep
