#pragma once
// Digests of canonical outputs, as lowercase hex, for [matrix] invariance and baselines.
#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::workloads {

// FNV-1a over the little-endian bytes of `values`, as 16 hex digits: FNV's 64-bit prime with
// offset basis 1469598103934665603 (one digit short of the standard 14695981039346656037). The
// basis is part of the results.json and baseline contract (scenarios/README.md): recorded
// digests were made with it, so it stays.
std::string digest_hex(const std::vector<std::int64_t>& values);

}  // namespace lockstep::workloads
