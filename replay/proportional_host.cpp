// Host loops of the prioritized sampler (replay/proportional.h): the tree's
// arithmetic is replay/proportional_tree.h, shared with the CUDA kernels.
//
// Both loops are level-synchronous: the B walkers (draws, or updated leaves)
// advance one level together, so the cache misses of one level are independent
// and overlap instead of following one another (below the cached top of a
// large tree every level is a DRAM miss). Each walker's arithmetic is
// descend_step's or refresh_node's, in the order a lone walker would do it.
#include <vector>

#include "replay/proportional.h"

namespace obsaug {

void proportional_assign_host(tree::TreeView tree, const int64_t* slots, const double* weights,
                              int64_t count) {
  for (int64_t i = 0; i < count; ++i) tree::set_leaf(tree, slots[i], weights[i]);
  // Level by level: sorted slots have sorted parents, so a parent shared by
  // neighbours is recomputed once. (No software prefetch: the out-of-order
  // core already overlaps a level's independent misses; prefetching the next
  // level's parents measured slower, BENCHMARKS.md.)
  for (int shift = 1; (int64_t{1} << shift) <= tree.leaves; ++shift) {
    int64_t previous = 0;
    for (int64_t i = 0; i < count; ++i) {
      const int64_t node = (tree.leaves + slots[i]) >> shift;
      if (node == previous) continue;
      tree::refresh_node(tree, node);
      previous = node;
    }
  }
}

void proportional_draw_host(tree::TreeView tree, uint64_t seed, uint64_t call, int64_t batch,
                            int64_t* slots) {
  const tree::Sums sums = tree::sums(tree);
  const double total = sums[1];
  std::vector<double> targets(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    targets[static_cast<size_t>(b)] =
        tree::stratified_target(seed, call, static_cast<uint32_t>(b), batch, total);
    slots[b] = 1;  // the root, as a node number until the last level
  }
  // A walker's next children (one cache line: 2i and 2i + 1 share it) are
  // prefetched as soon as it steps, a whole level's pass before it reads them.
  for (int64_t width = 1; width < tree.leaves; width *= 2) {
    const bool inner_next = 2 * width < tree.leaves;  // the next level reads children
    for (int64_t b = 0; b < batch; ++b) {
      tree::descend_step(sums, &slots[b], &targets[static_cast<size_t>(b)]);
      if (inner_next) __builtin_prefetch(&sums.sum[2 * slots[b] * sums.stride]);
    }
  }
  for (int64_t b = 0; b < batch; ++b) slots[b] -= tree.leaves;
}

}  // namespace obsaug
