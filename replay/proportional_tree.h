// The sum tree behind proportional prioritized sampling (docs/replay.md,
// "Sampling"): its arithmetic written once, for the host loops
// (proportional_host.cpp) and the CUDA kernels (proportional_cuda.cu), so that
// a CPU and a CUDA buffer draw the same slots, bit for bit.
//
// Layout: `leaves` = the capacity rounded up to a power of two; nodes are
// numbered 1 .. 2*leaves-1 (node 0 is unused), node i has the children 2i and
// 2i+1, and slot s is the leaf node leaves + s. Padding leaves (s >= capacity)
// hold 0.
//   sum[i] = sum[2i] + sum[2i+1]            one rounding per node, in double
//   min[i] = the smaller of min[2i], min[2i+1]; at a leaf its weight when
//            positive, +inf when 0, so min[1] is the smallest positive weight
// Every node is a function of the leaves below it alone: setting some leaves
// and then recomputing their ancestors, level by level from the bottom, gives
// the bits of a rebuild from scratch, however the leaves changed before.
//
// Memory: node i's sum at sum[i * stride], its min at min[i * stride]. Stride 1
// is two arrays; stride 2 is one array of (sum, min) pairs (min = sum + 1),
// the ReplayBuffer's layout: an update reads and writes both values of a node,
// and a pair keeps them on one cache line (2i and 2i + 1, 32 bytes aligned to
// 32, share one too), which halves the DRAM misses of a large tree's update.
#pragma once

#include <cstdint>
#include <limits>

#include "kernels/float_rn.h"
#include "kernels/hd.h"
#include "kernels/philox.h"

namespace obsaug::tree {

// A non-owning view of a tree's nodes (2 * leaves sums and mins), in the
// memory of whoever reads it; passed by value into kernels.
struct TreeView {
  double* sum;
  double* min;
  int64_t leaves;
  int64_t stride = 1;  // doubles from node i's entry to node i + 1's
};

// Node i's sum and smallest positive weight.
OBSAUG_HD double& sum_at(TreeView t, int64_t node) { return t.sum[node * t.stride]; }
OBSAUG_HD double& min_at(TreeView t, int64_t node) { return t.min[node * t.stride]; }

// The sums as descend() reads them: indexable by node.
struct Sums {
  const double* sum;
  int64_t stride;
  OBSAUG_HD double operator[](int64_t node) const { return sum[node * stride]; }
};
OBSAUG_HD Sums sums(TreeView t) { return {t.sum, t.stride}; }

// The counter's word 3 of a replay draw: kReplayTag | attempt.
inline constexpr uint32_t kReplayTag = 0x8000;

// The Philox block of draw b, attempt `attempt`, of sample call `call`
// (docs/replay.md: key = seed, counter = (call lo, call hi, b, 0x8000 | attempt)).
OBSAUG_HD Philox4 replay_block(uint64_t seed, uint64_t call, uint32_t b, uint32_t attempt) {
  return philox4x32_10(Philox4{{static_cast<uint32_t>(call), static_cast<uint32_t>(call >> 32), b,
                                kReplayTag | attempt}},
                       static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// The number of leaves for `capacity` slots: the smallest power of two >= it.
OBSAUG_HD int64_t leaf_count(int64_t capacity) {
  int64_t leaves = 1;
  while (leaves < capacity) leaves *= 2;
  return leaves;
}

OBSAUG_HD void set_leaf(TreeView t, int64_t slot, double weight) {
  sum_at(t, t.leaves + slot) = weight;
  min_at(t, t.leaves + slot) = weight > 0.0 ? weight : std::numeric_limits<double>::infinity();
}

// Recomputes one inner node from its children.
OBSAUG_HD void refresh_node(TreeView t, int64_t node) {
  sum_at(t, node) = add_rn(sum_at(t, 2 * node), sum_at(t, 2 * node + 1));
  const double l = min_at(t, 2 * node), r = min_at(t, 2 * node + 1);
  min_at(t, node) = r < l ? r : l;
}

// The stratified target of draw b of `batch`: u = (b + unit(r0)) / batch with
// r0 from attempt 0, times the total.
OBSAUG_HD double stratified_target(uint64_t seed, uint64_t call, uint32_t b, int64_t batch,
                                   double total) {
  const Philox4 r = replay_block(seed, call, b, 0);
  const double u = div_rn(add_rn(static_cast<double>(b), static_cast<double>(unit(r.v[0]))),
                          static_cast<double>(batch));
  return mul_rn(u, total);
}

// One level of the walk that draws a slot (2 reads): with l, r the sums of
// `node`'s children, go left when target < l; else, when r > 0, subtract l
// and go right; else (nothing on the right) go left keeping the target.
// While sum[1] > 0 the walk never enters a subtree of zero weight, so it ends
// on a positive weight: the first slot whose prefix exceeds the target, or the
// last positive weight before it when rounding put the target past the end.
// `Sum` is anything indexable by node (a pointer, Sums; the tests count reads).
template <class Sum>
OBSAUG_HD void descend_step(const Sum& sum, int64_t* node, double* target) {
  const int64_t left = 2 * *node;
  const double l = sum[left], r = sum[left + 1];
  if (*target < l) {
    *node = left;
  } else if (r > 0.0) {
    *target = sub_rn(*target, l);
    *node = left + 1;
  } else {
    *node = left;
  }
}

// The slot a target draws: descend_step from the root down to a leaf.
template <class Sum>
OBSAUG_HD int64_t descend(const Sum& sum, int64_t leaves, double target) {
  int64_t node = 1;
  while (node < leaves) descend_step(sum, &node, &target);
  return node - leaves;
}

}  // namespace obsaug::tree
