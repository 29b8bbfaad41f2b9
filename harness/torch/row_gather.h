#pragma once
// LibTorch's row gather, at::index_select(table, 0, ids) on CPU, behind a torch-free header:
// the physical limit the embedding pull benchmark is measured against.
#include <cstdint>
#include <memory>

namespace lockstep::torchref {

class TorchRowGather {
 public:
  // Wraps rows x dim f32 values at `table` without copying; the memory must outlive this.
  TorchRowGather(const float* table, std::int64_t rows, std::int64_t dim);
  ~TorchRowGather();
  TorchRowGather(const TorchRowGather&) = delete;
  TorchRowGather& operator=(const TorchRowGather&) = delete;

  // Gathers the rows of n host int64 ids into a freshly allocated tensor (as index_select
  // does) and returns a pointer to its n x dim values, valid until the next call.
  const float* gather(const std::int64_t* ids, std::int64_t n);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep::torchref
