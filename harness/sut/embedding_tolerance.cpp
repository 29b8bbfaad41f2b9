// The embedding capability's tolerance: how far an output may be from the replayed reference,
// in units of 2^-23 * max(scale, 2^-6) (scale: the value's own magnitude, or a pooled bag's
// pooling of its rows' magnitudes), and the worst deviation a run saw per check, which a user
// chooses tolerance_ulps from.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>

#include "harness/scenario/config.h"
#include "harness/sut/capability.h"
#include "harness/sut/embedding_model.h"

namespace lockstep::sut::embedding {

double units(float want, float got, double scale) {
  if (std::memcmp(&want, &got, 4) == 0) return 0;
  if (!std::isfinite(got) || !std::isfinite(want)) return std::numeric_limits<double>::infinity();
  const double unit = std::ldexp(std::max<double>(scale >= 0 ? scale : std::fabs(want), std::ldexp(1.0, -6)), -23);
  return std::fabs(static_cast<double>(got) - want) / unit;
}

bool close(float want, float got, double ulps, double scale) {
  if (std::memcmp(&want, &got, 4) == 0) return true;
  return ulps > 0 && units(want, got, scale) <= ulps;
}

void note_worst_deviation(const std::map<std::string, double>& worst, double declared, CheckResult& res) {
  double most = 0;
  std::string parts;
  for (const auto& [check, w] : worst) {
    res.metrics["worst_ulps." + check] = w;
    most = std::max(most, w);
    parts += (parts.empty() ? "" : ", ") + check + " " + scenario::format_double(std::round(w * 1000) / 1000);
  }
  if (worst.empty()) return;
  std::string note = "worst deviation per check, in units per step: " + parts;
  if (most == 0) {
    note += " (every output bit-identical to the replay)";
  } else if (declared > 0) {
    note += " (declared tolerance_ulps " + scenario::format_double(declared) + "; the run needs " +
            scenario::format_double(std::ceil(most * 1000) / 1000) + ")";
  }
  res.notes.push_back(note);
}

}  // namespace lockstep::sut::embedding
