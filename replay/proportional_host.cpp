// Host loops of the prioritized sampler (replay/proportional.h): the tree's
// arithmetic is replay/proportional_tree.h, shared with the CUDA kernels.
#include <cstddef>
#include <vector>

#include "replay/proportional.h"

namespace obsaug {

void proportional_assign_host(tree::TreeView tree, const int64_t* slots, const double* weights,
                              int64_t count) {
  for (int64_t i = 0; i < count; ++i) tree::set_leaf(tree, slots[i], weights[i]);
  // Level by level: sorted slots have sorted parents, so a parent shared by
  // neighbours is recomputed once.
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
  // All draws walk down together, one level at a time: the B reads of a level
  // are independent, so their cache misses overlap (the tree of a large buffer
  // is far larger than the cache). Each draw's arithmetic is descend()'s.
  const double total = tree.sum[1];
  std::vector<double> targets(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    targets[static_cast<size_t>(b)] =
        tree::stratified_target(seed, call, static_cast<uint32_t>(b), batch, total);
    slots[b] = 1;  // the root, as a node number until the last level
  }
  for (int64_t width = 1; width < tree.leaves; width *= 2) {
    for (int64_t b = 0; b < batch; ++b) {
      tree::descend_step(tree.sum, &slots[b], &targets[static_cast<size_t>(b)]);
    }
  }
  for (int64_t b = 0; b < batch; ++b) slots[b] -= tree.leaves;
}

}  // namespace obsaug
