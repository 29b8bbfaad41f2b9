#pragma once
// How a rank's calls are checked, the one definition: a scenario's run.verify, the rank plan
// (harness/rank/plan.h) and the rank runtime all use this type.
#include <optional>
#include <string_view>

namespace lockstep {

// off: neither checked nor traced; record: traced only; verify: every call checked across ranks.
enum class VerifyMode { kOff, kRecord, kVerify };

inline std::string_view to_string(VerifyMode mode) {
  switch (mode) {
    case VerifyMode::kOff:
      return "off";
    case VerifyMode::kRecord:
      return "record";
    case VerifyMode::kVerify:
      return "verify";
  }
  return "unknown";
}

// "off", "record" or "verify"; nullopt for anything else.
inline std::optional<VerifyMode> verify_mode_from_string(std::string_view text) {
  for (VerifyMode m : {VerifyMode::kOff, VerifyMode::kRecord, VerifyMode::kVerify}) {
    if (text == to_string(m)) return m;
  }
  return std::nullopt;
}

}  // namespace lockstep
