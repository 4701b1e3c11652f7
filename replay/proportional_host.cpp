// Host loops of the prioritized sampler (replay/proportional.h): the tree's
// arithmetic is replay/proportional_tree.h, shared with the CUDA kernels.
//
// Both loops are level-synchronous: the B walkers (draws, or updated leaves)
// advance one kept level (two levels of the tree) together, so the cache
// misses of one level are independent and overlap instead of following one
// another (below the cached top of a large tree every kept level is a DRAM
// miss). Each walker's arithmetic is descend()'s or refresh_ancestor's, in
// the order a lone walker would do it.
#include <vector>

#include "replay/proportional.h"

namespace obsaug {

void proportional_assign_host(tree::TreeView tree, const int64_t* slots, const double* weights,
                              int64_t count) {
  for (int64_t i = 0; i < count; ++i) tree::set_leaf(tree, slots[i], weights[i]);
  // Kept level by kept level: sorted slots have sorted ancestors, so one
  // shared by neighbours is recomputed once. (No software prefetch: the
  // out-of-order core already overlaps a level's independent misses;
  // prefetching the next level's parents measured slower, BENCHMARKS.md.)
  const int depth = tree::depth_of(tree.leaves);
  for (int h = tree::next_kept_height(0, depth); h <= depth; h = tree::next_kept_height(h, depth)) {
    int64_t previous = 0;
    for (int64_t i = 0; i < count; ++i) {
      const int64_t leaf = tree.leaves + slots[i];
      if ((leaf >> h) == previous) continue;
      tree::refresh_ancestor(tree, leaf, h);
      previous = leaf >> h;
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
  // descend()'s steps, each walker one step per pass: at the root when the
  // depth is odd, then two levels per pass. A walker's next four
  // grandchildren (one cache line in the pairs layout) are prefetched as soon
  // as it steps, a whole pass before it reads them.
  int height = tree::depth_of(tree.leaves);
  if (height % 2 == 1) {
    for (int64_t b = 0; b < batch; ++b) {
      tree::descend_step(sums, &slots[b], &targets[static_cast<size_t>(b)]);
    }
    --height;
  }
  for (; height > 0; height -= 2) {
    const bool inner_next = height > 2;  // the next pass reads grandchildren
    for (int64_t b = 0; b < batch; ++b) {
      tree::descend_two(sums, &slots[b], &targets[static_cast<size_t>(b)]);
      if (inner_next) __builtin_prefetch(&sums.sum[4 * slots[b] * sums.stride]);
    }
  }
  for (int64_t b = 0; b < batch; ++b) slots[b] -= tree.leaves;
}

}  // namespace obsaug
