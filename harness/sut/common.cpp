#include "harness/sut/common.h"

#include <cmath>
#include <sstream>

#include "harness/scenario/config_internal.h"

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

std::int64_t read_int(const scenario::Config& c, const std::string& key, std::int64_t fallback, std::int64_t lo,
                      std::int64_t hi) {
  const std::int64_t v = c.get_int(key, fallback);
  if (v < lo || v > hi) {
    c.fail(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(v));
  }
  return v;
}

double read_double(const scenario::Config& c, const std::string& key, double fallback, double lo, double hi) {
  const double v = c.get_double(key, fallback);
  if (!std::isfinite(v) || v < lo || v > hi) {
    c.fail(key, "must be a finite number in [" + scenario::internal::format_double(lo) + ", " +
                    scenario::internal::format_double(hi) + "], got " + scenario::internal::format_double(v));
  }
  return v;
}

}  // namespace lockstep::sut
