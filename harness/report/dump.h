#pragma once
// `--dump`: each rank writes its canonical outputs as NumPy .npy arrays into
// DIR/dump/<scenario>/, and a manifest.json lists every array (name, file, dtype, shape, rank,
// meaning). The schema is documented in scenarios/README.md.
#include <cstdint>
#include <string>
#include <vector>

#include "harness/comm/dtype.h"

namespace lockstep::report {

class DumpWriter {
 public:
  // dir == "" disables dumping: write() then does nothing.
  DumpWriter(std::string dir, int rank);
  ~DumpWriter();
  DumpWriter(const DumpWriter&) = delete;
  DumpWriter& operator=(const DumpWriter&) = delete;

  bool enabled() const { return !dir_.empty(); }
  // Writes DIR/<name>.rank<r>.npy with a C-order array of `shape` and records it in this
  // rank's manifest fragment. `data` holds prod(shape) elements of `dtype`.
  void write(const std::string& name, comm::DType dtype, const std::vector<std::int64_t>& shape,
             const void* data, const std::string& meaning);
  template <typename T>
  void write(const std::string& name, const std::vector<T>& values, const std::string& meaning) {
    write(name, comm::dtype_of<T>(), {static_cast<std::int64_t>(values.size())}, values.data(),
          meaning);
  }

 private:
  std::string dir_;
  int rank_;
};

// Merges the per-rank manifest fragments in `dir` into dir/manifest.json (sorted by name,
// then rank) and removes the fragments. Does nothing when `dir` holds no fragment.
void merge_manifests(const std::string& dir, const std::string& scenario_id);

}  // namespace lockstep::report
