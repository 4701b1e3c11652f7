// The prioritized sampler's sum tree (replay/proportional_tree.h,
// replay/proportional.h): incremental updates equal a rebuild from scratch bit
// for bit at every kept node, a draw reads 2 nodes per level and takes the
// turns of a walk over a tree that stores every level, an update touches only
// the updated leaves' kept ancestors (and their grandchildren), and the walk's
// edge cases (a target on a boundary, on or past the total, zero weights,
// padding). The level-synchronous host loops equal one walker at a time, in
// both layouts (two arrays, and the (sum, min) pairs the ReplayBuffer
// allocates).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "replay/proportional.h"
#include "replay/proportional_tree.h"

namespace obsaug {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// An owning tree on the host, every weight 0 (as the ReplayBuffer allocates it).
struct HostTree {
  explicit HostTree(int64_t capacity)
      : capacity(capacity),
        leaves(tree::leaf_count(capacity)),
        sum(static_cast<size_t>(2 * leaves), 0.0),
        min(static_cast<size_t>(2 * leaves), kInf) {}
  tree::TreeView view() { return {sum.data(), min.data(), leaves}; }
  // NaN in every node the tree does not keep, as an owner may leave them
  // (uninitialised): reading one would carry NaN into a sum or a turn.
  void poison_unkept() {
    for (int64_t node = 1; node < 2 * leaves; ++node) {
      if (!tree::kept(leaves, node)) sum[node] = min[node] = std::nan("");
    }
  }
  // Sets the given slots' weights (sorted, distinct) through the sampler's update.
  void assign(const std::vector<int64_t>& slots, const std::vector<double>& weights) {
    proportional_assign_host(view(), slots.data(), weights.data(),
                             static_cast<int64_t>(slots.size()));
  }
  int64_t capacity, leaves;
  std::vector<double> sum, min;
};

// The naive reference: a tree that stores every level, built bottom-up from
// every leaf's weight with refresh_node.
HostTree rebuilt(int64_t capacity, const std::vector<double>& weights) {
  HostTree t(capacity);
  for (int64_t s = 0; s < capacity; ++s) tree::set_leaf(t.view(), s, weights[s]);
  for (int64_t node = t.leaves - 1; node >= 1; --node) tree::refresh_node(t.view(), node);
  return t;
}

// The walk over a tree that stores every level: descend_step from the root.
int64_t full_tree_descend(const std::vector<double>& sum, int64_t leaves, double target) {
  int64_t node = 1;
  while (node < leaves) tree::descend_step(sum.data(), &node, &target);
  return node - leaves;
}

// The same bits at every node the tree keeps (`a` may leave the others stale).
bool same_kept_bits(const std::vector<double>& a, const std::vector<double>& b, int64_t leaves) {
  if (a.size() != b.size()) return false;
  for (int64_t node = 1; node < static_cast<int64_t>(a.size()); ++node) {
    if (tree::kept(leaves, node) && std::memcmp(&a[node], &b[node], sizeof(double)) != 0) {
      return false;
    }
  }
  return true;
}

// Reads of the sum array, counted.
struct CountingSum {
  const double* sum;
  int64_t* reads;
  double operator[](int64_t node) const {
    ++*reads;
    return sum[node];
  }
};

TEST(ProportionalTree, LeafCountIsTheCapacityRoundedUpToAPowerOfTwo) {
  EXPECT_EQ(tree::leaf_count(1), 1);
  EXPECT_EQ(tree::leaf_count(2), 2);
  EXPECT_EQ(tree::leaf_count(3), 4);
  EXPECT_EQ(tree::leaf_count(1000), 1024);
  EXPECT_EQ(tree::leaf_count(int64_t{1} << 23), int64_t{1} << 23);
  EXPECT_EQ(tree::leaf_count((int64_t{1} << 23) + 1), int64_t{1} << 24);
}

TEST(ProportionalTree, RandomUpdatesEqualARebuildBitForBit) {
  for (int64_t capacity : {1, 2, 7, 1000, 4096}) {
    std::mt19937_64 rng(static_cast<uint64_t>(capacity));
    HostTree t(capacity);
    std::vector<double> weights(static_cast<size_t>(capacity), 0.0);
    std::uniform_real_distribution<double> value(0.0, 3.0);
    for (int round = 0; round < 300; ++round) {
      // A batch of distinct sorted slots, some set to 0 (a slot turning invalid),
      // others to arbitrary doubles whose sums round.
      std::set<int64_t> chosen;
      const int64_t k = 1 + static_cast<int64_t>(rng() % 64);
      for (int64_t i = 0; i < k; ++i) chosen.insert(static_cast<int64_t>(rng() % capacity));
      std::vector<int64_t> slots(chosen.begin(), chosen.end());
      std::vector<double> w;
      for (int64_t s : slots) {
        const double v = rng() % 5 == 0 ? 0.0 : std::pow(value(rng), 0.6);
        w.push_back(v);
        weights[static_cast<size_t>(s)] = v;
      }
      t.assign(slots, w);
    }
    const HostTree want = rebuilt(capacity, weights);
    EXPECT_TRUE(same_kept_bits(t.sum, want.sum, t.leaves)) << "capacity " << capacity;
    EXPECT_TRUE(same_kept_bits(t.min, want.min, t.leaves)) << "capacity " << capacity;
  }
}

// Every slot assigned, slot s the weight base + s % period.
HostTree periodic_tree(int64_t capacity, double base, int64_t period) {
  HostTree t(capacity);
  std::vector<int64_t> slots(static_cast<size_t>(capacity));
  std::vector<double> w(static_cast<size_t>(capacity));
  for (int64_t s = 0; s < capacity; ++s) {
    slots[s] = s;
    w[s] = base + static_cast<double>(s % period);
  }
  t.assign(slots, w);
  return t;
}

TEST(ProportionalTree, ADrawReadsTwoNodesPerLevel) {
  // 2^20 leaves (two levels per step from the root) and 2^19 (one step at the root first)
  for (const auto& [capacity, depth] : {std::pair<int64_t, int64_t>{1000000, 20}, {300000, 19}}) {
    HostTree t = periodic_tree(capacity, 1.0, 13);
    ASSERT_EQ(t.leaves, int64_t{1} << depth);
    std::vector<int64_t> drawn(256);
    proportional_draw_host(t.view(), 3, 9, 256, drawn.data());
    for (int64_t b = 0; b < 256; ++b) {
      int64_t reads = 0;
      const double target = tree::stratified_target(3, 9, static_cast<uint32_t>(b), 256, t.sum[1]);
      const int64_t slot = tree::descend(CountingSum{t.sum.data(), &reads}, t.leaves, target);
      EXPECT_EQ(slot, drawn[b]);
      EXPECT_EQ(reads, 2 * depth) << "capacity " << capacity << " draw " << b;
    }
  }
}

TEST(ProportionalTree, KeptNodesAreEveryOtherLevelFromTheLeavesAndTheRoot) {
  EXPECT_EQ(tree::depth_of(1), 0);
  EXPECT_EQ(tree::depth_of(2), 1);
  EXPECT_EQ(tree::depth_of(int64_t{1} << 23), 23);
  // 8 leaves (depth 3): the root, nodes 2 and 3 (height 2), the leaves 8 .. 15
  for (int64_t node = 1; node < 16; ++node) {
    EXPECT_EQ(tree::kept(8, node), node == 1 || node == 2 || node == 3 || node >= 8) << node;
  }
  // 16 leaves (depth 4): the root (height 4), 4 .. 7 (height 2), the leaves
  for (int64_t node = 1; node < 32; ++node) {
    EXPECT_EQ(tree::kept(16, node), node == 1 || (node >= 4 && node < 8) || node >= 16) << node;
  }
  const auto heights = [](int depth) {
    std::vector<int> out;
    for (int h = tree::next_kept_height(0, depth); h <= depth;
         h = tree::next_kept_height(h, depth)) {
      out.push_back(h);
    }
    return out;
  };
  EXPECT_EQ(heights(0), std::vector<int>{});
  EXPECT_EQ(heights(1), std::vector<int>{1});
  EXPECT_EQ(heights(2), std::vector<int>{2});
  EXPECT_EQ(heights(5), (std::vector<int>{2, 4, 5}));
  EXPECT_EQ(heights(6), (std::vector<int>{2, 4, 6}));
}

TEST(ProportionalTree, AnUpdateTouchesOnlyTheKeptAncestorsOfItsLeaves) {
  // Every node that is neither a kept ancestor of an updated leaf nor read to
  // recompute one (the four grandchildren of a kept ancestor at an even
  // height, the two children of the root at an odd depth) holds NaN: an
  // update that read such a node would carry NaN into the root's sum, and one
  // that wrote it would overwrite the NaN. Nodes at odd heights below the
  // root are never touched.
  HostTree t = periodic_tree(100000, 0.5, 7);  // 2^17 leaves: an odd depth
  const std::vector<int64_t> slots{3, 4, 5000, 77777, 99999};
  const std::vector<double> updated{2.0, 0.0, 9.5, 1e-3, 4.0};
  const int depth = tree::depth_of(t.leaves);
  ASSERT_EQ(depth % 2, 1);
  std::set<int64_t> allowed;
  for (int64_t s : slots) {
    allowed.insert(t.leaves + s);
    for (int h = tree::next_kept_height(0, depth); h <= depth;
         h = tree::next_kept_height(h, depth)) {
      const int64_t node = (t.leaves + s) >> h;
      allowed.insert(node);
      if (h % 2 == 0) {
        for (int64_t g = 4 * node; g < 4 * node + 4; ++g) allowed.insert(g);
      } else {
        allowed.insert(2);
        allowed.insert(3);
      }
    }
  }
  for (int64_t node : allowed) ASSERT_TRUE(tree::kept(t.leaves, node)) << node;
  HostTree poisoned = t;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int64_t node = 1; node < 2 * t.leaves; ++node) {
    if (!allowed.count(node)) poisoned.sum[node] = poisoned.min[node] = nan;
  }
  t.assign(slots, updated);
  poisoned.assign(slots, updated);
  for (int64_t node = 1; node < 2 * t.leaves; ++node) {
    if (allowed.count(node)) {
      ASSERT_EQ(std::memcmp(&poisoned.sum[node], &t.sum[node], sizeof(double)), 0) << node;
      ASSERT_EQ(std::memcmp(&poisoned.min[node], &t.min[node], sizeof(double)), 0) << node;
    } else {
      ASSERT_TRUE(std::isnan(poisoned.sum[node]) && std::isnan(poisoned.min[node])) << node;
    }
  }
  // per slot at most the leaf's kept ancestors at heights 2 .. 16 with their
  // grandchildren (8 x 5 nodes) and the root with its two children
  EXPECT_LE(allowed.size(), slots.size() * (8 * 5 + 3));
}

