#include "reference/common/device.h"

#include <atomic>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <utility>

#include "lockstep/config.h"

#if LOCKSTEP_HAVE_CUDA
#include <cuda_runtime.h>

#include "reference/common/cuda_check.h"
#endif

namespace lockstep::ref {

std::string to_string(IdType type) { return type == IdType::kI32 ? "int32" : "int64"; }
std::string to_string(Device device) {
  return device.is_cuda() ? "cuda:" + std::to_string(device.index) : "cpu";
}

namespace {
std::atomic<bool> g_cuda_initialised{false};
}  // namespace

void mark_cuda_initialised() noexcept { g_cuda_initialised.store(true); }
bool cuda_initialised() noexcept { return g_cuda_initialised.load(); }

#if LOCKSTEP_HAVE_CUDA
int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  // Counting initialises the driver, and that alone breaks CUDA in a forked child: after a
  // parent's cudaGetDeviceCount, a child's cudaMalloc fails with "initialization error" (seen
  // on an H100 with CUDA 13.0; README "GPU runs").
  if (n > 0) mark_cuda_initialised();
  return n;
}
void cuda_set_device(int device) {
  mark_cuda_initialised();
  LOCKSTEP_CUDA_CHECK(cudaSetDevice(device));
}
void* cuda_alloc(std::size_t bytes) {
  mark_cuda_initialised();
  void* p = nullptr;
  LOCKSTEP_CUDA_CHECK(cudaMalloc(&p, bytes == 0 ? 1 : bytes));
  return p;
}
void cuda_free(void* p) noexcept {
  if (p) cudaFree(p);
}
void cuda_copy_to_device(void* dst, const void* src, std::size_t bytes) {
  mark_cuda_initialised();
  LOCKSTEP_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
void cuda_copy_to_host(void* dst, const void* src, std::size_t bytes) {
  mark_cuda_initialised();
  LOCKSTEP_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
void cuda_copy_on_device(void* dst, const void* src, std::size_t bytes) {
  mark_cuda_initialised();
  LOCKSTEP_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
}
#else
namespace {
[[noreturn]] void no_cuda() { throw std::runtime_error("this build of lockstep has no CUDA"); }
}  // namespace
int cuda_device_count() { return 0; }
void cuda_set_device(int) { no_cuda(); }
void* cuda_alloc(std::size_t) { no_cuda(); }
void cuda_free(void*) noexcept {}
void cuda_copy_to_device(void*, const void*, std::size_t) { no_cuda(); }
void cuda_copy_to_host(void*, const void*, std::size_t) { no_cuda(); }
void cuda_copy_on_device(void*, const void*, std::size_t) { no_cuda(); }
#endif

CudaBuffer cuda_upload(const void* host, std::size_t bytes) {
  CudaBuffer b(bytes);
  if (bytes > 0) cuda_copy_to_device(b.data(), host, bytes);
  return b;
}

std::string cuda_device_unavailable(Device device) {
  if (!device.is_cuda()) return "";
  const int count = cuda_device_count();
  if (device.index >= 0 && device.index < count) return "";
  return count == 0 ? "no CUDA device is visible"
                    : "only " + std::to_string(count) + " CUDA device(s) are visible";
}

const std::vector<const void*>& DeviceMirror::on(int device,
                                                 const std::vector<Array>& arrays) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = copies_.find(device);
  if (it != copies_.end()) return it->second.pointers;
  cuda_set_device(device);
  Copies c;
  for (const Array& a : arrays) {
    c.buffers.emplace_back(a.bytes);
    if (a.bytes > 0) cuda_copy_to_device(c.buffers.back().data(), a.data, a.bytes);
    c.pointers.push_back(c.buffers.back().data());
  }
  return copies_.emplace(device, std::move(c)).first->second.pointers;
}

IdArray::IdArray(IdType type, std::int64_t size, Device device)
    : type_(type), size_(size), device_(device) {
  const std::size_t bytes = static_cast<std::size_t>(size) * id_size(type);
  if (device.is_cuda()) {
    cuda_set_device(device.index);
    cuda_ = CudaBuffer(bytes);
  } else {
    host_.reset(new unsigned char[bytes == 0 ? 1 : bytes]);
  }
}

IdArray IdArray::from_host(const std::vector<std::int64_t>& values, IdType type, Device device) {
  const auto n = static_cast<std::int64_t>(values.size());
  std::vector<unsigned char> bytes(static_cast<std::size_t>(n) * id_size(type));
  if (type == IdType::kI64) {
    std::memcpy(bytes.data(), values.data(), bytes.size());
  } else {
    auto* out = reinterpret_cast<std::int32_t*>(bytes.data());
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t v = values[static_cast<std::size_t>(i)];
      if (v < std::numeric_limits<std::int32_t>::min() || v > std::numeric_limits<std::int32_t>::max()) {
        throw std::out_of_range("id " + std::to_string(v) + " at position " + std::to_string(i) +
                                " does not fit int32");
      }
      out[i] = static_cast<std::int32_t>(v);
    }
  }
  IdArray a(type, n, device);
  if (device.is_cuda()) {
    cuda_copy_to_device(a.data(), bytes.data(), bytes.size());
  } else {
    std::memcpy(a.data(), bytes.data(), bytes.size());
  }
  return a;
}

std::vector<std::int64_t> to_host_i64(const IdSpan& ids) {
  const std::size_t bytes = static_cast<std::size_t>(ids.size) * id_size(ids.type);
  std::vector<unsigned char> host;
  const void* src = ids.data;
  if (ids.device.is_cuda()) {
    host.resize(bytes);
    cuda_copy_to_host(host.data(), ids.data, bytes);
    src = host.data();
  }
  std::vector<std::int64_t> out(static_cast<std::size_t>(ids.size));
  if (ids.type == IdType::kI64) {
    std::memcpy(out.data(), src, bytes);
  } else {
    const auto* in = static_cast<const std::int32_t*>(src);
    for (std::int64_t i = 0; i < ids.size; ++i) out[static_cast<std::size_t>(i)] = in[i];
  }
  return out;
}

std::vector<std::int64_t> IdArray::to_host() const { return to_host_i64(span()); }

}  // namespace lockstep::ref
