// The NCCL profiler plugin: exports ncclProfiler_v5 (NCCL 2.28, which looks it up first)
// and ncclProfiler_v4 (NCCL 2.27) from libnccl-profiler-lockstep.so. Each communicator's init
// opens a CommTrace under $LOCKSTEP_NCCL_TRACE_DIR; without that variable the plugin activates
// no events. Nothing may throw across this C ABI: failures are logged through NCCL's logger
// and turned into result codes.
#include <cstdlib>
#include <exception>

#include "harness/core/env.h"  // the variable names only (constants; nothing to link)
#include "harness/nccl_profiler/nccl_abi.h"
#include "harness/nccl_profiler/trace_writer.h"

namespace lockstep::nccl_profiler {
namespace {

constexpr const char* kPluginName = "lockstep";
constexpr const char* kTraceDirVar = env::kNcclTraceDir;

std::string str(const char* s) { return s ? s : ""; }

abi::Result init(void** context, std::uint64_t comm_hash, int* mask, const char* comm_name, int n_nodes, int n_ranks,
                 int rank, abi::Logger log) {
  *context = nullptr;
  const char* dir = std::getenv(kTraceDirVar);
  if (dir == nullptr || *dir == '\0') {
    *mask = 0;
    return abi::kSuccess;
  }
  try {
    *context = new CommTrace(dir, CommInfo{comm_hash, str(comm_name), rank, n_ranks, n_nodes});
    *mask = static_cast<int>(abi::kColl | abi::kP2p);
    return abi::kSuccess;
  } catch (const std::exception& e) {
    if (log) log(abi::kLogWarn, ~0ul, __FILE__, __LINE__, "lockstep profiler: %s", e.what());
    return abi::kSystemError;
  }
}

// Collective and p2p task events become trace lines; every other event gets no handle.
template <typename Descr>
abi::Result start_event(void* context, void** handle, Descr* descr) {
  *handle = nullptr;
  if (context == nullptr || descr == nullptr) return abi::kSuccess;
  try {
    TaskEvent e;
    if (descr->type == abi::kColl) {
      e.func = str(descr->coll.func);
      e.datatype = str(descr->coll.datatype);
      e.count = descr->coll.count;
      e.root = descr->coll.root;
      e.nccl_seq = descr->coll.seq_number;
      e.algo = str(descr->coll.algo);
      e.proto = str(descr->coll.proto);
    } else if (descr->type == abi::kP2p) {
      e.p2p = true;
      e.func = str(descr->p2p.func);
      e.datatype = str(descr->p2p.datatype);
      e.count = descr->p2p.count;
      e.peer = descr->p2p.peer;
    } else {
      return abi::kSuccess;
    }
    *handle = static_cast<CommTrace*>(context)->start(std::move(e), now_us());
    return abi::kSuccess;
  } catch (const std::exception&) {
    return abi::kInternalError;
  }
}

abi::Result stop_event(void* handle) {
  if (handle == nullptr) return abi::kSuccess;
  auto* p = static_cast<Pending*>(handle);
  try {
    p->owner->stop(p, now_us());
    return abi::kSuccess;
  } catch (const std::exception&) {
    return abi::kInternalError;
  }
}

abi::Result record_event_state(void*, abi::EventState, abi::EventStateArgs*) { return abi::kSuccess; }

abi::Result finalize(void* context) {
  delete static_cast<CommTrace*>(context);
  return abi::kSuccess;
}

abi::Result init_v4(void** context, int* mask, const char* comm_name, std::uint64_t comm_hash, int n_nodes, int n_ranks,
                    int rank, abi::Logger log) {
  return init(context, comm_hash, mask, comm_name, n_nodes, n_ranks, rank, log);
}

}  // namespace
}  // namespace lockstep::nccl_profiler

namespace np = lockstep::nccl_profiler;

extern "C" {
__attribute__((visibility("default"))) np::abi::ProfilerV5 ncclProfiler_v5 = {
    np::kPluginName, np::init, np::start_event<np::abi::EventDescrV5>, np::stop_event, np::record_event_state,
    np::finalize};
__attribute__((visibility("default"))) np::abi::ProfilerV4 ncclProfiler_v4 = {
    np::kPluginName, np::init_v4, np::start_event<np::abi::EventDescrV4>, np::stop_event, np::record_event_state,
    np::finalize};
}
