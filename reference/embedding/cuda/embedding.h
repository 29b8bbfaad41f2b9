#pragma once
// DistEmbedding's CUDA kernels: thin launchers over reference/embedding/embedding_one.h's
// per-element functions, which the CPU shard runs too. Compiled only when nvcc is present
// (LOCKSTEP_HAVE_CUDA_KERNELS); an EmbeddingShard on a CUDA device calls them. All pointers
// are memory of CUDA device `device`; each launcher runs on the legacy default stream (so it is
// ordered after the copies that filled its inputs), waits for its kernel, and throws
// std::runtime_error naming a CUDA error.
#include <cstdint>

#include "reference/embedding/embedding_one.h"

namespace lockstep::ref::cuda {

// out[i * dim + c] = load_element(storage, table, rows[i] * dim + c) for every i in [0, n)
// with part == null or part[i] == me (other rows of out are left alone); rows are int32 when
// int32_rows, else int64.
void gather_rows(int device, Storage storage, const void* table, std::int64_t dim, const void* rows,
                 bool int32_rows, const std::int32_t* part, int me, std::int64_t n, float* out);

// out[where[k] * dim + c] = src[k * dim + c] for k in [0, n).
void scatter_rows(int device, const float* src, const std::int64_t* where, std::int64_t n, std::int64_t dim,
                  float* out);

// For each group k in [0, groups) and column c: update_from_contributions(rule, storage, table,
// s1, s2, locals[k], dim, c, grads, order, ptr[k], ptr[k + 1], mode).
void update_rows(int device, const UpdateRule& rule, Storage storage, void* table, float* s1, float* s2,
                 std::int64_t dim, const std::int64_t* locals, const std::int64_t* ptr, const std::int64_t* order,
                 std::int64_t groups, const float* grads, DuplicateReduce mode);

}  // namespace lockstep::ref::cuda
