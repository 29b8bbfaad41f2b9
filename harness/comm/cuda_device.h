#pragma once
// Minimal CUDA runtime helpers for workloads that move buffers to the GPU. On a build without
// the CUDA toolkit every function throws lockstep::Error, and cuda_device_count() returns 0.
#include <cstddef>

namespace lockstep::comm {

int cuda_device_count();
void cuda_set_device(int device);
void* cuda_alloc(std::size_t bytes);  // throws Error when it cannot
void cuda_free(void* p) noexcept;
void cuda_copy_to_device(void* dst, const void* src, std::size_t bytes);
void cuda_copy_to_host(void* dst, const void* src, std::size_t bytes);

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

}  // namespace lockstep::comm