// Weights 1, 2, 0, 3, 0 (capacity 5, 8 leaves): prefix sums 1, 3, 3, 6, 6.
HostTree small_tree() {
  HostTree t(5);
  t.assign({0, 1, 2, 3, 4}, {1.0, 2.0, 0.0, 3.0, 0.0});
  return t;
}

TEST(ProportionalTree, TheWalkFindsTheFirstPrefixAboveTheTarget) {
  HostTree t = small_tree();
  ASSERT_EQ(t.sum[1], 6.0);
  ASSERT_EQ(t.min[1], 1.0);
  const auto draw = [&](double target) { return tree::descend(t.sum.data(), t.leaves, target); };
  EXPECT_EQ(draw(0.0), 0);
  EXPECT_EQ(draw(0.999), 0);
  EXPECT_EQ(draw(1.0), 1);  // on a boundary: the first prefix strictly above it
  EXPECT_EQ(draw(2.5), 1);
  EXPECT_EQ(draw(3.0), 3);  // the zero weight of slot 2 is skipped
  EXPECT_EQ(draw(5.999), 3);
  EXPECT_EQ(draw(6.0), 3);    // on the total: the last positive weight
  EXPECT_EQ(draw(1e300), 3);  // past it (padding and the zero of slot 4 never drawn)
}

