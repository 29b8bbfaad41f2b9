#pragma once
// The parts of NCCL's profiler plugin ABI that lockstep's plugin uses, declared here because
// NCCL does not install its profiler headers. Written from NCCL v2.28.9-1
// (github.com/NVIDIA/nccl, tag v2.28.9-1): src/include/plugin/profiler/profiler_v5.h,
// profiler_v4.h, ext-profiler/example/nccl/profiler.h (event type bits, states) and common.h
// (logger). NCCL 2.28 dlsyms "ncclProfiler_v5" first, then v4, v3, v2, v1
// (src/plugin/profiler.cc). Only the layout is mirrored; names are lockstep's own. The
// static_asserts at the end pin the offsets for LP64 (x86_64, aarch64).
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace lockstep::nccl_profiler::abi {

// ncclResult_t: an int-sized enum in nccl.h.
enum Result : int { kSuccess = 0, kSystemError = 2, kInternalError = 3, kInvalidArgument = 4 };

// ncclProfileGroup ... ncclProfileKernelLaunch: the event type bits, also the activation mask.
enum EventType : std::uint64_t {
  kGroup = 1u << 0,
  kColl = 1u << 1,         // a collective task (descriptor member `coll`)
  kP2p = 1u << 2,          // a send or recv task (descriptor member `p2p`)
  kProxyOp = 1u << 3,
  kProxyStep = 1u << 4,
  kProxyCtrl = 1u << 5,
  kKernelCh = 1u << 6,
  kNetPlugin = 1u << 7,
  kGroupApi = 1u << 8,     // v5 only, like the three below
  kCollApi = 1u << 9,
  kP2pApi = 1u << 10,
  kKernelLaunch = 1u << 11,
};

// ncclDebugLogLevel (common.h); NCCL_LOG_WARN is 2.
enum LogLevel : int { kLogNone = 0, kLogVersion = 1, kLogWarn = 2, kLogInfo = 3 };
using Logger = void (*)(LogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...);

// ncclProfilerEventState_t: an int-sized enum; the plugin ignores states.
using EventState = int;

// The `coll` member of the descriptor union (v4 ends at proto; v5 adds parentGroup).
struct CollV4 {
  std::uint64_t seq_number;  // NCCL's per-communicator, per-function counter
  const char* func;          // ncclFuncToString: "AllReduce", "AlltoAll", ...
  const void* send_buff;
  void* recv_buff;
  std::size_t count;         // elements; all_gather: per rank sent, reduce_scatter: per rank received
  int root;
  const char* datatype;      // ncclDatatypeToString: "ncclFloat32", ...
  std::uint8_t n_channels;
  std::uint8_t n_warps;
  const char* algo;
  const char* proto;
};
struct CollV5 {
  std::uint64_t seq_number;
  const char* func;
  const void* send_buff;
  void* recv_buff;
  std::size_t count;
  int root;
  const char* datatype;
  std::uint8_t n_channels;
  std::uint8_t n_warps;
  const char* algo;
  const char* proto;
  void* parent_group;  // the group event, which v4 passed as parentObj
};

struct P2pV4 {
  const char* func;  // "Send" or "Recv"
  void* buff;
  const char* datatype;
  std::size_t count;
  int peer;
  std::uint8_t n_channels;
};
struct P2pV5 {
  const char* func;
  void* buff;
  const char* datatype;
  std::size_t count;
  int peer;
  std::uint8_t n_channels;
  void* parent_group;
};

// Members of the union the plugin does not read, declared only so that its size is NCCL's.
struct ProxyOp {
  pid_t pid;
  std::uint8_t channel_id;
  int peer, n_steps, chunk_size, is_send;
};
struct KernelCh {
  std::uint8_t channel_id;
  std::uint64_t p_timer;
};
struct NetPlugin {
  std::int64_t id;
  void* data;
};
struct CollApi {
  const char* func;
  std::size_t count;
  const char* datatype;
  int root;
  void* stream;
  bool graph_captured;
};

// ncclProfilerEventDescr_v5_t.
struct EventDescrV5 {
  std::uint64_t type;  // one EventType bit
  void* parent_obj;
  int rank;            // the rank in the event's communicator
  union {
    CollApi coll_api;
    CollV5 coll;
    P2pV5 p2p;
    ProxyOp proxy_op;
    KernelCh kernel_ch;
    NetPlugin net_plugin;
  };
};

// ncclProfilerEventDescr_v4_t: `type` is one byte, and there are no *Api events.
struct EventDescrV4 {
  std::uint8_t type;
  void* parent_obj;
  int rank;
  union {
    CollV4 coll;
    P2pV4 p2p;
    ProxyOp proxy_op;
    KernelCh kernel_ch;
    NetPlugin net_plugin;
  };
};

// ncclProfilerEventStateArgs_v4_t / _v5_t: a union of at most 8 bytes the plugin never reads.
union EventStateArgs {
  std::size_t trans_size;
  int appended_proxy_ops;
  void* data;
  std::uint64_t p_timer;
};

// ncclProfiler_v5_t: init receives the communicator hash second.
struct ProfilerV5 {
  const char* name;
  Result (*init)(void** context, std::uint64_t comm_hash, int* activation_mask, const char* comm_name, int n_nodes,
                 int n_ranks, int rank, Logger log);
  Result (*start_event)(void* context, void** handle, EventDescrV5* descr);
  Result (*stop_event)(void* handle);
  Result (*record_event_state)(void* handle, EventState state, EventStateArgs* args);
  Result (*finalize)(void* context);
};

// ncclProfiler_v4_t: init receives the communicator hash after its name.
struct ProfilerV4 {
  const char* name;
  Result (*init)(void** context, int* activation_mask, const char* comm_name, std::uint64_t comm_hash, int n_nodes,
                 int n_ranks, int rank, Logger log);
  Result (*start_event)(void* context, void** handle, EventDescrV4* descr);
  Result (*stop_event)(void* handle);
  Result (*record_event_state)(void* handle, EventState state, EventStateArgs* args);
  Result (*finalize)(void* context);
};

// Offsets computed by hand from the NCCL declarations above (LP64: pointers and size_t are 8
// bytes, int 4); a mismatch here means the plugin would misread NCCL's descriptors.
static_assert(sizeof(Result) == 4 && sizeof(EventState) == 4);
static_assert(offsetof(EventDescrV5, parent_obj) == 8 && offsetof(EventDescrV5, rank) == 16);
static_assert(offsetof(EventDescrV5, coll) == 24);
static_assert(offsetof(CollV5, seq_number) == 0 && offsetof(CollV5, func) == 8 && offsetof(CollV5, send_buff) == 16 &&
              offsetof(CollV5, recv_buff) == 24 && offsetof(CollV5, count) == 32 && offsetof(CollV5, root) == 40 &&
              offsetof(CollV5, datatype) == 48 && offsetof(CollV5, n_channels) == 56 && offsetof(CollV5, n_warps) == 57 &&
              offsetof(CollV5, algo) == 64 && offsetof(CollV5, proto) == 72 && offsetof(CollV5, parent_group) == 80);
static_assert(sizeof(CollV4) == 80 && sizeof(CollV5) == 88);
static_assert(offsetof(P2pV5, func) == 0 && offsetof(P2pV5, buff) == 8 && offsetof(P2pV5, datatype) == 16 &&
              offsetof(P2pV5, count) == 24 && offsetof(P2pV5, peer) == 32 && offsetof(P2pV5, n_channels) == 36 &&
              offsetof(P2pV5, parent_group) == 40);
static_assert(sizeof(ProxyOp) == 24 && sizeof(KernelCh) == 16 && sizeof(CollApi) == 48);
static_assert(sizeof(EventDescrV5) == 24 + 88);  // the union is as large as `coll`
static_assert(offsetof(EventDescrV4, parent_obj) == 8 && offsetof(EventDescrV4, rank) == 16 &&
              offsetof(EventDescrV4, coll) == 24 && sizeof(EventDescrV4) == 24 + 80);
static_assert(sizeof(EventStateArgs) == 8);
static_assert(offsetof(ProfilerV5, name) == 0 && offsetof(ProfilerV5, init) == 8 &&
              offsetof(ProfilerV5, start_event) == 16 && offsetof(ProfilerV5, stop_event) == 24 &&
              offsetof(ProfilerV5, record_event_state) == 32 && offsetof(ProfilerV5, finalize) == 40 &&
              sizeof(ProfilerV5) == 48 && sizeof(ProfilerV4) == 48);

}  // namespace lockstep::nccl_profiler::abi
