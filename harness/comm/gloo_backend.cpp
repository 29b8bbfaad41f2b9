// The one translation unit that talks to LibTorch: c10d's TCPStore and ProcessGroupGloo.
#include <ATen/ATen.h>
#include <ATen/Version.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/api/include/torch/version.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <chrono>
#include <cstdlib>
#include <functional>

#include "harness/comm/c10d_interop.h"
#include "harness/comm/engines.h"
#include "harness/core/error.h"
#include "lockstep/config.h"

namespace lockstep::comm {
namespace {

using WorkPtr = decltype(std::declval<c10d::ProcessGroupGloo&>().barrier());

// Gloo in LibTorch 1.13 dispatches only f32, f64, f16 and integer types.
constexpr bool kGlooHasBF16 = LOCKSTEP_TORCH_VERSION_MAJOR >= 2;

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0));
}

at::ScalarType scalar_type(DType dtype) {
  switch (dtype) {
    case DType::kF32: return at::kFloat;
    case DType::kF64: return at::kDouble;
    case DType::kF16: return at::kHalf;
    case DType::kBF16: return at::kBFloat16;
    case DType::kI8: return at::kChar;
    case DType::kU8: return at::kByte;
    case DType::kI32: return at::kInt;
    case DType::kI64: return at::kLong;
  }
  return at::kFloat;
}

at::Tensor tensor_of(const View& v, std::int64_t offset = 0, std::int64_t count = -1) {
  if (v.device != DeviceType::kCpu) {
    throw CommError("gloo backend: only host buffers are supported, got a " +
                    std::string(to_string(v.device)) + " buffer");
  }
  auto* base = static_cast<unsigned char*>(v.data) + offset * element_size(v.dtype);
  return at::from_blob(base, {count < 0 ? v.count : count}, at::TensorOptions().dtype(scalar_type(v.dtype)));
}

// Data movement of bf16 on 1.13: the same bits as f16, no arithmetic involved.
at::Tensor wire_tensor(const View& v, Call& call, std::int64_t offset = 0, std::int64_t count = -1) {
  at::Tensor t = tensor_of(v, offset, count);
  if (!kGlooHasBF16 && v.dtype == DType::kBF16) {
    call.wire = "bf16 moved as f16 bits (LibTorch 1.13 Gloo has no bf16)";
    return t.view(at::kHalf);
  }
  return t;
}

class C10dStore final : public Store {
 public:
  explicit C10dStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const std::string& value) override {
    try {
      store_->set(key, std::vector<std::uint8_t>(value.begin(), value.end()));
    } catch (const std::exception& e) {
      throw CommError("store set '" + key + "': " + first_line(e.what()));
    }
  }
  std::string get(const std::string& key) override {
    try {
      auto v = store_->get(key);
      return std::string(v.begin(), v.end());
    } catch (const std::exception& e) {
      throw CommError("store get '" + key + "': " + first_line(e.what()));
    }
  }
  const c10::intrusive_ptr<c10d::Store>& raw() const { return store_; }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

class GlooPending final : public Pending {
 public:
  GlooPending(WorkPtr work, std::function<void()> finish)
      : work_(std::move(work)), finish_(std::move(finish)) {}
  void wait() override {
    try {
      work_->wait();
    } catch (const std::exception& e) {
      throw CommError("gloo: " + first_line(e.what()));
    }
    if (finish_) finish_();
  }

 private:
  WorkPtr work_;
  std::function<void()> finish_;
};

class GlooBackend final : public Backend {
 public:
  GlooBackend(c10::intrusive_ptr<c10d::ProcessGroupGloo> pg, int rank, int world_size)
      : pg_(std::move(pg)), rank_(rank), world_size_(world_size) {}

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string name() const override { return "gloo"; }

  std::unique_ptr<Pending> start(Call& call) override {
    try {
      return dispatch(call);
    } catch (const CommError&) {
      throw;
    } catch (const std::exception& e) {
      throw CommError("gloo " + std::string(to_string(call.op)) + ": " + first_line(e.what()));
    }
  }

 private:
  std::unique_ptr<Pending> dispatch(Call& call) {
    switch (call.op) {
      case Op::kAllReduce: return all_reduce(call);
      case Op::kAllGather: {
        std::vector<at::Tensor> in{wire_tensor(call.in, call)};
        std::vector<std::vector<at::Tensor>> out(1);
        for (int r = 0; r < world_size_; ++r) {
          out[0].push_back(wire_tensor(call.out, call, r * call.in.count, call.in.count));
        }
        return pending(pg_->allgather(out, in), {});
      }
      case Op::kAllToAll: {
        at::Tensor in = wire_tensor(call.in, call);
        at::Tensor out = wire_tensor(call.out, call);
        auto send = call.send_counts;
        auto recv = call.recv_counts;
        return pending(pg_->alltoall_base(out, in, recv, send), {});
      }
      case Op::kBroadcast: {
        std::vector<at::Tensor> t{wire_tensor(call.in, call)};
        c10d::BroadcastOptions opts;
        opts.rootRank = call.root;
        opts.rootTensor = 0;
        return pending(pg_->broadcast(t, opts), {});
      }
      case Op::kBarrier: return pending(pg_->barrier(), {});
      case Op::kSend: {
        std::vector<at::Tensor> t{wire_tensor(call.in, call)};
        return pending(pg_->send(t, static_cast<int>(call.peer), static_cast<int>(call.tag)), {});
      }
      case Op::kRecv: {
        std::vector<at::Tensor> t{wire_tensor(call.in, call)};
        return pending(pg_->recv(t, static_cast<int>(call.peer), static_cast<int>(call.tag)), {});
      }
      default: break;  // a program's ops (reduce_scatter, ...): its own engine carries them
    }
    throw CommError("gloo: lockstep's own ranks do not issue " + std::string(to_string(call.op)));
  }

