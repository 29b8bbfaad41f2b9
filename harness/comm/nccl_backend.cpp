// The NCCL backend: NCCL's own API on CUDA buffers, one communicator per rank, the unique id
// shared through the run's TCPStore. Compiled whenever NCCL is present (LOCKSTEP_HAVE_NCCL).
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "harness/comm/engines.h"
#include "harness/core/error.h"
#include "reference/common/cuda_check.h"
#include "reference/common/device.h"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 18, 0)
#error "lockstep's NCCL backend needs NCCL >= 2.18"
#endif

// Each NCCL call goes through this, each CUDA call through LOCKSTEP_CUDA_CHECK
// (reference/common/cuda_check.h): the library's own message in an exception.
#define LOCKSTEP_NCCL_CHECK(expr)                                                         \
  do {                                                                                    \
    const ncclResult_t res_ = (expr);                                                     \
    if (res_ != ncclSuccess && res_ != ncclInProgress) {                                  \
      throw ::lockstep::comm::CommError(std::string("nccl: ") + #expr + ": " +            \
                                        ncclGetErrorString(res_));                        \
    }                                                                                     \
  } while (0)

namespace lockstep::comm {
namespace {

ncclDataType_t nccl_dtype(DType dtype) {
  switch (dtype) {
    case DType::kF32: return ncclFloat32;
    case DType::kF64: return ncclFloat64;
    case DType::kF16: return ncclFloat16;
    case DType::kBF16: return ncclBfloat16;
    case DType::kI8: return ncclInt8;
    case DType::kU8: return ncclUint8;
    case DType::kI32: return ncclInt32;
    case DType::kI64: return ncclInt64;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kAvg: return ncclAvg;
    case ReduceOp::kProduct: return ncclProd;
    case ReduceOp::kBand:
    case ReduceOp::kBor:
    case ReduceOp::kBxor: throw CommError("nccl: NCCL has no bitwise reduce op, got " + std::string(to_string(op)));
  }
  return ncclSum;
}

void require_device(const View& v, const char* what) {
  if (v.count > 0 && v.device != DeviceType::kCuda) {
    throw CommError(std::string("nccl: ") + what + " must be a CUDA buffer, got a host buffer");
  }
}

// Completion of one enqueued operation, polled so that a hang becomes a CommError after the
// timeout (the communicator is aborted) instead of blocking forever.
class NcclPending final : public Pending {
 public:
  NcclPending(cudaEvent_t event, ncclComm_t comm, double timeout_s)
      : event_(event), comm_(comm), timeout_s_(timeout_s) {}
  ~NcclPending() override { cudaEventDestroy(event_); }
  void wait() override {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
    for (;;) {
      const cudaError_t q = cudaEventQuery(event_);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) throw CommError(std::string("cuda: ") + cudaGetErrorString(q));
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        throw CommError(std::string("nccl async error: ") + ncclGetErrorString(async));
      }
      if (std::chrono::steady_clock::now() > deadline) {
        ncclCommAbort(comm_);
        throw CommError("nccl: operation did not complete within " + std::to_string(timeout_s_) + " s");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

 private:
  cudaEvent_t event_;
  ncclComm_t comm_;
  double timeout_s_;
};

class NcclBackend final : public Backend {
 public:
  NcclBackend(ncclComm_t comm, cudaStream_t stream, int rank, int world_size, double timeout_s)
      : comm_(comm), stream_(stream), rank_(rank), world_size_(world_size), timeout_s_(timeout_s) {
    LOCKSTEP_CUDA_CHECK(cudaEventCreateWithFlags(&staged_, cudaEventDisableTiming));
  }
  ~NcclBackend() override {
    ncclCommDestroy(comm_);
    cudaEventDestroy(staged_);
    cudaStreamDestroy(stream_);
  }
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string name() const override { return "nccl"; }

