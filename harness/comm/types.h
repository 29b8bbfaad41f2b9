#pragma once
// Torch-free descriptions of buffers and collective calls. Backends translate these into
// c10d or NCCL calls; decorators (recorder, verifier, fault injector) read and rewrite them.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/trace/call_fields.h"

namespace lockstep::comm {

enum class DType : std::uint8_t { kF32, kF64, kF16, kBF16, kI8, kU8, kI32, kI64 };
enum class DeviceType : std::uint8_t { kCpu, kCuda };
// kProduct and the bitwise ops: a program's reduce ops, described and compared (lockstep's own
// workloads and faults use the first four). Codes are stable: new ones go at the end.
enum class ReduceOp : std::uint8_t { kSum, kMax, kMin, kAvg, kProduct, kBand, kBor, kBxor };
// sum, max, min, avg: what lockstep's own workloads compute and its faults inject.
inline bool is_arithmetic(ReduceOp op) { return static_cast<int>(op) <= static_cast<int>(ReduceOp::kAvg); }
// Codes are stable (traces, boards and the program interface carry them): new ops go at the end.
enum class Op : std::uint8_t {
  kAllReduce, kAllGather, kAllToAll, kBroadcast, kBarrier, kSend, kRecv,
  kReduceScatter, kReduce, kGather, kScatter
};
inline constexpr int kOpCount = 11;

// What a call of each op carries that its ranks must agree on, beside its dtype, device and
// count: the one table (types.cpp) from which the fingerprint, the verifier's record, the
// descriptions, the trace record and the fault injector's choices are derived. Adding an op is a
// row there.
struct OpTraits {
  std::string_view name;  // "all_reduce", as in traces and the program interface
  bool data;     // carries a buffer (all but barrier); `count` is elements per rank
  bool reduces;  // the reduce op matters (all_reduce, reduce_scatter, reduce)
  bool rooted;   // `root` is a root every rank names (broadcast, reduce, gather, scatter)
  bool splits;   // per-peer counts (all_to_all): `count` is 0, the splits are compared
  bool p2p;      // `root` is the peer, `tag` matters (send, recv)
};
const OpTraits& traits(Op op);

std::string_view to_string(DType dtype);      // "f32", "bf16", ...
std::string_view to_string(ReduceOp op);      // "sum", ...
std::string_view to_string(Op op);            // "all_reduce", ...
std::string_view to_string(DeviceType device);
std::optional<DType> dtype_from_string(std::string_view name);
std::optional<ReduceOp> reduce_op_from_string(std::string_view name);
std::optional<Op> op_from_string(std::string_view name);
std::size_t element_size(DType dtype);

// A contiguous 1-D buffer. Does not own its memory.
struct View {
  void* data = nullptr;
  DType dtype = DType::kF32;
  std::int64_t count = 0;
  DeviceType device = DeviceType::kCpu;
  int device_index = 0;

  std::size_t bytes() const { return static_cast<std::size_t>(count) * element_size(dtype); }
};

// Where in the program a collective was called from. Set by the workload driver through
// Communicator::set_phase/set_step; `index` counts calls made within (phase, step), so a
// call skipped below the API still shifts the next call's index on no other rank.
struct CallSite {
  std::string phase;       // e.g. "train", "sample", "preflight"
  std::int64_t step = -1;  // the workload's step, -1 outside steps
  std::int64_t index = 0;  // the n-th call in this (phase, step)
};

struct Call {
  Op op = Op::kBarrier;
  View in;                 // all_reduce and broadcast work in place on `in`; reduce_scatter,
                           // reduce, gather, scatter: `in` is this rank's chunk (its count is
                           // what ranks compare), whichever side of the call holds it
  View out;                // all_gather, all_to_all, recv
  ReduceOp reduce = ReduceOp::kSum;
  // The table's fields (harness/trace/call_fields.h): root (a rooted op's), peer and tag
  // (send/recv), ...; each `none` where the op does not carry it.
#define LOCKSTEP_CALL_MEMBER(name, label, when, none, kind) std::int64_t name = none;
  LOCKSTEP_CALL_FIELDS(LOCKSTEP_CALL_MEMBER)
#undef LOCKSTEP_CALL_MEMBER
  std::vector<std::int64_t> send_counts;  // all_to_all: elements to each rank
  std::vector<std::int64_t> recv_counts;  // all_to_all: elements from each rank
  CallSite site;
  std::int64_t seq = -1;   // collectives: the n-th collective of this rank (0-based, equal on
                           // every rank for one slot); send/recv: the n-th p2p call
  std::vector<int> group;  // the process group's ranks (global, in group order) when the call is on
                           // a group other than the default one (a program's new_group); empty:
                           // every rank. Ranks, peers and roots above are the group's own.
  std::string wire;        // set by a backend that carries the call differently than asked
                           // (e.g. "f32 upcast"); recorded in the trace
};

inline bool is_p2p(Op op) { return traits(op).p2p; }

// One row of the call-field table, for code that walks the fields: comm's view of
// harness/trace/call_fields.h.
using trace::CallFieldKind;
using trace::kCallFieldCount;
struct CallField {
  std::string_view name;   // the member and key: "root"
  std::string_view label;  // in messages
  std::int64_t none;       // its value on ops that do not carry it
  CallFieldKind kind;
  bool (*carried)(const OpTraits& t);
  std::int64_t Call::*member;
  int index;               // its row in the table (call_fields()[index])
  bool carried_by(Op op) const { return carried(traits(op)); }
  // The call's value, `none` where its op does not carry the field.
  std::int64_t of(const Call& call) const { return carried_by(call.op) ? call.*member : none; }
  // Whether `value` on `op` appears in a trace line or a description (call_fields.h).
  bool shown(Op op, std::int64_t value) const;
};
// The rows, in the table's order.
const std::array<CallField, kCallFieldCount>& call_fields();
inline bool CallField::shown(Op op, std::int64_t value) const {
  return trace::call_field_shown(index, carried_by(op), value, none);
}

// The fields that every rank must agree on for one collective slot.
struct Fingerprint {
  Op op = Op::kBarrier;
  DType dtype = DType::kF32;
  ReduceOp reduce = ReduceOp::kSum;
  DeviceType device = DeviceType::kCpu;
  std::int64_t count = 0;  // elements per rank (all_gather: input count)
  std::array<std::int64_t, kCallFieldCount> fields{};  // call_fields(), each `none` where not carried
  std::uint64_t splits_hash = 0;  // all_to_all: hash of this rank's row of the split matrix
  std::int64_t seq = -1;
  std::int64_t step = -1;
  std::int64_t index = 0;
  std::uint64_t phase_hash = 0;
};

Fingerprint fingerprint_of(const Call& call);
// Returns "all_reduce bf16[1024] sum" style text for messages.
std::string describe(const Call& call);
std::string describe(const Fingerprint& fp);

}  // namespace lockstep::comm