TEST(ProportionalTree, TheWalkNeverDrawsAZeroWeight) {
  // Integer weights (exact sums) with runs of zeros, and every target between
  // 0 and past the total: the slot equals a left-to-right search, moved down
  // to the last positive weight for a target on or past the total.
  std::mt19937_64 rng(11);
  for (int64_t capacity : {1, 3, 17, 100}) {
    HostTree t(capacity);
    std::vector<int64_t> slots(capacity);
    std::vector<double> w(capacity);
    for (int64_t s = 0; s < capacity; ++s) {
      slots[s] = s;
      w[s] = rng() % 3 == 0 ? 0.0 : static_cast<double>(rng() % 5);
    }
    w[0] = 1.0;
    t.assign(slots, w);
    int64_t last_positive = 0;
    for (int64_t s = 0; s < capacity; ++s) {
      if (w[s] > 0) last_positive = s;
    }
    for (double target = 0.0; target <= t.sum[1] + 2.0; target += 0.5) {
      int64_t want = last_positive;
      double prefix = 0.0;
      for (int64_t s = 0; s < capacity; ++s) {
        prefix += w[s];
        if (prefix > target) {
          want = s;
          break;
        }
      }
      EXPECT_EQ(tree::descend(t.sum.data(), t.leaves, target), want)
          << "capacity " << capacity << " target " << target;
    }
  }
}

