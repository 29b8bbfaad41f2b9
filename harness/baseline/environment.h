#pragma once
// The environment a run was recorded in: the engine stack and the machine.
#include <string>

namespace lockstep::baseline {

struct Environment {
  std::string name;          // stable, human-chosen ("torch-1.13" by default)
  std::string torch;         // LibTorch version, e.g. "1.13.1"
  std::string torch_line;    // "debian", "wheel" or a path
  std::string cuda;          // CUDA toolkit version built against, "none" without CUDA
  std::string nccl;          // NCCL version built against, "none" without NCCL
  std::string compiler;      // "GNU 12.2.0"
  std::string cpu;           // /proc/cpuinfo model name
  std::string gpu;           // GPU model, "none" without a visible GPU
  std::string driver;        // NVIDIA driver version, "none" without a GPU
  std::string lockstep_rev;  // git revision lockstep was configured at
  // Hardware counters perf_event_open offers here: "instructions,cycles", or "none: <why>"
  // (informational: never part of an environment's identity).
  std::string counters;
};

// The environment of this binary on this machine; `name` is `name` or, when empty,
// default_environment_name().
Environment detect_environment(const std::string& name);
// "torch-<major>.<minor>" of the LibTorch this binary was built against.
std::string default_environment_name();

}  // namespace lockstep::baseline
