#include "harness/torch/row_gather.h"

#include <ATen/ATen.h>

namespace lockstep::torchref {

struct TorchRowGather::Impl {
  at::Tensor table, out;
};

TorchRowGather::TorchRowGather(const float* table, std::int64_t rows, std::int64_t dim) : impl_(std::make_unique<Impl>()) {
  impl_->table = at::from_blob(const_cast<float*>(table), {rows, dim}, at::TensorOptions().dtype(at::kFloat));
}

TorchRowGather::~TorchRowGather() = default;

const float* TorchRowGather::gather(const std::int64_t* ids, std::int64_t n) {
  const auto idx = at::from_blob(const_cast<std::int64_t*>(ids), {n}, at::TensorOptions().dtype(at::kLong));
  impl_->out = at::index_select(impl_->table, 0, idx);
  return impl_->out.data_ptr<float>();
}

}  // namespace lockstep::torchref
