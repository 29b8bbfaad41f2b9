#pragma once
// Factories for the real engines. Torch-free declarations; the c10d code lives in
// gloo_backend.cpp (the one LibTorch translation unit) and the NCCL code in nccl_backend.cpp.
#include <memory>
#include <string>

#include "harness/comm/backend.h"

namespace lockstep::comm {

struct StoreOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  bool is_server = false;
  int world_size = 1;
  double timeout_s = 60;
  // A c10d FileStore at this path instead of a TCPStore (local runs on LibTorch 1.13, whose
  // TCPStore server cannot be kept off the network; see StoreServer).
  std::string file;
  // LOCKSTEP_STORE_TOKEN: every key goes under this prefix (a c10d PrefixStore), so a process
  // that reaches the store without the token cannot join or read this run's rendezvous.
  std::string token;
};

// Connects to, or hosts, a c10d TCPStore (or opens the FileStore). Throws CommError when it
// cannot. A server on LibTorch 2.x listens on `host` only (bound by lockstep, handed over as
// masterListenFd); LibTorch 1.13's TCPStore always listens on every interface.
std::shared_ptr<Store> connect_store(const StoreOptions& options);

// The store of a local run, for the launcher; it lives as long as this object. On LibTorch 2.x
// a c10d TCPStore listening on 127.0.0.1 only, on an OS-chosen free port (runs started in
// parallel never collide). LibTorch 1.13's TCPStore server binds the wildcard address with no
// way to restrict it, so there the ranks share a c10d FileStore in `dir` instead: no socket at
// all. Either way nothing on the network can reach a local run's rendezvous.
class StoreServer {
 public:
  StoreServer(int world_size, double timeout_s, const std::string& dir);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;
  int port() const { return port_; }          // 0 with a FileStore
  const std::string& file() const { return file_; }  // "" with a TCPStore

 private:
  std::shared_ptr<Store> store_;
  int port_ = 0;
  std::string file_;
};

// A c10d ProcessGroupGloo over `store`, its keys under `prefix` (several groups may share a
// store). Host buffers only. bf16 on LibTorch 1.13 (whose Gloo lacks it) is carried as f16
// bits for data movement and reduced in f32 (rounded back once); the call records this in
// Call::wire. Gloo has no avg: it is a sum divided by world_size, also recorded in Call::wire.
// `host` is the address Gloo binds to; "" lets Gloo pick (GLOO_SOCKET_IFNAME is honoured).
std::unique_ptr<Backend> make_gloo_backend(std::shared_ptr<Store> store, const std::string& prefix,
                                           int rank, int world_size, double timeout_s,
                                           const std::string& host);

// The NCCL backend (CUDA buffers), its unique id shared through `store`. Throws Error when
// this build has no NCCL or no CUDA device is visible.
std::unique_ptr<Backend> make_nccl_backend(std::shared_ptr<Store> store, int rank, int world_size,
                                           int device_index, double timeout_s);

// Number of CUDA devices this process can use; 0 on a build without CUDA or with no GPU.
int cuda_device_count();

// "1.13.1" / "2.11.0+cu130": the LibTorch this binary was built against.
std::string torch_version();

// "" when the LibTorch the dynamic loader gave this process is the version this binary was built
// against; else what was loaded, from where, and what to do. A mismatch happens when the build's
// LibTorch folder (LOCKSTEP_TORCH_LIBDIR, e.g. under root's home) is unreadable to the user, so
// the loader falls back to another libtorch on the system path: the process would run on a
// foreign ABI and fail later in unrelated ways (a TCPStore that "cannot bind", an abort).
std::string loaded_torch_mismatch();

}  // namespace lockstep::comm
