// Proportional prioritized sampling (Schaul et al. 2016) over per-slot
// weights: prefix sums and binary searches, written once with Thrust and run
// by the host's sequential system (proportional_host.cpp) or on a CUDA
// stream (proportional_cuda.cu). Only the entry points below are visible to
// the rest of the project; the Thrust template is in proportional_impl.h.
#pragma once

#include <cstdint>

typedef struct CUstream_st* cudaStream_t;

namespace obsaug {

// In: weights[n] >= 0 (0 = never sampled), targets[batch] in [0, 1).
// Out: prefix[n] = inclusive prefix sums of weights; targets scaled by the
// total; slots[b] = the first i with prefix[i] > targets[b] (may be n when
// rounding puts a target on the total: callers move it down to the last
// positive weight). Returns the smallest positive weight (+inf if none).
// All pointers are in the memory of the system that runs it.
double proportional_draw_host(const double* weights, int64_t n, double* prefix, double* targets,
                              int64_t batch, int64_t* slots);
#ifdef OBSAUG_WITH_CUDA
// The same on `stream` with device pointers; synchronises the stream to
// return the smallest weight. Throws std::runtime_error on a CUDA error.
double proportional_draw_cuda(const double* weights, int64_t n, double* prefix, double* targets,
                              int64_t batch, int64_t* slots, cudaStream_t stream);
#endif

}  // namespace obsaug
