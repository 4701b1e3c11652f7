// Proportional prioritized sampling (Schaul et al. 2016) over a sum tree of
// per-slot weights (replay/proportional_tree.h): a bulk update of some leaves
// and a batch of stratified draws, each O(count * log capacity), run by the
// host (proportional_host.cpp) or on a CUDA stream (proportional_cuda.cu)
// with the same arithmetic, so both give the same bits. The owner (the
// ReplayBuffer) allocates the nodes: 2 * leaf_count(capacity) sums and as many
// mins, in either layout of tree::TreeView, with every kept node's sum zeroed
// and its min +inf (every weight 0; tree::kept says which nodes are kept).
#pragma once

#include <cstddef>
#include <cstdint>

#include "replay/proportional_tree.h"

typedef struct CUstream_st* cudaStream_t;

namespace obsaug {

// Sets leaf slots[i] to weights[i] >= 0 for i < count, then recomputes their
// kept ancestors from the bottom. slots sorted ascending without repeats (a repeat
// would keep one of its weights: whichever the device writes last).
void proportional_assign_host(tree::TreeView tree, const int64_t* slots, const double* weights,
                              int64_t count);
// slots[b] for b < batch: the slot draw b of sample call `call` picks
// (docs/replay.md). The tree's total must be positive.
void proportional_draw_host(tree::TreeView tree, uint64_t seed, uint64_t call, int64_t batch,
                            int64_t* slots);

#ifdef OBSAUG_WITH_CUDA
// The same on `stream`, with the tree, slots and weights in device memory.
// Launches only (no synchronisation); a failed launch throws std::runtime_error.
void proportional_assign_cuda(tree::TreeView tree, const int64_t* slots, const double* weights,
                              int64_t count, cudaStream_t stream);
// Also writes each draw's leaf weight to leaf_weights[b], and min[1], sum[1]
// (the smallest positive weight and the total) to leaf_weights[batch],
// leaf_weights[batch + 1], so that one copy brings back all the host needs.
// A total of 0 draws slot 0 everywhere (the caller then raises). A batch of
// 0 (or less) launches nothing and writes nothing.
void proportional_draw_cuda(tree::TreeView tree, uint64_t seed, uint64_t call, int64_t batch,
                            int64_t* slots, double* leaf_weights, cudaStream_t stream);
#endif

}  // namespace obsaug
