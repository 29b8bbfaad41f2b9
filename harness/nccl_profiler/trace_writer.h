#pragma once
// Lockstep traces from NCCL profiler events: torch-free, CUDA-free, NCCL-header-free. One
// CommTrace per communicator writes <dir>/comm-<hash>/rank<r>.trace.jsonl as trace::Record lines
// (harness/trace/record.h), so baseline::read_sequence and report::write_chrome_trace read it.
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace lockstep::nccl_profiler {

// Lockstep's op name for an NCCL function name ("AllReduce" -> "all_reduce", "AlltoAll" ->
// "all_to_all"). Functions lockstep's Op lacks keep their own snake-case name
// ("ReduceScatter" -> "reduce_scatter", "Reduce" -> "reduce"); null or empty -> "unknown".
std::string op_name(const char* nccl_func);

// Lockstep's dtype name for ncclDatatypeToString's ("ncclFloat32" -> "f32", "ncclBfloat16" ->
// "bf16"); types lockstep lacks get the same pattern ("ncclUint32" -> "u32", "ncclFloat8e4m3"
// -> "f8e4m3"); anything else, NCCL's own "Unknown" included, -> "unknown".
std::string dtype_name(const char* nccl_dtype);

// Bytes per element of an NCCL dtype name; 0 when unknown.
std::size_t dtype_size(const char* nccl_dtype);

// The communicator, as NCCL's profiler init describes it.
struct CommInfo {
  std::uint64_t hash = 0;
  std::string name;  // the user's commName; may be empty
  int rank = 0;
  int nranks = 1;
  int nnodes = 1;
};

// One host-side task: a collective, or a send/recv (`p2p`).
struct TaskEvent {
  bool p2p = false;
  std::string func;      // NCCL's name, e.g. "AllReduce"
  std::string datatype;  // NCCL's name, e.g. "ncclFloat32"
  std::uint64_t count = 0;
  int root = -1;         // collectives: NCCL's root (written for broadcast and reduce only)
  int peer = -1;         // send/recv
  std::uint64_t nccl_seq = 0;  // NCCL's per-function sequence number (collectives)
  std::string algo, proto;
};

class CommTrace;

// An event between start and stop; the opaque handle handed to NCCL.
struct Pending {
  CommTrace* owner = nullptr;
  TaskEvent event;
  std::int64_t seq = -1;  // lockstep's seq: per communicator, per kind (collective / p2p), 0-based
  std::int64_t t_start_us = 0, t_end_us = 0;
  bool stopped = false;
};

// Microseconds since the Unix epoch (system clock, like lockstep's own traces).
std::int64_t now_us();

// The trace of one rank of one communicator. Thread-safe: NCCL may start and stop events on
// different threads. Lines are written in seq order (an event stopped early waits for the ones
// started before it) and flushed one by one, so a killed process loses no completed call.
class CommTrace {
 public:
  // Creates <dir>/comm-<hash as 16 hex digits>/ and its rank<r>.trace.jsonl (truncated); rank 0
  // also writes comm.json there. Throws std::runtime_error naming the path when it cannot.
  CommTrace(const std::string& dir, CommInfo info);
  // Writes the events started but never stopped, each with an "error", then closes the file.
  ~CommTrace();
  CommTrace(const CommTrace&) = delete;
  CommTrace& operator=(const CommTrace&) = delete;

  // Numbers the event (in call order) and returns its handle, owned by this trace.
  Pending* start(TaskEvent event, std::int64_t t_us);
  // Marks `pending` done and writes every line that is now in order. `pending` is invalid after.
  void stop(Pending* pending, std::int64_t t_us);

  const std::string& path() const { return path_; }
  const CommInfo& info() const { return info_; }

 private:
  void write_ready(int kind);
  void write_line(const Pending& p, const char* error);

  CommInfo info_;
  std::string path_;
  std::FILE* file_ = nullptr;
  std::mutex mutex_;
  std::int64_t next_seq_[2] = {0, 0};                          // [0] collectives, [1] p2p
  std::map<std::int64_t, std::unique_ptr<Pending>> open_[2];  // by seq: not yet written
};

// "comm-0123456789abcdef": the folder of one communicator's traces.
std::string comm_folder(std::uint64_t hash);

}  // namespace lockstep::nccl_profiler
