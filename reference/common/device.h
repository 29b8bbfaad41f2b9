#pragma once
// Devices and id arrays for the reference. Ids are int32 or int64 and live on the host or a
// CUDA device; every reference operation returns its result on its input's device. On a build
// without the CUDA toolkit every CUDA function throws std::runtime_error and
// cuda_device_count() returns 0.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace lockstep::ref {

enum class IdType : std::uint8_t { kI32, kI64 };
enum class DeviceKind : std::uint8_t { kCpu, kCuda };

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;
  bool is_cuda() const { return kind == DeviceKind::kCuda; }
  bool operator==(const Device&) const = default;
};

std::string to_string(IdType type);     // "int32" / "int64"
std::string to_string(Device device);   // "cpu" / "cuda:0"
inline std::size_t id_size(IdType t) { return t == IdType::kI32 ? 4 : 8; }

// Whether this process has touched the CUDA runtime (set by every helper below that does, and
// by callers that use CUDA directly). Fork-based worker processes refuse to start once it is
// true: a child must never use a CUDA context created before the fork.
void mark_cuda_initialised() noexcept;
bool cuda_initialised() noexcept;

// CUDA runtime helpers (no kernels).
int cuda_device_count();
void cuda_set_device(int device);
void* cuda_alloc(std::size_t bytes);
void cuda_free(void* p) noexcept;
void cuda_copy_to_device(void* dst, const void* src, std::size_t bytes);
void cuda_copy_to_host(void* dst, const void* src, std::size_t bytes);
void cuda_copy_on_device(void* dst, const void* src, std::size_t bytes);  // within one device

// Owns one device allocation. Movable, not copyable.
class CudaBuffer {
 public:
  CudaBuffer() = default;
  explicit CudaBuffer(std::size_t bytes) : data_(cuda_alloc(bytes)), bytes_(bytes) {}
  ~CudaBuffer() { cuda_free(data_); }
  CudaBuffer(CudaBuffer&& o) noexcept : data_(o.data_), bytes_(o.bytes_) { o.data_ = nullptr; }
  CudaBuffer& operator=(CudaBuffer&& o) noexcept {
    if (this != &o) {
      cuda_free(data_);
      data_ = o.data_;
      bytes_ = o.bytes_;
      o.data_ = nullptr;
    }
    return *this;
  }
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// A copy of `bytes` of host memory in a new allocation on the current CUDA device.
CudaBuffer cuda_upload(const void* host, std::size_t bytes);
template <class T>
CudaBuffer cuda_upload(const std::vector<T>& host) {
  return cuda_upload(host.data(), host.size() * sizeof(T));
}

// Why `device` cannot hold data here: "no CUDA device is visible" or "only N CUDA device(s)
// are visible" for a CUDA device this process cannot see; "" for the host or a visible one.
std::string cuda_device_unavailable(Device device);

// Copies of host arrays in the memory of each CUDA device that asks for them (lookup tables
// for kernels), made on a device's first request and kept until destruction. Thread-safe.
class DeviceMirror {
 public:
  struct Array {
    const void* data;
    std::size_t bytes;
  };
  // Device pointers to copies of `arrays` on CUDA device `device`, in their order; copies
  // them on the first call for that device (later calls must pass the same contents).
  const std::vector<const void*>& on(int device, const std::vector<Array>& arrays) const;

 private:
  struct Copies {
    std::vector<CudaBuffer> buffers;
    std::vector<const void*> pointers;
  };
  mutable std::mutex mu_;
  mutable std::map<int, Copies> copies_;
};

// A non-owning 1-D array of ids.
struct IdSpan {
  const void* data = nullptr;
  std::int64_t size = 0;
  IdType type = IdType::kI64;
  Device device;
};

// An owning 1-D array of ids on a device. Movable, not copyable.
class IdArray {
 public:
  IdArray() = default;
  // Uninitialised storage for `size` ids.
  IdArray(IdType type, std::int64_t size, Device device);
  // Copies host values into a new array of `type` on `device`. Throws std::out_of_range when
  // a value does not fit int32.
  static IdArray from_host(const std::vector<std::int64_t>& values, IdType type, Device device);

  IdType type() const { return type_; }
  std::int64_t size() const { return size_; }
  Device device() const { return device_; }
  void* data() { return device_.is_cuda() ? cuda_.data() : host_.get(); }
  const void* data() const { return device_.is_cuda() ? cuda_.data() : host_.get(); }
  IdSpan span() const { return IdSpan{data(), size_, type_, device_}; }
  // The values as int64 on the host (copied from the device when needed).
  std::vector<std::int64_t> to_host() const;

 private:
  IdType type_ = IdType::kI64;
  std::int64_t size_ = 0;
  Device device_;
  std::unique_ptr<unsigned char[]> host_;  // uninitialised: results overwrite every byte
  CudaBuffer cuda_;
};

// The values of `ids` as int64 on the host, whatever their type and device.
std::vector<std::int64_t> to_host_i64(const IdSpan& ids);

}  // namespace lockstep::ref
