#pragma once
// The table of a collective call's integer fields: each row declares one field that the ranks of
// a call must agree on, once. Everything that carries a call derives its part from this table:
//   - comm::Call's members and comm::call_fields() (harness/comm/types.h), from which the
//     fingerprint, its description, the verifier's record (one word per row, so the board's ring)
//     and its comparisons (harness/comm/fingerprint.cpp) are derived;
//   - the trace record's members and keys, in a line's key order (harness/trace/record.h);
//   - the golden sequence's CallRecord, its comparison, description and hash
//     (harness/baseline/sequence.h), and the baseline store's columns (the first
//     kCallFieldsBeforeTable rows have their own; later ones go in `sequence_calls.fields`);
//   - the program's C interface (ls_call's `fields`, named by ls_call_fields(); harness/pytorch/
//     program.h), which the Python side reads at load (lockstep_torch/binding.py).
// Adding a field is a row here, plus its tests, plus whatever sets it (the program wrapper's
// describe(name=...), a workload's Call).
//
// A row is X(name, label, when, none, kind):
//   name   the member's name and the field's key (trace line, baseline JSON, ls_call_fields());
//   label  what a mismatch message calls it;
//   when   an expression of `t` (the op's comm::OpTraits): the ops that carry the field;
//   none   its value on every other op, and where a record lacks it;
//   kind   kValue (compared as is), kRank (a rank of the call's group every rank names, shown as
//          the global rank) or kPeer (the other side of a point-to-point call: a send's peer must
//          be the receiver and the receiver's the sender, shown as the global rank).
// New rows go at the end (a row's position is its index in ls_call's `fields` and the verifier's
// record). The first kCallFieldsBeforeTable rows, which the formats had before the table, are
// written, described and hashed wherever their op carries them; a later row only where it is set
// (not `none`), so that adding one changes no trace line, message or recorded hash of a call that
// does not set it. The verifier compares every row wherever its op carries it.
#include <cstdint>

#define LOCKSTEP_CALL_FIELDS(X)                  \
  X(root, "root", t.rooted, -1, kRank)           \
  X(peer, "peer", t.p2p, -1, kPeer)              \
  X(tag, "tag", t.p2p, 0, kValue)

namespace lockstep::trace {

enum class CallFieldKind : std::uint8_t { kValue, kRank, kPeer };

inline constexpr int kCallFieldCount = 0
#define LOCKSTEP_COUNT_ROW(...) +1
    LOCKSTEP_CALL_FIELDS(LOCKSTEP_COUNT_ROW)
#undef LOCKSTEP_COUNT_ROW
    ;
// The rows the formats had before the table (root, peer, tag): always shown where carried, hashed
// by position, stored in their own columns.
inline constexpr int kCallFieldsBeforeTable = 3;

// Whether row `index` of value `value` appears (in a trace line, a description, a hash) on an op
// that `carried` it.
constexpr bool call_field_shown(int index, bool carried, std::int64_t value, std::int64_t none) {
  return carried && (index < kCallFieldsBeforeTable || value != none);
}

}  // namespace lockstep::trace
