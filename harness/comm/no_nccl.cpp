// make_nccl_backend for builds without NCCL: a clear error instead of a link failure.
#include "harness/comm/engines.h"
#include "harness/core/error.h"
#include "lockstep/config.h"

#if !LOCKSTEP_HAVE_NCCL
namespace lockstep::comm {
std::unique_ptr<Backend> make_nccl_backend(std::shared_ptr<Store>, int, int, int, double) {
  LOCKSTEP_CHECK(false, "this build of lockstep has no NCCL backend (NCCL was not found at configure time)");
  return nullptr;
}
}  // namespace lockstep::comm
#endif
