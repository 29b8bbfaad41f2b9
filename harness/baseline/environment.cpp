#include "harness/baseline/environment.h"
#include "harness/perf/cost.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "harness/comm/engines.h"
#include "reference/common/device.h"
#include "lockstep/build_info.h"
#include "lockstep/config.h"

namespace lockstep::baseline {
namespace {

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  const auto e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return trim(line.substr(colon + 1));
    }
  }
  return "unknown";
}

}  // namespace

std::string default_environment_name() {
  return "torch-" + std::to_string(LOCKSTEP_TORCH_VERSION_MAJOR) + "." +
         [] {
           const std::string v = LOCKSTEP_TORCH_VERSION;
           const auto a = v.find('.');
           const auto b = v.find('.', a + 1);
           return a == std::string::npos ? std::string("0") : v.substr(a + 1, b - a - 1);
         }();
}

Environment detect_environment(const std::string& name) {
  Environment e;
  e.name = name.empty() ? default_environment_name() : name;
  e.torch = comm::torch_version();
  e.torch_line = LOCKSTEP_TORCH_LINE;
  e.cuda = LOCKSTEP_HAVE_CUDA ? LOCKSTEP_CUDA_VERSION : "none";
  e.nccl = LOCKSTEP_HAVE_NCCL ? LOCKSTEP_NCCL_VERSION : "none";
  e.compiler = LOCKSTEP_CXX_COMPILER;
  e.cpu = cpu_model();
  e.counters = perf::Counters().availability();
  e.gpu = "none";
  e.driver = "none";
  if (ref::cuda_device_count() > 0) {
    std::ifstream ver("/proc/driver/nvidia/version");
    std::string line;
    if (std::getline(ver, line)) {
      // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  ..."
      const auto k = line.find("Module");
      if (k != std::string::npos) {
        std::string rest = trim(line.substr(k + 6));
        e.driver = rest.substr(0, rest.find(' '));
      }
    }
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", ec)) {
      std::ifstream info(entry.path() / "information");
      while (std::getline(info, line)) {
        if (line.rfind("Model:", 0) == 0) {
          e.gpu = trim(line.substr(6));
          break;
        }
      }
      break;
    }
  }
  e.lockstep_rev = LOCKSTEP_GIT_REV;
  return e;
}

}  // namespace lockstep::baseline