TEST(ProportionalTree, RoundingPastARightSubtreeLandsOnItsLastPositiveWeight) {
  // Leaves 1, 2^-60, 0, 0: the left half sums to 1 (2^-60 is lost), so a
  // target of 1 goes right with nothing there, and the walk keeps left.
  HostTree t(4);
  t.assign({0, 1}, {1.0, std::ldexp(1.0, -60)});
  ASSERT_EQ(t.sum[1], 1.0);
  EXPECT_EQ(tree::descend(t.sum.data(), t.leaves, 1.0), 1);
  EXPECT_EQ(t.min[1], std::ldexp(1.0, -60));
}

TEST(ProportionalTree, AllZeroWeightsLeaveAZeroTotalAndNoSmallest) {
  HostTree t = small_tree();
  t.assign({0, 1, 3}, {0.0, 0.0, 0.0});
  EXPECT_EQ(t.sum[1], 0.0);
  EXPECT_EQ(t.min[1], kInf);
}

// A tree in the (sum, min) pairs layout (stride 2), every weight 0.
struct PairTree {
  explicit PairTree(int64_t capacity)
      : leaves(tree::leaf_count(capacity)), nodes(static_cast<size_t>(4 * leaves)) {
    for (size_t i = 0; i < nodes.size(); i += 2) {
      nodes[i] = 0.0;
      nodes[i + 1] = kInf;
    }
  }
  tree::TreeView view() { return {nodes.data(), nodes.data() + 1, leaves, 2}; }
  void poison_unkept() {  // as HostTree::poison_unkept
    for (int64_t node = 1; node < 2 * leaves; ++node) {
      if (!tree::kept(leaves, node)) nodes[2 * node] = nodes[2 * node + 1] = std::nan("");
    }
  }
  // The sums and the mins as two arrays (the stride-1 layout's).
  std::vector<double> sums() const { return every_other(0); }
  std::vector<double> mins() const { return every_other(1); }
  std::vector<double> every_other(size_t first) const {
    std::vector<double> out;
    for (size_t i = first; i < nodes.size(); i += 2) out.push_back(nodes[i]);
    return out;
  }
  int64_t leaves;
  std::vector<double> nodes;
};

// One leaf at a time, then its ancestors one by one up to the root, every
// level stored: the straightforward update the batched loop over the kept
// levels must equal at every kept node.
void assign_one_at_a_time(tree::TreeView t, const std::vector<int64_t>& slots,
                          const std::vector<double>& weights) {
  for (size_t i = 0; i < slots.size(); ++i) {
    tree::set_leaf(t, slots[i], weights[i]);
    for (int64_t node = (t.leaves + slots[i]) / 2; node >= 1; node /= 2) {
      tree::refresh_node(t, node);
    }
  }
}

// A random batch for proportional_assign_host: distinct sorted slots, about a
// fifth of them weight 0, the rest doubles whose sums round.
void random_batch(std::mt19937_64& rng, int64_t capacity, std::vector<int64_t>* slots,
                  std::vector<double>* weights) {
  std::set<int64_t> chosen;
  const int64_t k = 1 + static_cast<int64_t>(rng() % 300);
  for (int64_t i = 0; i < k; ++i) chosen.insert(static_cast<int64_t>(rng() % capacity));
  slots->assign(chosen.begin(), chosen.end());
  weights->clear();
  std::uniform_real_distribution<double> value(0.0, 3.0);
  for (size_t i = 0; i < slots->size(); ++i) {
    weights->push_back(rng() % 5 == 0 ? 0.0 : std::pow(value(rng), 0.6));
  }
}

constexpr int64_t kCapacities[] = {1, 2, 3, 7, 1000, 4096, 5001};

