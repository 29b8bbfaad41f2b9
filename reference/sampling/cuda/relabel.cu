// First-appearance relabelling on CUDA (reference/sampling/cuda/relabel.h): CUB's stable radix
// sort of (value, position) pairs and its scans, and one thread per element for the steps of
// relabel_one.h that the host path runs.
#include "reference/sampling/cuda/relabel.h"

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <climits>
#include <stdexcept>
#include <string>

#include "reference/common/cuda/launch.cuh"
#include "reference/sampling/relabel_one.h"

namespace lockstep::ref::cuda {

namespace {

constexpr const char* kWork = "relabelling on CUDA";

// Device memory, freed on scope exit (also when a check throws).
class Scratch {
 public:
  explicit Scratch(std::size_t bytes) { LOCKSTEP_CUDA_CHECK(cudaMalloc(&p_, bytes == 0 ? 1 : bytes)); }
  ~Scratch() { cudaFree(p_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  std::int64_t* i64() const { return static_cast<std::int64_t*>(p_); }
  void* raw() const { return p_; }

 private:
  void* p_ = nullptr;
};

struct Max {
  __host__ __device__ std::int64_t operator()(std::int64_t a, std::int64_t b) const { return a > b ? a : b; }
};

__global__ void iota_kernel(std::int64_t n, std::int64_t* out) {
  for (std::int64_t i = grid_first(); i < n; i += grid_stride()) out[i] = i;
}

__global__ void run_start_kernel(const std::int64_t* __restrict__ sorted, std::int64_t n, std::int64_t* __restrict__ out) {
  for (std::int64_t k = grid_first(); k < n; k += grid_stride()) out[k] = relabel_one::run_start(sorted, k);
}

__global__ void first_kernel(const std::int64_t* __restrict__ positions, const std::int64_t* __restrict__ run,
                             std::int64_t n, std::int64_t* __restrict__ first) {
  for (std::int64_t k = grid_first(); k < n; k += grid_stride()) {
    first[positions[k]] = relabel_one::first_position(positions, run, k);
  }
}

__global__ void mark_kernel(const std::int64_t* __restrict__ first, std::int64_t n, std::int64_t* __restrict__ mark) {
  for (std::int64_t p = grid_first(); p < n; p += grid_stride()) mark[p] = relabel_one::first_mark(first, p);
}

__global__ void relabel_kernel(const std::int64_t* __restrict__ values, const std::int64_t* __restrict__ first,
                               const std::int64_t* __restrict__ id, std::int64_t n, std::int64_t* __restrict__ local,
                               std::int64_t* __restrict__ unique) {
  for (std::int64_t p = grid_first(); p < n; p += grid_stride()) {
    relabel_one::relabel_position(values, first, id, p, local, unique);
  }
}

__global__ void destination_kernel(const std::int64_t* __restrict__ offsets, std::int64_t n,
                                   std::int64_t* __restrict__ edge_dst) {
  for (std::int64_t d = grid_first(); d < n; d += grid_stride()) relabel_one::fill_destination(offsets, d, edge_dst);
}

void launched(const char* what) { LOCKSTEP_CUDA_CHECK(cudaGetLastError(), what); }

int as_int(std::int64_t n) {
  if (n > INT_MAX) throw std::runtime_error(std::string(kWork) + ": " + std::to_string(n) + " elements, more than CUB's int counts take");
  return static_cast<int>(n);
}

}  // namespace

std::int64_t relabel_first_appearance(int device, const std::int64_t* values, std::int64_t n, std::int64_t* local,
                                      std::int64_t* unique) {
  if (n <= 0) return 0;
  LOCKSTEP_CUDA_CHECK(cudaSetDevice(device));
  const int items = as_int(n);
  const int blocks = grid_blocks(device, n);
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(std::int64_t);
  Scratch positions(bytes), sorted(bytes), sorted_positions(bytes), run(bytes), first(bytes), mark(bytes), id(bytes);
  iota_kernel<<<blocks, kThreadsPerBlock>>>(n, positions.i64());
  launched("iota kernel");
  std::size_t temp_bytes = 0;
  LOCKSTEP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, values, sorted.i64(), positions.i64(),
                                                      sorted_positions.i64(), items),
                      "radix sort (size)");
  {
    Scratch temp(temp_bytes);
    LOCKSTEP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.raw(), temp_bytes, values, sorted.i64(), positions.i64(),
                                                        sorted_positions.i64(), items),
                        "radix sort");
  }
  run_start_kernel<<<blocks, kThreadsPerBlock>>>(sorted.i64(), n, run.i64());
  launched("run-start kernel");
  temp_bytes = 0;
  LOCKSTEP_CUDA_CHECK(cub::DeviceScan::InclusiveScan(nullptr, temp_bytes, run.i64(), run.i64(), Max{}, items), "max scan (size)");
  {
    Scratch temp(temp_bytes);
    LOCKSTEP_CUDA_CHECK(cub::DeviceScan::InclusiveScan(temp.raw(), temp_bytes, run.i64(), run.i64(), Max{}, items), "max scan");
  }
  first_kernel<<<blocks, kThreadsPerBlock>>>(sorted_positions.i64(), run.i64(), n, first.i64());
  launched("first-position kernel");
  mark_kernel<<<blocks, kThreadsPerBlock>>>(first.i64(), n, mark.i64());
  launched("mark kernel");
  temp_bytes = 0;
  LOCKSTEP_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, mark.i64(), id.i64(), items), "exclusive sum (size)");
  {
    Scratch temp(temp_bytes);
    LOCKSTEP_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.raw(), temp_bytes, mark.i64(), id.i64(), items), "exclusive sum");
  }
  relabel_kernel<<<blocks, kThreadsPerBlock>>>(values, first.i64(), id.i64(), n, local, unique);
  launched("relabel kernel");
  std::int64_t last[2] = {0, 0};  // id and mark of the last position: the distinct count
  LOCKSTEP_CUDA_CHECK(cudaMemcpy(&last[0], id.i64() + n - 1, sizeof(std::int64_t), cudaMemcpyDeviceToHost), "copy of the count");
  LOCKSTEP_CUDA_CHECK(cudaMemcpy(&last[1], mark.i64() + n - 1, sizeof(std::int64_t), cudaMemcpyDeviceToHost), "copy of the count");
  return last[0] + last[1];
}

