#pragma once
// A record's numbers beyond its digest, for comparisons across environments (a torch upgrade):
// the program's final parameters tensor by tensor (numerics-rank<r>.bin, written by
// lockstep_torch/numerics.py) and its per-step curves (the loss it logs), and how two records'
// numbers differ against declared tolerances (harness/core/tolerances.h).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/core/tolerances.h"

namespace lockstep::baseline {

struct TensorValues {
  std::string name;                 // "fc.weight" (replicated), "rank1/emb.weight" (one rank's own)
  std::vector<std::int64_t> shape;
  std::string dtype;                // as the program had it: "float32", "bfloat16", ...
  bool kept = true;                 // false: past the element cap, listed without values
  std::vector<double> values;       // row-major, exact
};

struct CurveValues {
  std::string name;                 // "loss"
  std::vector<std::int64_t> steps;  // the step of each value
  std::vector<double> values;
};

struct Numerics {
  std::vector<TensorValues> tensors;
  std::vector<CurveValues> curves;
  bool empty() const { return tensors.empty() && curves.empty(); }
};

// Parses one numerics-rank<r>.bin (its format: lockstep_torch/numerics.py). The file is
// untrusted: a header that is not the format, a shape whose elements overflow, or a size that
// does not match the header throws InputError naming `source`.
std::vector<TensorValues> parse_tensor_file(const std::string& bytes, const std::string& source);
// Every rank's file in `artifacts_dir`, in rank order ([] when none).
std::vector<TensorValues> read_tensor_files(const std::string& artifacts_dir, int world_size);

// Float64 values as little-endian bytes and back (the baseline store's blobs); from_bytes throws
// InputError naming `source` when the size is not a multiple of 8.
std::string to_bytes(const std::vector<double>& values);
std::vector<double> from_bytes(const std::string& bytes, const std::string& source);

// How one tensor differs: elements beyond atol + rtol * |a|, and the largest differences.
struct TensorDiff {
  std::string name;
  std::int64_t elements = 0, differ = 0, beyond = 0;  // all, any difference, beyond the tolerance
  double max_abs = 0, max_rel = 0;                    // largest |b - a|, largest |b - a| / |a|
  std::string problem;  // "" comparable; else why not (shape changed, only in one record)
  bool not_kept = false;  // listed without values on a side (past the element cap): not compared
};
struct CurveDiff {
  std::string name;
  std::int64_t points = 0;             // steps both records have
  std::int64_t first_beyond_step = -1; // the first step whose values part beyond curve_rtol, -1 none
  std::int64_t first_differ_step = -1;
  double max_rel = 0;                  // largest |b - a| / max(|a|, |b|)
  std::int64_t max_step = -1;          // where it is
  double first_beyond_rel = 0;         // the relative difference at first_beyond_step
  std::string problem;     // why it cannot be compared: a curve in one record only is a note, not a change
};

struct NumericsComparison {
  std::vector<TensorDiff> tensors;  // in the `from` record's order, then those only in `to`
  std::vector<CurveDiff> curves;
  bool identical = true;            // no element or point differs
  bool within = true;               // none beyond its tolerance, no tensor in one record only or reshaped
  // The verdict's words: "fc.weight: 12 of 1024 elements beyond rtol 1e-05 (largest |diff|
  // 3.1e-04, relative 2.0e-02)", or "largest relative difference 1.2e-06 (fc.weight) ...".
  std::string detail;
};

// Compares `a` (from) with `b` (to) under `t` (undeclared: tolerances 0). NaN equals NaN; a value
// that differs and is not finite on either side is beyond any tolerance. A step logged twice is
// compared at its first occurrence. Tensors listed without values, and curves in one record only,
// are named in the detail ("not compared") and change neither `identical` nor `within`.
NumericsComparison compare_numerics(const Numerics& a, const Numerics& b, const Tolerances& t);

}  // namespace lockstep::baseline
