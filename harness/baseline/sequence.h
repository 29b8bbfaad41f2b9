#pragma once
// Golden collective sequences: the calls each rank issued, in order, with the fingerprint
// fields (op, dtype, count, device, reduce, root, peer/tag, all_to_all splits, the process
// group, call site).
// Read from the per-rank JSON Lines traces the recorder writes; timings are not part of a
// sequence (they go to the timeline), and neither is `wire` (how an engine carried a call).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/trace/call_fields.h"

namespace lockstep::baseline {

struct CallRecord {
  std::int64_t seq = -1;
  std::string kind;         // "collective" or "p2p"
  std::string op;
  std::string dtype;        // "" for barrier
  std::int64_t count = 0;
  std::string device;
  std::string reduce;       // all_reduce only
  // The call-field table's rows (harness/trace/call_fields.h): root, peer, tag, ...; `none`
  // where the op does not carry them.
#define LOCKSTEP_SEQUENCE_MEMBER(name, label, when, none, kind) std::int64_t name = none;
  LOCKSTEP_CALL_FIELDS(LOCKSTEP_SEQUENCE_MEMBER)
#undef LOCKSTEP_SEQUENCE_MEMBER
  std::string send_counts;  // all_to_all: JSON array text, "" otherwise
  std::string recv_counts;
  std::string group;        // a program's group other than the default: its ranks, "[2,3]"; "" the default
  std::string phase;
  std::int64_t step = -1;
  std::int64_t index = 0;
  std::string wire;         // informational, not compared
  std::int64_t t_start_us = 0, t_end_us = 0;  // timing, not compared

  // Equal fingerprint fields (not wire, not timings).
  bool same_call(const CallRecord& other) const;
  // Equal call-field table rows.
  bool same_fields(const CallRecord& other) const;
  // "#12 all_reduce f32[256] sum (train step 3 call 0)".
  std::string describe() const;
};

// The table's rows as CallRecord members, their keys and `none` values, in the table's order.
struct CallRecordField {
  const char* name;
  std::int64_t CallRecord::*member;
  std::int64_t none;
};
inline constexpr CallRecordField kCallRecordFields[] = {
#define LOCKSTEP_SEQUENCE_ROW(name, label, when, none, kind) {#name, &CallRecord::name, none},
    LOCKSTEP_CALL_FIELDS(LOCKSTEP_SEQUENCE_ROW)
#undef LOCKSTEP_SEQUENCE_ROW
};

// The table's rows after the first trace::kCallFieldsBeforeTable, those set, as "name=value"
// joined by ';' (the baseline store's `sequence_calls.fields`), and back. A name this build
// does not know is kept nowhere: a newer lockstep's row.
std::string later_fields_text(const CallRecord& c);
void read_later_fields(const std::string& text, CallRecord* c);

using Sequence = std::vector<std::vector<CallRecord>>;  // [rank][position]

// Reads rank<r>.trace.jsonl for r in [0, world_size) under `dir`. Returns nullopt when a trace
// is missing (verify mode off) or a call failed. Throws InputError naming file:line for a line
// that is not a trace record.
std::optional<Sequence> read_sequence(const std::string& dir, int world_size);

// A stable hex hash of every stored field (fingerprint fields and wire) of every call of every
// rank. Equal hashes mean equal sequences; different hashes may still have no divergence
// (first_divergence ignores wire).
std::string sequence_hash(const Sequence& sequence);

struct Divergence {
  int rank = -1;
  std::int64_t position = -1;  // index into the rank's sequence
  std::string recorded;        // CallRecord::describe(), or "(end of sequence)"
  std::string observed;
  std::string message() const;
};
// The first divergence (lowest rank, then position), or nullopt when the sequences agree.
std::optional<Divergence> first_divergence(const Sequence& recorded, const Sequence& observed);

}  // namespace lockstep::baseline
