#include "harness/workloads/digest.h"

#include <cstdio>

namespace lockstep::workloads {

std::string digest_hex(const std::vector<std::int64_t>& values) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::int64_t v : values) {
    for (int b = 0; b < 8; ++b) {
      h ^= static_cast<std::uint64_t>(v >> (8 * b)) & 0xffu;
      h *= 1099511628211ull;
    }
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace lockstep::workloads