std::int64_t edge_destinations(int device, const std::int64_t* counts, std::int64_t n, std::int64_t edges,
                               std::int64_t* edge_dst) {
  if (n <= 0) return 0;
  LOCKSTEP_CUDA_CHECK(cudaSetDevice(device));
  const int items = as_int(n);
  Scratch offsets(static_cast<std::size_t>(n + 1) * sizeof(std::int64_t));
  std::size_t temp_bytes = 0;
  LOCKSTEP_CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, temp_bytes, counts, offsets.i64() + 1, items), "prefix sum (size)");
  {
    Scratch temp(temp_bytes);
    LOCKSTEP_CUDA_CHECK(cudaMemset(offsets.i64(), 0, sizeof(std::int64_t)));
    LOCKSTEP_CUDA_CHECK(cub::DeviceScan::InclusiveSum(temp.raw(), temp_bytes, counts, offsets.i64() + 1, items), "prefix sum");
  }
  std::int64_t total = 0;  // a blocking copy: waits for the scan
  LOCKSTEP_CUDA_CHECK(cudaMemcpy(&total, offsets.i64() + n, sizeof total, cudaMemcpyDeviceToHost), "copy of the total");
  if (total != edges || edges == 0) return total;
  destination_kernel<<<grid_blocks(device, n), kThreadsPerBlock>>>(offsets.i64(), n, edge_dst);
  launched("destination kernel");
  LOCKSTEP_CUDA_CHECK(cudaStreamSynchronize(0), "destination kernel");
  return total;
}

}  // namespace lockstep::ref::cuda
