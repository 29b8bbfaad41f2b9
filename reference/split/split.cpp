#include "reference/split/split.h"

#include <algorithm>
#include <stdexcept>

namespace lockstep::ref {

namespace {

void check_world_size(int world_size) {
  if (world_size < 1) {
    throw std::invalid_argument("world_size must be >= 1, got " + std::to_string(world_size));
  }
}

void check_batch_size(std::int64_t batch_size) {
  if (batch_size < 1) {
    throw std::invalid_argument("batch_size must be >= 1, got " + std::to_string(batch_size));
  }
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

std::vector<std::int64_t> slice(const std::vector<std::int64_t>& v, std::int64_t begin,
                                std::int64_t end) {
  return {v.begin() + begin, v.begin() + end};
}

}  // namespace

std::vector<std::vector<std::int64_t>> rank_split(const std::vector<std::int64_t>& ids,
                                                  int world_size) {
  check_world_size(world_size);
  const auto n = static_cast<std::int64_t>(ids.size());
  const std::int64_t base = n / world_size;
  const std::int64_t extra = n % world_size;
  std::vector<std::vector<std::int64_t>> chunks;
  chunks.reserve(static_cast<std::size_t>(world_size));
  std::int64_t begin = 0;
  for (int r = 0; r < world_size; ++r) {
    const std::int64_t end = begin + base + (r < extra ? 1 : 0);
    chunks.push_back(slice(ids, begin, end));
    begin = end;
  }
  return chunks;
}

std::vector<std::vector<std::int64_t>> floor_division_split(const std::vector<std::int64_t>& ids,
                                                            int world_size) {
  check_world_size(world_size);
  const auto n = static_cast<std::int64_t>(ids.size());
  const std::int64_t chunk = std::max<std::int64_t>(1, n / world_size);
  std::vector<std::vector<std::int64_t>> chunks;
  for (std::int64_t begin = 0; begin < n; begin += chunk) {
    chunks.push_back(slice(ids, begin, std::min(n, begin + chunk)));
  }
  if (chunks.empty()) chunks.emplace_back();  // torch.split of an empty tensor: one chunk
  return chunks;
}

std::string to_string(StepPolicy policy) {
  switch (policy) {
    case StepPolicy::kDropLast:
      return "drop_last";
    case StepPolicy::kPad:
      return "pad";
    case StepPolicy::kEven:
      return "even";
  }
  throw std::invalid_argument("unknown step policy " + std::to_string(static_cast<int>(policy)));
}

StepPolicy step_policy_from_string(const std::string& name) {
  if (name == "drop_last") return StepPolicy::kDropLast;
  if (name == "pad") return StepPolicy::kPad;
  if (name == "even") return StepPolicy::kEven;
  throw std::invalid_argument("unknown step policy '" + name +
                              "' (expected drop_last, pad or even)");
}

std::int64_t agreed_steps(StepPolicy policy, const std::vector<std::int64_t>& chunk_sizes,
                          std::int64_t batch_size) {
  check_batch_size(batch_size);
  if (chunk_sizes.empty()) {
    throw std::invalid_argument("chunk_sizes must hold one size per rank, got none");
  }
  std::int64_t total = 0;
  for (std::size_t r = 0; r < chunk_sizes.size(); ++r) {
    if (chunk_sizes[r] < 0) {
      throw std::invalid_argument("chunk_sizes[" + std::to_string(r) +
                                  "] = " + std::to_string(chunk_sizes[r]) + " is negative");
    }
    total += chunk_sizes[r];
  }
  const auto [min, max] = std::minmax_element(chunk_sizes.begin(), chunk_sizes.end());
  switch (policy) {
    case StepPolicy::kDropLast:
      return *min / batch_size;
    case StepPolicy::kPad:
      return ceil_div(*max, batch_size);
    case StepPolicy::kEven: {
      const auto world_size = static_cast<std::int64_t>(chunk_sizes.size());
      return ceil_div(ceil_div(total, world_size), batch_size);
    }
  }
  throw std::invalid_argument("unknown step policy " + std::to_string(static_cast<int>(policy)));
}

std::vector<std::vector<std::int64_t>> batches(const std::vector<std::int64_t>& chunk,
                                               std::int64_t steps, std::int64_t batch_size,
                                               StepPolicy policy,
                                               const std::vector<std::int64_t>& all_ids,
                                               int world_size) {
  if (steps < 0) throw std::invalid_argument("steps must be >= 0, got " + std::to_string(steps));
  check_batch_size(batch_size);
  check_world_size(world_size);
  const auto c = static_cast<std::int64_t>(chunk.size());

  std::vector<std::int64_t> padded;
  const std::vector<std::int64_t>* ids = &chunk;
  if (policy == StepPolicy::kEven) {
    const auto n = static_cast<std::int64_t>(all_ids.size());
    const std::int64_t per_rank = ceil_div(n, world_size);
    if (c > per_rank) {
      throw std::invalid_argument("even: a chunk of " + std::to_string(c) +
                                  " ids exceeds ceil(n / world_size) = ceil(" + std::to_string(n) +
                                  " / " + std::to_string(world_size) +
                                  ") = " + std::to_string(per_rank));
    }
    const std::vector<std::int64_t>& source = c > 0 ? chunk : all_ids;
    padded = chunk;
    for (std::int64_t j = c; j < per_rank; ++j) {
      padded.push_back(
          source[static_cast<std::size_t>(j % static_cast<std::int64_t>(source.size()))]);
    }
    ids = &padded;
  }
  const auto size = static_cast<std::int64_t>(ids->size());

  std::vector<std::vector<std::int64_t>> out;
  out.reserve(static_cast<std::size_t>(steps));
  for (std::int64_t s = 0; s < steps; ++s) {
    const std::int64_t begin = std::min(size, s * batch_size);
    const std::int64_t end = std::min(size, begin + batch_size);
    if (policy == StepPolicy::kDropLast && end - begin < batch_size) {
      throw std::invalid_argument("drop_last: step " + std::to_string(s) + " needs ids [" +
                                  std::to_string(s * batch_size) + ", " +
                                  std::to_string((s + 1) * batch_size) + ") but the chunk has " +
                                  std::to_string(c) + " ids");
    }
    out.push_back(slice(*ids, begin, end));
  }
  return out;
}

}  // namespace lockstep::ref
