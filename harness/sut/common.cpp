#include "harness/sut/common.h"

#include <sstream>

namespace lockstep::sut {

std::vector<std::int64_t> share_offsets(std::int64_t n, int world_size, std::int64_t base) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(world_size) + 1, base);
  for (int r = 0; r < world_size; ++r) {
    out[static_cast<std::size_t>(r) + 1] = out[static_cast<std::size_t>(r)] + n / world_size + (r < n % world_size ? 1 : 0);
  }
  return out;
}

std::string preview(const std::vector<std::int64_t>& values, std::size_t max) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < values.size() && i < max; ++i) os << (i ? ", " : "") << values[i];
  if (values.size() > max) os << ", ... (" << values.size() << " in all)";
  os << ']';
  return os.str();
}

}  // namespace lockstep::sut
