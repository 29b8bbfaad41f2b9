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
};

// Connects to, or hosts, a c10d TCPStore. Throws CommError when it cannot.
std::shared_ptr<Store> connect_store(const StoreOptions& options);

// Hosts a c10d TCPStore on an OS-chosen free loopback port, for the launcher: runs started in
// parallel on one machine never collide. The server lives as long as this object.
class StoreServer {
 public:
  StoreServer(int world_size, double timeout_s);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;
  int port() const { return port_; }

 private:
  std::shared_ptr<Store> store_;
  int port_ = 0;
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

}  // namespace lockstep::comm