  std::unique_ptr<Pending> all_reduce(Call& call) {
    at::Tensor user = tensor_of(call.in);
    const bool floating = at::isFloatingType(user.scalar_type());
    const bool upcast = !kGlooHasBF16 && call.in.dtype == DType::kBF16;
    const bool avg = call.reduce == ReduceOp::kAvg;
    if (avg && !floating) {
      throw CommError("gloo: avg reduction needs a floating dtype, got " +
                      std::string(to_string(call.in.dtype)));
    }
    at::Tensor wire = upcast ? user.to(at::kFloat) : user;
    if (upcast) call.wire = "bf16 reduced in f32 and rounded once (LibTorch 1.13 Gloo has no bf16)";
    if (avg) call.wire += std::string(call.wire.empty() ? "" : "; ") + "avg as sum / world_size";
    c10d::AllreduceOptions opts;
    switch (call.reduce) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: opts.reduceOp = c10d::ReduceOp::SUM; break;
      case ReduceOp::kMax: opts.reduceOp = c10d::ReduceOp::MAX; break;
      case ReduceOp::kMin: opts.reduceOp = c10d::ReduceOp::MIN; break;
      case ReduceOp::kProduct: opts.reduceOp = c10d::ReduceOp::PRODUCT; break;
      case ReduceOp::kBand: opts.reduceOp = c10d::ReduceOp::BAND; break;
      case ReduceOp::kBor: opts.reduceOp = c10d::ReduceOp::BOR; break;
      case ReduceOp::kBxor: opts.reduceOp = c10d::ReduceOp::BXOR; break;
    }
    std::vector<at::Tensor> t{wire};
    auto work = pg_->allreduce(t, opts);
    const int ws = world_size_;
    std::function<void()> finish;
    if (upcast || avg) {
      finish = [user, wire, upcast, avg, ws]() mutable {
        if (avg) wire.div_(ws);
        if (upcast) user.copy_(wire);
      };
    }
    return pending(std::move(work), std::move(finish));
  }

  static std::unique_ptr<Pending> pending(WorkPtr work, std::function<void()> finish) {
    return std::make_unique<GlooPending>(std::move(work), std::move(finish));
  }

  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
  int rank_;
  int world_size_;
};

}  // namespace

namespace {

#if TORCH_VERSION_MAJOR >= 2
// A listening TCP socket on host:port (port 0: any free one), for TCPStoreOptions::
// masterListenFd, so that the store listens where asked instead of on every interface.
int listen_on(const std::string& host, int port, int& bound_port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (getaddrinfo(host.c_str(), service.c_str(), &hints, &res) != 0 || !res) {
    throw CommError("cannot resolve the store address " + host);
  }
  int fd = -1;
  std::string why = "no address";
  for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 2048) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0) throw CommError("cannot listen on " + host + ":" + service + " for the store: " + why);
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  bound_port = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                          : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return fd;
}
#endif

#if TORCH_VERSION_MAJOR >= 2
bool is_numeric_address(const std::string& host) {
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST;
  addrinfo* res = nullptr;
  const bool numeric = getaddrinfo(host.c_str(), nullptr, &hints, &res) == 0;
  if (res) freeaddrinfo(res);
  return numeric;
}
#endif

c10::intrusive_ptr<c10d::Store> with_token(c10::intrusive_ptr<c10d::Store> store, const std::string& token) {
  if (token.empty()) return store;
  return c10::make_intrusive<c10d::PrefixStore>("lockstep-token-" + token + "/", std::move(store));
}

}  // namespace

