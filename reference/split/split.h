#pragma once
// Splitting training ids across ranks, and agreeing on a step count that every rank runs.
// Three properties are separate and all required: every id exactly once, exactly world_size
// chunks, and the same number of steps on every rank (DDP hangs when one rank runs an extra
// step: DGL #2539, #3538, PyG #9959). All ids and results are host vectors.
#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::ref {

// Returns exactly world_size contiguous chunks of ids, in order. Chunk r has
// floor(n / ws) + (r < n % ws ? 1 : 0) ids, so sizes differ by at most one; with fewer ids
// than ranks the last chunks are empty. Throws std::invalid_argument when world_size < 1.
std::vector<std::vector<std::int64_t>> rank_split(const std::vector<std::int64_t>& ids,
                                                  int world_size);

// THE KNOWN BUG, kept for fault injection: PyG's `ids.split(n // world_size)`. Chunks of
// q = max(1, floor(n / ws)) ids, the last one the remainder, so whenever ws does not divide n
// it yields more than world_size chunks: ws + ceil(r / q) for n = q*ws + r, usually ws + 1
// (1000 over 3: 333, 333, 333, 1; 11 over 4: 2, 2, 2, 2, 2, 1), and n chunks when n < ws.
// Like torch.split, 0 ids give one empty chunk. Throws std::invalid_argument when
// world_size < 1.
std::vector<std::vector<std::int64_t>> floor_division_split(const std::vector<std::int64_t>& ids,
                                                            int world_size);

// How ranks with chunks of different sizes agree on one step count.
enum class StepPolicy {
  kDropLast,  // steps = floor(min chunk / batch): only full batches, which every rank has
  kPad,       // steps = ceil(max chunk / batch): short ranks get partial or empty batches
  kEven,      // steps = ceil(ceil(n / ws) / batch): each chunk is padded to ceil(n / ws) ids
              // by wrapping to its own start (an empty chunk wraps over all ids), as torch's
              // DistributedSampler pads; n = sum of chunk sizes, ws = number of chunks
};

// "drop_last", "pad", "even".
std::string to_string(StepPolicy policy);
// Parses those names. Throws std::invalid_argument naming an unknown one.
StepPolicy step_policy_from_string(const std::string& name);

// Returns the step count every rank runs under `policy` (formulas above; 0 ids give 0).
// Throws std::invalid_argument when chunk_sizes is empty, a size is negative, or
// batch_size < 1.
std::int64_t agreed_steps(StepPolicy policy, const std::vector<std::int64_t>& chunk_sizes,
                          std::int64_t batch_size);

// Returns exactly `steps` batches of this rank's `chunk`; batch s is ids [s*batch, (s+1)*batch)
// of the chunk (kEven: of the padded chunk), cut at its end, so kPad and kEven give partial
// or empty batches past it. `all_ids` (every rank's ids, in order) and `world_size` serve
// kEven's padding only. Throws std::invalid_argument when steps < 0, batch_size < 1,
// world_size < 1, a kDropLast batch would not be full, or a kEven chunk exceeds
// ceil(all_ids.size() / world_size) ids.
std::vector<std::vector<std::int64_t>> batches(const std::vector<std::int64_t>& chunk,
                                               std::int64_t steps, std::int64_t batch_size,
                                               StepPolicy policy,
                                               const std::vector<std::int64_t>& all_ids,
                                               int world_size);

}  // namespace lockstep::ref
