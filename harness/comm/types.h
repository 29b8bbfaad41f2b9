#pragma once
// Torch-free descriptions of buffers and collective calls. Backends translate these into
// c10d or NCCL calls; decorators (recorder, verifier, fault injector) read and rewrite them.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::comm {

enum class DType : std::uint8_t { kF32, kF64, kF16, kBF16, kI8, kU8, kI32, kI64 };
enum class DeviceType : std::uint8_t { kCpu, kCuda };
enum class ReduceOp : std::uint8_t { kSum, kMax, kMin, kAvg };
enum class Op : std::uint8_t { kAllReduce, kAllGather, kAllToAll, kBroadcast, kBarrier, kSend, kRecv };

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
  View in;                 // all_reduce and broadcast work in place on `in`
  View out;                // all_gather, all_to_all, recv
  ReduceOp reduce = ReduceOp::kSum;
  int root = -1;           // broadcast root, or send/recv peer
  int tag = 0;             // send/recv tag
  std::vector<std::int64_t> send_counts;  // all_to_all: elements to each rank
  std::vector<std::int64_t> recv_counts;  // all_to_all: elements from each rank
  CallSite site;
  std::int64_t seq = -1;   // collectives: the n-th collective of this rank (0-based, equal on
                           // every rank for one slot); send/recv: the n-th p2p call
  std::string wire;        // set by a backend that carries the call differently than asked
                           // (e.g. "f32 upcast"); recorded in the trace
};

inline bool is_p2p(Op op) { return op == Op::kSend || op == Op::kRecv; }

// The fields that every rank must agree on for one collective slot.
struct Fingerprint {
  Op op = Op::kBarrier;
  DType dtype = DType::kF32;
  ReduceOp reduce = ReduceOp::kSum;
  DeviceType device = DeviceType::kCpu;
  std::int64_t count = 0;  // elements per rank (all_gather: input count)
  int root = -1;           // broadcast root; -1 for ops without one
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
