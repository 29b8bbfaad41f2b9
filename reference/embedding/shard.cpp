// Compiled with -ffp-contract=off, as all of reference/ (reference/CMakeLists.txt): the host
// shard's updates are exact only if no multiply-add is fused.
#include "reference/embedding/shard.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "lockstep/config.h"
#if LOCKSTEP_HAVE_CUDA_KERNELS
#include "reference/embedding/cuda/embedding.h"
#endif

namespace lockstep::ref {

namespace {

// Throws std::runtime_error unless `device` can hold a shard here.
void require_shard_device(Device device) {
  if (!device.is_cuda()) return;
  if (!LOCKSTEP_HAVE_CUDA_KERNELS) {
    throw std::runtime_error("an embedding shard on " + to_string(device) +
                             " needs lockstep built with its CUDA kernels (nvcc was not found at configure time)");
  }
  const auto why = cuda_device_unavailable(device);
  if (!why.empty()) throw std::runtime_error("an embedding shard on " + to_string(device) + ": " + why);
}

}  // namespace

EmbeddingShard::EmbeddingShard(std::vector<std::int64_t> global_ids, std::int64_t dim, Storage storage,
                               std::uint64_t seed, double init_scale, const OptimizerOptions& opt, Device device)
    : global_ids_(std::move(global_ids)), dim_(dim), storage_(storage), opt_(opt), device_(device) {
  if (dim < 1) throw std::invalid_argument("embedding dim must be >= 1, got " + std::to_string(dim));
  require_shard_device(device);
  const auto n = static_cast<std::size_t>(rows()) * static_cast<std::size_t>(dim);
  if (storage_ == Storage::kF32) f32_.resize(n);
  else half_.resize(n);
  // Initialised on the host (a pure function of the ids), then moved to a CUDA device below.
  void* host = storage_ == Storage::kF32 ? static_cast<void*>(f32_.data()) : static_cast<void*>(half_.data());
  for (std::int64_t l = 0; l < rows(); ++l) {
    for (std::int64_t c = 0; c < dim; ++c) {
      store_element(storage_, host, l * dim + c, embedding_init(seed, global_ids_[static_cast<std::size_t>(l)], c, init_scale));
    }
  }
  has_s1_ = opt_.kind != OptimizerKind::kSgd;
  has_s2_ = opt_.kind == OptimizerKind::kAdam;
  if (has_s1_) s1_.assign(n, opt_.kind == OptimizerKind::kAdagrad ? static_cast<float>(opt_.initial_accumulator_value) : 0.0f);
  if (has_s2_) s2_.assign(n, 0.0f);
#if LOCKSTEP_HAVE_CUDA_KERNELS
  if (device_.is_cuda()) {
    mark_cuda_initialised();
    cuda_set_device(device_.index);
    table_d_ = storage_ == Storage::kF32 ? cuda_upload(f32_) : cuda_upload(half_);
    if (has_s1_) s1_d_ = cuda_upload(s1_);
    if (has_s2_) s2_d_ = cuda_upload(s2_);
    f32_ = {};
    half_ = {};
    s1_ = {};
    s2_ = {};
  }
#endif
}

const void* EmbeddingShard::table() const {
  if (device_.is_cuda()) return table_d_.data();
  return storage_ == Storage::kF32 ? static_cast<const void*>(f32_.data()) : static_cast<const void*>(half_.data());
}

float* EmbeddingShard::state(int which) {
  if (which == 1 ? !has_s1_ : !has_s2_) return nullptr;
  if (device_.is_cuda()) return static_cast<float*>((which == 1 ? s1_d_ : s2_d_).data());
  return (which == 1 ? s1_ : s2_).data();
}

void EmbeddingShard::read_row(std::int64_t l, float* out) const {
  const std::int64_t at = l * dim_;
  if (!device_.is_cuda()) {
    if (storage_ == Storage::kF32) std::memcpy(out, f32_.data() + at, static_cast<std::size_t>(dim_) * sizeof(float));
    else for (std::int64_t c = 0; c < dim_; ++c) out[c] = load_element(storage_, table(), at + c);
    return;
  }
  std::vector<unsigned char> raw(static_cast<std::size_t>(dim_) * element_bytes());
  cuda_set_device(device_.index);
  cuda_copy_to_host(raw.data(), static_cast<const unsigned char*>(table()) + static_cast<std::size_t>(at) * element_bytes(), raw.size());
  for (std::int64_t c = 0; c < dim_; ++c) out[c] = load_element(storage_, raw.data(), c);
}

std::vector<float> EmbeddingShard::to_f32() const {
  std::vector<float> out(static_cast<std::size_t>(rows() * dim_));
  if (out.empty()) return out;
  if (!device_.is_cuda()) {
    for (std::int64_t l = 0; l < rows(); ++l) read_row(l, out.data() + l * dim_);
    return out;
  }
  std::vector<unsigned char> raw(out.size() * element_bytes());
  cuda_set_device(device_.index);
  cuda_copy_to_host(raw.data(), table(), raw.size());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = load_element(storage_, raw.data(), static_cast<std::int64_t>(i));
  return out;
}

void EmbeddingShard::gather(const void* locals, IdType type, const std::int32_t* part, int me, std::int64_t n,
                            float* out) const {
  if (device_.is_cuda()) {
#if LOCKSTEP_HAVE_CUDA_KERNELS
    cuda::gather_rows(device_.index, storage_, table(), dim_, locals, type == IdType::kI32, part, me, n, out);
#endif
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    if (part && part[i] != me) continue;
    const std::int64_t l = type == IdType::kI32 ? static_cast<const std::int32_t*>(locals)[i] : static_cast<const std::int64_t*>(locals)[i];
    for (std::int64_t c = 0; c < dim_; ++c) out[i * dim_ + c] = load_element(storage_, table(), l * dim_ + c);
  }
}

void EmbeddingShard::load_state(std::int64_t l, float* w, std::vector<float>& s1, std::vector<float>& s2) const {
  const auto d = static_cast<std::size_t>(dim_);
  const auto at = static_cast<std::size_t>(l) * d;
  read_row(l, w);
  s1.assign(has_s1_ ? d : 0, 0.0f);
  s2.assign(has_s2_ ? d : 0, 0.0f);
  if (!device_.is_cuda()) {
    if (has_s1_) std::copy_n(s1_.data() + at, d, s1.data());
    if (has_s2_) std::copy_n(s2_.data() + at, d, s2.data());
    return;
  }
  if (has_s1_) cuda_copy_to_host(s1.data(), static_cast<const float*>(s1_d_.data()) + at, d * sizeof(float));
  if (has_s2_) cuda_copy_to_host(s2.data(), static_cast<const float*>(s2_d_.data()) + at, d * sizeof(float));
}

void EmbeddingShard::save_state(std::int64_t l, const float* w, const std::vector<float>& s1, const std::vector<float>& s2) {
  const auto d = static_cast<std::size_t>(dim_);
  const auto at = static_cast<std::size_t>(l) * d;
  if (!device_.is_cuda()) {
    for (std::int64_t c = 0; c < dim_; ++c) store_element(storage_, table(), l * dim_ + c, w[c]);
    if (has_s1_) std::copy_n(s1.data(), d, s1_.data() + at);
    if (has_s2_) std::copy_n(s2.data(), d, s2_.data() + at);
    return;
  }
  std::vector<unsigned char> raw(d * element_bytes());
  for (std::int64_t c = 0; c < dim_; ++c) store_element(storage_, raw.data(), c, w[c]);
  cuda_set_device(device_.index);
  cuda_copy_to_device(static_cast<unsigned char*>(table()) + at * element_bytes(), raw.data(), raw.size());
  if (has_s1_) cuda_copy_to_device(state(1) + at, s1.data(), d * sizeof(float));
  if (has_s2_) cuda_copy_to_device(state(2) + at, s2.data(), d * sizeof(float));
}

void EmbeddingShard::update_row(std::int64_t l, const float* g, std::int64_t t) {
  std::vector<float> w(static_cast<std::size_t>(dim_)), s1, s2;
  load_state(l, w.data(), s1, s2);
  apply_update(opt_, t, dim_, g, w.data(), s1.empty() ? nullptr : s1.data(), s2.empty() ? nullptr : s2.data());
  save_state(l, w.data(), s1, s2);
}

void EmbeddingShard::update_rows(const std::vector<std::int64_t>& locals, const GradGroups& groups, const float* grads,
                                 std::int64_t n, DuplicateReduce mode, std::int64_t t) {
  const UpdateRule rule = update_rule(opt_, t);
  const auto count = static_cast<std::int64_t>(locals.size());
  if (device_.is_cuda()) {
#if LOCKSTEP_HAVE_CUDA_KERNELS
    if (count == 0) return;
    cuda_set_device(device_.index);
    const CudaBuffer l = cuda_upload(locals), ptr = cuda_upload(groups.ptr), order = cuda_upload(groups.order),
                     g = cuda_upload(grads, static_cast<std::size_t>(n * dim_) * sizeof(float));
    cuda::update_rows(device_.index, rule, storage_, table(), state(1), state(2), dim_,
                      static_cast<const std::int64_t*>(l.data()), static_cast<const std::int64_t*>(ptr.data()),
                      static_cast<const std::int64_t*>(order.data()), count, static_cast<const float*>(g.data()), mode);
#endif
    return;
  }
  for (std::int64_t k = 0; k < count; ++k) {
    for (std::int64_t c = 0; c < dim_; ++c) {
      update_from_contributions(rule, storage_, table(), state(1), state(2), locals[static_cast<std::size_t>(k)], dim_, c,
                                grads, groups.order.data(), groups.ptr[static_cast<std::size_t>(k)],
                                groups.ptr[static_cast<std::size_t>(k) + 1], mode);
    }
  }
}

void EmbeddingShard::update_row_racy(std::int64_t l, const std::vector<std::vector<float>>& groups, std::int64_t t) {
  const auto d = static_cast<std::size_t>(dim_);
  std::vector<float> w0(d), s10, s20;
  load_state(l, w0.data(), s10, s20);  // every "thread" reads this snapshot before any of them writes
  for (const auto& g : groups) {
    std::vector<float> w = w0, s1 = s10, s2 = s20;
    apply_update(opt_, t, dim_, g.data(), w.data(), s1.empty() ? nullptr : s1.data(), s2.empty() ? nullptr : s2.data());
    save_state(l, w.data(), s1, s2);  // the last writer wins
  }
}

}  // namespace lockstep::ref
