#pragma once
// LOCKSTEP_HD marks a function compiled for the host and, under nvcc, for CUDA devices too:
// the per-element work that the CPU reference and its CUDA kernels share. Each kernel in
// reference/<area>/cuda/ is a thin launcher over such functions, and the CPU tests call the
// same functions, so their logic is proven on machines without a GPU.
#if defined(__CUDACC__)
#define LOCKSTEP_HD __host__ __device__
#else
#define LOCKSTEP_HD
#endif
