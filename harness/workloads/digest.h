#pragma once
// Digests of canonical outputs, as lowercase hex, for [matrix] invariance and baselines.
#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::workloads {

// FNV-1a 64 over the bytes of `values`, as 16 hex digits.
std::string digest_hex(const std::vector<std::int64_t>& values);

}  // namespace lockstep::workloads
