#pragma once
// For code that already holds c10d objects (the PyTorch backend in harness/pytorch/): lockstep's
// Store over a c10d::Store that a program created, so that lockstep's Gloo groups rendezvous
// through the program's own store (its torch.distributed init_method).
#include <memory>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "harness/comm/backend.h"

namespace lockstep::comm {

std::shared_ptr<Store> wrap_c10d_store(c10::intrusive_ptr<c10d::Store> store);

}  // namespace lockstep::comm
