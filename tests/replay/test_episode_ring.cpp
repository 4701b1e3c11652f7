// EpisodeRing (replay/episode_ring.h) against a brute-force model: random
// streams of several interleaved envs with terminations, truncations and
// re-resets, small capacities so the ring wraps often. After every push the
// validity of every slot, the valid count, the stacks and the n-step values
// must equal what the model computes from the whole history.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/huge_pages.h"
#include "replay/episode_ring.h"
#include "tests/test_util.h"

namespace obsaug {
namespace {

using testing::error_of;
using testing::expect_mentions;

// Every frame ever pushed, with its episode and position in it.
struct Frame {
  int64_t episode;
  int64_t position;
  float reward;
  bool terminated;
  bool ended;
};

struct Model {
  int64_t capacity;
  int32_t stack;
  int32_t n_step;
  double gamma;
  std::vector<Frame> frames;                   // by logical index
  std::vector<std::vector<int64_t>> episodes;  // logical indices of each episode's frames

  int64_t oldest() const {
    const int64_t total = static_cast<int64_t>(frames.size());
    return total > capacity ? total - capacity : 0;
  }
  const std::vector<int64_t>& episode_of(int64_t t) const {
    return episodes[static_cast<size_t>(frames[static_cast<size_t>(t)].episode)];
  }
  // Frames of the stack ending at t, oldest first.
  std::vector<int64_t> stack_of(int64_t t) const {
    const auto& ep = episode_of(t);
    const int64_t pos = frames[static_cast<size_t>(t)].position;
    std::vector<int64_t> out;
    for (int32_t s = stack - 1; s >= 0; --s)
      out.push_back(ep[static_cast<size_t>(std::max<int64_t>(0, pos - s))]);
    return out;
  }
  int32_t steps_of(int64_t t) const {  // n', or 0 when not (yet) a transition
    const auto& ep = episode_of(t);
    const int64_t pos = frames[static_cast<size_t>(t)].position;
    const int64_t last = static_cast<int64_t>(ep.size()) - 1;
    const bool ended = frames[static_cast<size_t>(ep.back())].ended;
    const int64_t ahead = last - pos;
    if (ahead >= n_step) return n_step;
    return ended ? static_cast<int32_t>(ahead) : 0;
  }
  bool valid(int64_t t) const {
    if (t < oldest()) return false;
    for (int64_t f : stack_of(t)) {
      if (f < oldest()) return false;
    }
    return steps_of(t) >= 1;
  }
};

void check_against_model(const EpisodeRing& ring, const Model& m) {
  int64_t count = 0;
  for (int64_t slot = 0; slot < ring.size(); ++slot) {
    const int64_t t = ring.logical_of(slot);
    ASSERT_EQ(t % m.capacity, slot);
    const bool expected = m.valid(t);
    ASSERT_EQ(ring.valid(slot), expected) << "slot " << slot << " frame " << t;
    count += expected;
    if (!expected) continue;
    std::vector<int64_t> slots(static_cast<size_t>(m.stack));
    ring.stack(t, slots.data());
    const std::vector<int64_t> frames = m.stack_of(t);
    for (int32_t s = 0; s < m.stack; ++s) ASSERT_EQ(slots[s], frames[s] % m.capacity);
    const SampledTransition tr = ring.transition(t);
    const int32_t steps = m.steps_of(t);
    ASSERT_EQ(tr.steps, steps);
    const auto& ep = m.episode_of(t);
    const int64_t pos = m.frames[static_cast<size_t>(t)].position;
    const int64_t next = ep[static_cast<size_t>(pos + steps)];
    ASSERT_EQ(tr.next_frame, next);
    ASSERT_EQ(tr.action_slot, ep[static_cast<size_t>(pos + 1)] % m.capacity);
    double ret = 0, g = 1;
    for (int32_t k = 1; k <= steps; ++k) {
      ret += g * m.frames[static_cast<size_t>(ep[static_cast<size_t>(pos + k)])].reward;
      g *= m.gamma;
    }
    ASSERT_EQ(tr.reward, ret);
    ASSERT_EQ(tr.discount, m.frames[static_cast<size_t>(next)].terminated ? 0.0 : g);
  }
  ASSERT_EQ(ring.num_valid(), count);
}

struct Stream {
  int64_t capacity;
  int32_t stack;
  int32_t n_step;
  int envs;
  int64_t pushes;
  uint32_t seed;
};

class RingVsModel : public ::testing::TestWithParam<Stream> {};

TEST_P(RingVsModel, ValidityStacksAndReturnsMatch) {
  const Stream p = GetParam();
  EpisodeRing ring(p.capacity, p.stack, p.n_step, 0.9);
  Model m{p.capacity, p.stack, p.n_step, 0.9, {}, {}};
  std::mt19937 rng(p.seed);
  std::vector<int64_t> open_episode(static_cast<size_t>(p.envs), -1);
  for (int64_t i = 0; i < p.pushes; ++i) {
    const int env = static_cast<int>(rng() % p.envs);
    int64_t& episode = open_episode[static_cast<size_t>(env)];
    const bool reset = episode < 0 || rng() % 23 == 0;  // sometimes reset an open episode
    if (reset) {
      if (episode >= 0) m.frames[static_cast<size_t>(m.episodes[episode].back())].ended = true;
      ring.push_first(env);
      m.episodes.push_back({static_cast<int64_t>(m.frames.size())});
      episode = static_cast<int64_t>(m.episodes.size()) - 1;
      m.frames.push_back({episode, 0, 0.0f, false, false});
    } else {
      const float reward = static_cast<float>(rng() % 100) / 8.0f;
      const uint32_t roll = rng() % 20;
      const bool terminated = roll == 0;
      const bool truncated = roll == 1;
      ASSERT_TRUE(ring.can_continue(env));
      ring.push(env, reward, terminated, truncated);
      auto& ep = m.episodes[static_cast<size_t>(episode)];
      m.frames.push_back(
          {episode, static_cast<int64_t>(ep.size()), reward, terminated, terminated || truncated});
      ep.push_back(static_cast<int64_t>(m.frames.size()) - 1);
      if (terminated || truncated) episode = -1;
    }
    check_against_model(ring, m);
    if (HasFatalFailure()) FAIL() << "after push " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Streams, RingVsModel,
                         ::testing::Values(Stream{16, 3, 1, 1, 300, 1}, Stream{16, 3, 3, 1, 300, 2},
                                           Stream{7, 4, 2, 3, 400, 3}, Stream{50, 3, 5, 4, 600, 4},
                                           Stream{5, 1, 1, 2, 200, 5}, Stream{9, 8, 3, 2, 300, 6}));

TEST(EpisodeRing, PushWithoutOpenEpisodeIsRefused) {
  EpisodeRing ring(8, 3, 1, 0.99);
  const auto push = [&ring] { ring.push(0, 1.0f, false, false); };
  expect_mentions(error_of<std::invalid_argument>(push),
                  {"env 0 has no open episode", "add_first"});
  ring.push_first(0);
  ring.push(0, 1.0f, true, false);
  EXPECT_FALSE(ring.can_continue(0));
  expect_mentions(error_of<std::invalid_argument>(push),
                  {"env 0 has no open episode", "add_first"});
  EXPECT_EQ(ring.total(), 2);
}

TEST(EpisodeRing, RestoreRejectsLinksOutsideTheRing) {
  EpisodeRing ring(4, 2, 1, 0.99);
  std::vector<EpisodeRing::Slot> slots(4);
  slots[1].prev = 7;  // a predecessor from the future
  expect_mentions(error_of<std::invalid_argument>([&] { ring.restore(3, slots, {}); }),
                  {"replay state is inconsistent", "slot 1 links outside"});
  slots[1].prev = 0;
  slots[0].next = 1;
  slots[1].next = -5;
  expect_mentions(error_of<std::invalid_argument>([&] { ring.restore(3, slots, {}); }),
                  {"replay state is inconsistent", "slot 1 links outside"});
  expect_mentions(error_of<std::invalid_argument>(
                      [&] { ring.restore(3, std::vector<EpisodeRing::Slot>(3), {}); }),
                  {"3 slots for capacity 4"});
  EXPECT_EQ(ring.total(), 0);  // untouched by the refused restores
}

// The ring's per-slot arrays come from assign_on_huge_pages: n copies of the
// value in fresh memory, whatever the vector held before, at sizes below and
// above one 2 MiB page.
TEST(HugePages, AssignOnHugePagesGivesNCopiesInFreshMemory) {
  std::vector<double> v(10, 1.0);
  for (size_t n : {size_t{0}, size_t{5}, size_t{3} << 18}) {
    assign_on_huge_pages(&v, n, 2.5);
    ASSERT_EQ(v.size(), n);
    for (double x : v) ASSERT_EQ(x, 2.5);
  }
  std::vector<uint8_t> flags;
  assign_on_huge_pages(&flags, size_t{5} << 20, uint8_t{7});
  ASSERT_EQ(flags.size(), size_t{5} << 20);
  EXPECT_EQ(std::count(flags.begin(), flags.end(), uint8_t{7}), static_cast<long>(flags.size()));
}

}  // namespace
}  // namespace obsaug
