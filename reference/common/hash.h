#pragma once
// XXH3-64 (seed 0) over a stream of int64 values in their little-endian byte form: how the
// reference digests its canonical outputs (graphs, sampled blocks), so that another
// implementation can reproduce a digest from the documented sequence of values.
#include <xxhash.h>

#include <bit>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

namespace lockstep::ref {

static_assert(std::endian::native == std::endian::little,
              "Int64Hasher hashes int64 values in their in-memory (little-endian) form");

class Int64Hasher {
 public:
  Int64Hasher() : state_(XXH3_createState()) {
    if (!state_) throw std::runtime_error("digest: XXH3_createState failed");
    XXH3_64bits_reset(state_.get());
  }

  void put(std::int64_t v) { XXH3_64bits_update(state_.get(), &v, sizeof v); }

  // The size, then the values.
  void put_sized(const std::vector<std::int64_t>& v) {
    put(static_cast<std::int64_t>(v.size()));
    if (!v.empty()) XXH3_64bits_update(state_.get(), v.data(), v.size() * sizeof(std::int64_t));
  }

  std::uint64_t digest() const { return XXH3_64bits_digest(state_.get()); }

 private:
  struct Free {
    void operator()(XXH3_state_t* s) const { XXH3_freeState(s); }
  };
  std::unique_ptr<XXH3_state_t, Free> state_;
};

}  // namespace lockstep::ref