std::shared_ptr<Store> connect_store(const StoreOptions& options) {
  if (!options.file.empty()) {
    try {
      auto store = c10::make_intrusive<c10d::FileStore>(options.file, options.world_size);
      store->setTimeout(to_ms(options.timeout_s));
      return std::make_shared<C10dStore>(with_token(std::move(store), options.token));
    } catch (const std::exception& e) {
      throw CommError("cannot open the FileStore " + options.file + ": " + first_line(e.what()));
    }
  }
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(options.port);
  opts.isServer = options.is_server;
  opts.numWorkers = options.world_size;
  opts.waitWorkers = false;
  opts.timeout = to_ms(options.timeout_s);
  try {
#if TORCH_VERSION_MAJOR >= 2
    // Rank 0 of a multi-node run listens only on MASTER_ADDR when it is a numeric address; a
    // host name (which may resolve to 127.0.1.1 on its own node) keeps c10d's wildcard.
    if (options.is_server && is_numeric_address(options.host)) {
      int bound = 0;
      opts.masterListenFd = listen_on(options.host, options.port, bound);
      opts.port = static_cast<std::uint16_t>(bound);
    }
#endif
    return std::make_shared<C10dStore>(with_token(c10::make_intrusive<c10d::TCPStore>(options.host, opts), options.token));
  } catch (const CommError&) {
    throw;
  } catch (const std::exception& e) {
    throw CommError("cannot reach the TCPStore at " + options.host + ":" +
                    std::to_string(options.port) + ": " + first_line(e.what()));
  }
}

StoreServer::StoreServer(int world_size, double timeout_s, const std::string& dir) {
#if TORCH_VERSION_MAJOR >= 2
  c10d::TCPStoreOptions opts;
  opts.isServer = true;
  opts.waitWorkers = false;
  opts.timeout = to_ms(timeout_s);
  opts.numWorkers = world_size;
  try {
    int bound = 0;
    opts.masterListenFd = listen_on("127.0.0.1", 0, bound);
    opts.port = static_cast<std::uint16_t>(bound);
    auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", opts);
    port_ = store->getPort();
    store_ = std::make_shared<C10dStore>(std::move(store));
  } catch (const std::exception& e) {
    throw CommError("cannot host a TCPStore on 127.0.0.1: " + first_line(e.what()));
  }
#else
  (void)world_size;
  (void)timeout_s;
  file_ = dir + "/store";
  std::remove(file_.c_str());  // a FileStore left by an earlier run would replay its keys
  // Created here, readable by this user only: it holds the run's keys (and token) in clear.
  const int fd = ::open(file_.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) throw CommError("cannot create the FileStore " + file_ + ": " + std::strerror(errno));
  ::close(fd);
#endif
}

StoreServer::~StoreServer() {
  if (!file_.empty()) std::remove(file_.c_str());  // the ranks are gone (killed and reaped) by now
}

std::unique_ptr<Backend> make_gloo_backend(std::shared_ptr<Store> store, const std::string& prefix,
                                           int rank, int world_size, double timeout_s,
                                           const std::string& host) {
  auto* c10d_store = dynamic_cast<C10dStore*>(store.get());
  LOCKSTEP_CHECK(c10d_store != nullptr, "gloo backend needs a c10d store");
  auto opts = c10d::ProcessGroupGloo::Options::create(to_ms(timeout_s));
  try {
    if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
      opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    } else if (!host.empty()) {
      opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(host));
    } else {
      opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
    opts->threads = 2;
    auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>(prefix, c10d_store->raw()), rank, world_size, opts);
    return std::make_unique<GlooBackend>(std::move(pg), rank, world_size);
  } catch (const std::exception& e) {
    throw CommError("gloo process group '" + prefix + "' (rank " + std::to_string(rank) + " of " +
                    std::to_string(world_size) + "): " + first_line(e.what()));
  }
}

std::shared_ptr<Store> wrap_c10d_store(c10::intrusive_ptr<c10d::Store> store) {
  return std::make_shared<C10dStore>(std::move(store));
}

std::string torch_version() { return LOCKSTEP_TORCH_VERSION; }

std::string loaded_torch_mismatch() {
  // at::show_config() exists with this signature in every LibTorch line, and its build settings
  // name the library's own version ("TORCH_VERSION=1.13.0,").
  const std::string config = at::show_config();
  const std::string key = "TORCH_VERSION=";
  const auto at = config.find(key);
  if (at == std::string::npos) return "";
  const auto end = config.find_first_of(", \n", at + key.size());
  const std::string loaded = config.substr(at + key.size(), end - at - key.size());
  if (loaded == LOCKSTEP_TORCH_VERSION) return "";
  std::string from = "an unknown file";
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&at::show_config), &info) != 0 && info.dli_fname) from = info.dli_fname;
  const std::string dir = LOCKSTEP_TORCH_LIBDIR;
  return "this lockstep was built against LibTorch " LOCKSTEP_TORCH_VERSION " in " + dir +
         ", but the dynamic loader gave it LibTorch " + loaded + " from " + from + ". " +
         (::access(dir.c_str(), R_OK | X_OK) != 0
              ? dir + " is not readable by this user (uid " + std::to_string(::getuid()) +
                    "): run lockstep as a user who can read it, or build it with LOCKSTEP_DEPS set to a folder every user can read"
              : std::string("LD_LIBRARY_PATH or the system's library path put another LibTorch first: unset it, or rebuild lockstep against that LibTorch"));
}

}  // namespace lockstep::comm