  std::unique_ptr<Pending> start(Call& call) override {
    const std::size_t esize = element_size(call.in.dtype);
    // The buffers were filled through the legacy default stream (cudaMemcpy, whose DMA from
    // pageable memory may still be in flight when it returns), which a non-blocking stream
    // does not wait for: order the collective after that work.
    LOCKSTEP_CUDA_CHECK(cudaEventRecord(staged_, cudaStreamLegacy));
    LOCKSTEP_CUDA_CHECK(cudaStreamWaitEvent(stream_, staged_, 0));
    switch (call.op) {
      case Op::kAllReduce:
        require_device(call.in, "all_reduce buffer");
        LOCKSTEP_NCCL_CHECK(ncclAllReduce(call.in.data, call.in.data, static_cast<size_t>(call.in.count),
                                          nccl_dtype(call.in.dtype), nccl_op(call.reduce), comm_, stream_));
        break;
      case Op::kAllGather:
        require_device(call.in, "all_gather input");
        require_device(call.out, "all_gather output");
        LOCKSTEP_NCCL_CHECK(ncclAllGather(call.in.data, call.out.data, static_cast<size_t>(call.in.count),
                                          nccl_dtype(call.in.dtype), comm_, stream_));
        break;
      case Op::kAllToAll: {
        require_device(call.in, "all_to_all input");
        require_device(call.out, "all_to_all output");
        auto* in = static_cast<char*>(call.in.data);
        auto* out = static_cast<char*>(call.out.data);
        LOCKSTEP_NCCL_CHECK(ncclGroupStart());
        for (int peer = 0; peer < world_size_; ++peer) {
          const auto s = static_cast<size_t>(call.send_counts[static_cast<std::size_t>(peer)]);
          const auto r = static_cast<size_t>(call.recv_counts[static_cast<std::size_t>(peer)]);
          if (s) LOCKSTEP_NCCL_CHECK(ncclSend(in, s, nccl_dtype(call.in.dtype), peer, comm_, stream_));
          if (r) LOCKSTEP_NCCL_CHECK(ncclRecv(out, r, nccl_dtype(call.in.dtype), peer, comm_, stream_));
          in += s * esize;
          out += r * esize;
        }
        LOCKSTEP_NCCL_CHECK(ncclGroupEnd());
        break;
      }
      case Op::kBroadcast:
        require_device(call.in, "broadcast buffer");
        LOCKSTEP_NCCL_CHECK(ncclBroadcast(call.in.data, call.in.data, static_cast<size_t>(call.in.count),
                                          nccl_dtype(call.in.dtype), static_cast<int>(call.root), comm_, stream_));
        break;
      case Op::kBarrier: {
        if (!barrier_) barrier_ = std::make_unique<CudaScratch>();
        LOCKSTEP_NCCL_CHECK(ncclAllReduce(barrier_->p, barrier_->p, 1, ncclFloat32, ncclSum, comm_, stream_));
        break;
      }
      case Op::kSend:
        require_device(call.in, "send buffer");
        LOCKSTEP_NCCL_CHECK(ncclSend(call.in.data, static_cast<size_t>(call.in.count),
                                     nccl_dtype(call.in.dtype), static_cast<int>(call.peer), comm_, stream_));
        break;
      case Op::kRecv:
        require_device(call.in, "recv buffer");
        LOCKSTEP_NCCL_CHECK(ncclRecv(call.in.data, static_cast<size_t>(call.in.count),
                                     nccl_dtype(call.in.dtype), static_cast<int>(call.peer), comm_, stream_));
        break;
      default:  // a program's ops (reduce_scatter, ...): its own engine carries them
        throw CommError("nccl: lockstep's own ranks do not issue " + std::string(to_string(call.op)));
    }
    cudaEvent_t event;
    LOCKSTEP_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    LOCKSTEP_CUDA_CHECK(cudaEventRecord(event, stream_));
    return std::make_unique<NcclPending>(event, comm_, timeout_s_);
  }

 private:
  struct CudaScratch {
    CudaScratch() { LOCKSTEP_CUDA_CHECK(cudaMalloc(&p, sizeof(float))); }
    ~CudaScratch() { cudaFree(p); }
    void* p = nullptr;
  };
  ncclComm_t comm_;
  cudaStream_t stream_;
  cudaEvent_t staged_ = nullptr;
  int rank_;
  int world_size_;
  double timeout_s_;
  std::unique_ptr<CudaScratch> barrier_;
};

}  // namespace

std::unique_ptr<Backend> make_nccl_backend(std::shared_ptr<Store> store, int rank, int world_size,
                                           int device_index, double timeout_s) {
  ref::mark_cuda_initialised();  // no fork-based worker may start in this process from now on
  LOCKSTEP_CUDA_CHECK(cudaSetDevice(device_index));
  ncclUniqueId id;
  if (rank == 0) {
    LOCKSTEP_NCCL_CHECK(ncclGetUniqueId(&id));
    store->set("nccl/unique_id", std::string(reinterpret_cast<const char*>(&id), sizeof id));
  } else {
    const std::string bytes = store->get("nccl/unique_id");
    LOCKSTEP_CHECK(bytes.size() == sizeof id, "nccl unique id has ", bytes.size(), " bytes");
    std::memcpy(&id, bytes.data(), sizeof id);
  }
  ncclComm_t comm;
  LOCKSTEP_NCCL_CHECK(ncclCommInitRank(&comm, world_size, id, rank));
  cudaStream_t stream;
  LOCKSTEP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return std::make_unique<NcclBackend>(comm, stream, rank, world_size, timeout_s);
}

}  // namespace lockstep::comm
