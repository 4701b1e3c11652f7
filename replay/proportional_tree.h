// The sum tree behind proportional prioritized sampling (docs/replay.md,
// "Sampling"): its arithmetic written once, for the host loops
// (proportional_host.cpp) and the CUDA kernels (proportional_cuda.cu), so that
// a CPU and a CUDA buffer draw the same slots, bit for bit.
//
// The tree: `leaves` = the capacity rounded up to a power of two = 2^depth;
// nodes are numbered 1 .. 2*leaves-1 (node 0 is unused), node i has the
// children 2i and 2i+1, and slot s is the leaf node leaves + s. Padding leaves
// (s >= capacity) hold 0.
//   sum[i] = sum[2i] + sum[2i+1]            one rounding per node, in double
//   min[i] = the smaller of min[2i], min[2i+1]; at a leaf its weight when
//            positive, +inf when 0, so min[1] is the smallest positive weight
// Every node is a function of the leaves below it alone: setting some leaves
// and then recomputing their ancestors, level by level from the bottom, gives
// the bits of a rebuild from scratch, however the leaves changed before.
//
// Kept nodes: only every other level is stored, the leaves (height 0 above
// them), heights 2, 4, ..., and the root. A node at an odd height below the
// root is computed where it is needed, from its two children, with the
// rounding above: refresh_from_grandchildren when its parent is recomputed,
// descend_two on the way down. So an update or a draw reads one group of
// four grandchildren (one cache line in the pairs layout) per two levels
// instead of a line per level, and the tree holds the same values, bit for
// bit, at every kept node. Nodes at odd heights below the root (a third of
// the 2 * leaves allocated) are never read or written: an owner need not
// initialise them.
//
// Memory: node i's sum at sum[i * stride], its min at min[i * stride]. Stride 1
// is two arrays; stride 2 is one array of (sum, min) pairs (min = sum + 1),
// the ReplayBuffer's layout: an update reads and writes both values of a node,
// and a pair keeps them on one cache line (the four grandchildren 4i .. 4i+3
// of a node, 64 bytes aligned to 64, share one too), which halves the DRAM
// misses of a large tree's update.
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

// ceil(log2(n)); for n = leaves (a power of two), the levels below the root.
OBSAUG_HD int depth_of(int64_t n) {
  int depth = 0;
  while ((int64_t{1} << depth) < n) ++depth;
  return depth;
}

// The number of leaves for `capacity` slots: the smallest power of two >= it.
OBSAUG_HD int64_t leaf_count(int64_t capacity) { return int64_t{1} << depth_of(capacity); }

// The height of `node` above the leaves: depth - floor(log2(node)).
OBSAUG_HD int height_of(int64_t leaves, int64_t node) {
  int level = 0;
  while ((node >> (level + 1)) != 0) ++level;
  return depth_of(leaves) - level;
}

// Whether the tree stores `node` (see "Kept nodes" above).
OBSAUG_HD bool kept(int64_t leaves, int64_t node) {
  return node == 1 || height_of(leaves, node) % 2 == 0;
}

// The kept heights above the leaves, in the order an update recomputes them:
// 2, 4, ... up to depth, then depth itself when odd (the root, from its two
// kept children). A height > depth ends the walk:
//   for (int h = next_kept_height(0, depth); h <= depth; h = next_kept_height(h, depth))
OBSAUG_HD int next_kept_height(int height, int depth) {
  if (height + 2 <= depth) return height + 2;
  return height < depth ? depth : depth + 1;
}

OBSAUG_HD void set_leaf(TreeView t, int64_t slot, double weight) {
  sum_at(t, t.leaves + slot) = weight;
  min_at(t, t.leaves + slot) = weight > 0.0 ? weight : std::numeric_limits<double>::infinity();
}

// The smaller of a left and a right min (the right one only when smaller).
OBSAUG_HD double min_of(double l, double r) { return r < l ? r : l; }

// Recomputes one inner node from its children (both stored).
OBSAUG_HD void refresh_node(TreeView t, int64_t node) {
  sum_at(t, node) = add_rn(sum_at(t, 2 * node), sum_at(t, 2 * node + 1));
  min_at(t, node) = min_of(min_at(t, 2 * node), min_at(t, 2 * node + 1));
}

// Recomputes kept node `node` at an even height >= 2 from its four kept
// grandchildren 4 node .. 4 node + 3: its two children first, exactly as
// refresh_node would store them, then the node itself.
OBSAUG_HD void refresh_from_grandchildren(TreeView t, int64_t node) {
  const int64_t g = 4 * node;
  const double left = add_rn(sum_at(t, g), sum_at(t, g + 1));
  const double right = add_rn(sum_at(t, g + 2), sum_at(t, g + 3));
  sum_at(t, node) = add_rn(left, right);
  min_at(t, node) =
      min_of(min_of(min_at(t, g), min_at(t, g + 1)), min_of(min_at(t, g + 2), min_at(t, g + 3)));
}

// Recomputes the kept ancestor at `height` (a height next_kept_height gives)
// of leaf node `leaf`.
OBSAUG_HD void refresh_ancestor(TreeView t, int64_t leaf, int height) {
  const int64_t node = leaf >> height;
  if (height % 2 == 0) {
    refresh_from_grandchildren(t, node);
  } else {
    refresh_node(t, node);  // the root at an odd depth: its children 2, 3 are kept
  }
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

// One level of the walk that draws a slot, given the sums l, r of `node`'s
// children: go left when target < l; else, when r > 0, subtract l and go
// right; else (nothing on the right) go left keeping the target.
// While sum[1] > 0 the walk never enters a subtree of zero weight, so it ends
// on a positive weight: the first slot whose prefix exceeds the target, or the
// last positive weight before it when rounding put the target past the end.
OBSAUG_HD void choose_child(double l, double r, int64_t* node, double* target) {
  const int64_t left = 2 * *node;
  if (*target < l) {
    *node = left;
  } else if (r > 0.0) {
    *target = sub_rn(*target, l);
    *node = left + 1;
  } else {
    *node = left;
  }
}

// One level down from a node whose children are stored (2 reads).
// `Sum` is anything indexable by node (a pointer, Sums; the tests count reads).
template <class Sum>
OBSAUG_HD void descend_step(const Sum& sum, int64_t* node, double* target) {
  choose_child(sum[2 * *node], sum[2 * *node + 1], node, target);
}

// Two levels down from a kept node at an even height >= 2 (4 reads, its
// grandchildren): the children's sums computed as refresh_from_grandchildren
// computes them, so the walk takes the turns it would take on a tree that
// stored every level.
template <class Sum>
OBSAUG_HD void descend_two(const Sum& sum, int64_t* node, double* target) {
  const int64_t g = 4 * *node;
  const double g0 = sum[g], g1 = sum[g + 1], g2 = sum[g + 2], g3 = sum[g + 3];
  choose_child(add_rn(g0, g1), add_rn(g2, g3), node, target);
  if (*node & 1) {
    choose_child(g2, g3, node, target);
  } else {
    choose_child(g0, g1, node, target);
  }
}

// The slot a target draws: from the root down to a leaf, one step at the
// root when the depth is odd (its children are kept), then two at a time.
template <class Sum>
OBSAUG_HD int64_t descend(const Sum& sum, int64_t leaves, double target) {
  int64_t node = 1;
  if (depth_of(leaves) % 2 == 1) descend_step(sum, &node, &target);
  while (node < leaves) descend_two(sum, &node, &target);
  return node - leaves;
}

}  // namespace obsaug::tree
