#pragma once
// The one check of a CUDA runtime (or CUB) call in lockstep, for reference/ and harness/ alike
// (it lives here because reference/ never includes harness/). Include it where
// <cuda_runtime.h> is available: .cu files, and .cpp files built with LOCKSTEP_HAVE_CUDA.
#include <cuda_runtime.h>

#include <cstring>
#include <stdexcept>
#include <string>

namespace lockstep::ref {

// Throws std::runtime_error("<file>:<line>: <what>: <CUDA's message>") unless err is
// cudaSuccess; file is shortened to its last path component.
inline void cuda_check(cudaError_t err, const char* file, int line, const char* what) {
  if (err == cudaSuccess) return;
  const char* base = std::strrchr(file, '/');
  throw std::runtime_error(std::string(base ? base + 1 : file) + ":" + std::to_string(line) + ": " + what + ": " +
                           cudaGetErrorString(err));
}

namespace detail {
inline void cuda_check_call(const char* file, int line, const char* text, cudaError_t err) {
  cuda_check(err, file, line, text);
}
inline void cuda_check_call(const char* file, int line, const char* /*text*/, cudaError_t err, const char* what) {
  cuda_check(err, file, line, what);
}
}  // namespace detail

}  // namespace lockstep::ref

// LOCKSTEP_CUDA_CHECK(call) or LOCKSTEP_CUDA_CHECK(err, "what"): throws std::runtime_error
// naming file:line, the call's text (or `what`) and CUDA's message unless it is cudaSuccess.
#define LOCKSTEP_CUDA_CHECK(...) ::lockstep::ref::detail::cuda_check_call(__FILE__, __LINE__, #__VA_ARGS__, __VA_ARGS__)