TEST(ProportionalTree, BatchedUpdatesEqualOneLeafAtATimeInBothLayouts) {
  for (int64_t capacity : kCapacities) {
    std::mt19937_64 rng(static_cast<uint64_t>(capacity) + 100);
    HostTree reference(capacity), arrays(capacity);
    PairTree pairs(capacity);
    for (int round = 0; round < 200; ++round) {
      std::vector<int64_t> slots;
      std::vector<double> w;
      random_batch(rng, capacity, &slots, &w);
      if (round % 50 == 49) w.assign(w.size(), 0.0);  // a batch of zeros only
      assign_one_at_a_time(reference.view(), slots, w);
      arrays.assign(slots, w);
      proportional_assign_host(pairs.view(), slots.data(), w.data(),
                               static_cast<int64_t>(slots.size()));
    }
    const int64_t leaves = reference.leaves;
    EXPECT_TRUE(same_kept_bits(arrays.sum, reference.sum, leaves)) << "capacity " << capacity;
    EXPECT_TRUE(same_kept_bits(arrays.min, reference.min, leaves)) << "capacity " << capacity;
    EXPECT_TRUE(same_kept_bits(pairs.sums(), reference.sum, leaves)) << "capacity " << capacity;
    EXPECT_TRUE(same_kept_bits(pairs.mins(), reference.min, leaves)) << "capacity " << capacity;
  }
}

TEST(ProportionalTree, LevelSynchronousDrawsEqualAWalkOverEveryLevelInBothLayouts) {
  for (int64_t capacity : kCapacities) {
    std::mt19937_64 rng(static_cast<uint64_t>(capacity) + 200);
    HostTree reference(capacity), arrays(capacity);
    PairTree pairs(capacity);
    arrays.poison_unkept();  // never read: the draws below must not see it
    pairs.poison_unkept();
    for (int round = 0; round < 20; ++round) {
      std::vector<int64_t> slots;
      std::vector<double> w;
      random_batch(rng, capacity, &slots, &w);
      assign_one_at_a_time(reference.view(), slots, w);
      arrays.assign(slots, w);
      proportional_assign_host(pairs.view(), slots.data(), w.data(),
                               static_cast<int64_t>(slots.size()));
      const double total = arrays.sum[1];
      if (!(total > 0.0)) continue;
      for (int64_t batch : {1, 5, 256}) {
        const uint64_t call = static_cast<uint64_t>(round) * 3 + static_cast<uint64_t>(batch);
        std::vector<int64_t> from_arrays(static_cast<size_t>(batch), -1);
        std::vector<int64_t> from_pairs(static_cast<size_t>(batch), -1);
        proportional_draw_host(arrays.view(), 5, call, batch, from_arrays.data());
        proportional_draw_host(pairs.view(), 5, call, batch, from_pairs.data());
        for (int64_t b = 0; b < batch; ++b) {
          const double target =
              tree::stratified_target(5, call, static_cast<uint32_t>(b), batch, total);
          const int64_t want = full_tree_descend(reference.sum, reference.leaves, target);
          ASSERT_EQ(tree::descend(arrays.sum.data(), arrays.leaves, target), want)
              << "capacity " << capacity << " round " << round << " draw " << b;
          ASSERT_EQ(from_arrays[static_cast<size_t>(b)], want)
              << "capacity " << capacity << " round " << round << " draw " << b;
          ASSERT_EQ(from_pairs[static_cast<size_t>(b)], want)
              << "capacity " << capacity << " round " << round << " draw " << b;
          ASSERT_GT(arrays.sum[static_cast<size_t>(arrays.leaves + want)], 0.0);
        }
      }
    }
  }
}

TEST(ProportionalTree, APairsDescentReadsTheSumsAtEvenPositions) {
  // The pairs layout read through tree::sums is the arrays layout's walk: the
  // same slot for targets across the whole range, including past the total.
  HostTree arrays = small_tree();
  PairTree pairs(5);
  const std::vector<int64_t> slots{0, 1, 2, 3, 4};
  const std::vector<double> w{1.0, 2.0, 0.0, 3.0, 0.0};
  proportional_assign_host(pairs.view(), slots.data(), w.data(), 5);
  EXPECT_EQ(tree::sum_at(pairs.view(), 1), 6.0);
  EXPECT_EQ(tree::min_at(pairs.view(), 1), 1.0);
  for (double target = 0.0; target <= 7.0; target += 0.25) {
    EXPECT_EQ(tree::descend(tree::sums(pairs.view()), pairs.leaves, target),
              tree::descend(arrays.sum.data(), arrays.leaves, target))
        << "target " << target;
  }
}

}  // namespace
}  // namespace obsaug
