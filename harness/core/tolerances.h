#pragma once
// [compare]: how far a comparison across environments (a torch upgrade) may move a scenario's
// results and still be `within_tolerance` (harness/baseline/numerics.h; scenarios/README.md,
// "Comparing across environments"). Undeclared: any difference is a change.

namespace lockstep {

struct Tolerances {
  bool declared = false;
  double param_rtol = 0, param_atol = 0;  // per parameter element: |b - a| <= atol + rtol * |a|
  double curve_rtol = 0;                  // per curve point, relative to the larger magnitude
  bool sequence_may_change = false;       // a changed collective sequence is a note, not a verdict
};

}  // namespace lockstep
