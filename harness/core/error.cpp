#include "harness/core/error.h"

#include <cstring>

namespace lockstep::detail {

void throw_error(const char* file, int line, const std::string& message) {
  const char* base = std::strrchr(file, '/');
  throw Error(concat(base ? base + 1 : file, ":", line, ": ", message));
}

}  // namespace lockstep::detail
