// EpisodeRing (replay/episode_ring.h) against a brute-force model: random
// streams of several interleaved envs with terminations, truncations and
// re-resets, small capacities so the ring wraps often. After every push the
// validity of every slot, the valid count, the stacks and the n-step values
// must equal what the model computes from the whole history.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
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
                  {"replay state is inconsistent", "slot 1 (frame 1): 'prev' is 7"});
  slots[1].prev = 0;
  slots[0].next = 1;
  slots[1].next = -5;
  expect_mentions(error_of<std::invalid_argument>([&] { ring.restore(3, slots, {}); }),
                  {"replay state is inconsistent", "slot 1 (frame 1): 'next' is -5"});
  expect_mentions(error_of<std::invalid_argument>(
                      [&] { ring.restore(3, std::vector<EpisodeRing::Slot>(3), {}); }),
                  {"3 slots for capacity 4"});
  EXPECT_EQ(ring.total(), 0);  // untouched by the refused restores
}

// --- the checkpoint validator against every state pushes can make -------------------

// A ring's state as check_state sees it, in a canonical form: the frames in
// the ring, rewards only as what check_state may judge (finite; 0 on a first
// frame), the env table without trailing never-used entries.
struct RingState {
  int64_t total = 0;
  std::vector<EpisodeRing::Slot> slots;  // capacity entries; those past the ring unread
  std::vector<EpisodeRing::Env> envs;

  std::string key(int64_t capacity) const {
    std::string k = std::to_string(total) + "|";
    const int64_t size = std::min(total, capacity);
    for (int64_t t = total - size; t < total; ++t) {
      const EpisodeRing::Slot& s = slots[static_cast<size_t>(t % capacity)];
      const std::string reward = !std::isfinite(s.reward) ? "bad"
                                 : s.prev == -1           ? (s.reward == 0 ? "0" : "x")
                                                          : "ok";
      k += std::to_string(s.prev) + "," + std::to_string(s.next) + "," + reward + "," +
           std::to_string(s.terminated) + "," + std::to_string(s.ended) + ";";
    }
    size_t n = envs.size();
    while (n > 0 && envs[n - 1].last == -1 && envs[n - 1].open == 0) --n;
    k += "|";
    for (size_t e = 0; e < n; ++e)
      k += std::to_string(envs[e].last) + "," + std::to_string(envs[e].open) + ";";
    return k;
  }
};

RingState state_of(const EpisodeRing& ring) { return {ring.total(), ring.slots(), ring.envs()}; }

bool accepted(const EpisodeRing& ring, const RingState& s) {
  try {
    ring.check_state(s.total, s.slots, s.envs);
    return true;
  } catch (const std::invalid_argument&) {
    return false;
  }
}

// Every state that pushes of two envs make in a ring of `capacity` within
// `frames` frames (each push a reset, or a step that goes on, terminates or
// truncates), breadth first, by key.
std::map<std::string, RingState> reachable_states(int64_t capacity, int64_t frames) {
  std::map<std::string, RingState> reachable;
  std::vector<EpisodeRing> frontier{EpisodeRing(capacity, 2, 2, 0.9)};
  reachable[state_of(frontier[0]).key(capacity)] = state_of(frontier[0]);
  for (int64_t depth = 0; depth < frames; ++depth) {
    std::vector<EpisodeRing> next;
    for (const EpisodeRing& ring : frontier) {
      for (int64_t env = 0; env < 2; ++env) {
        std::vector<EpisodeRing> children{ring};
        children.back().push_first(env);
        if (ring.can_continue(env)) {
          for (const auto& [terminated, truncated] :
               {std::pair{false, false}, {true, false}, {false, true}}) {
            children.push_back(ring);
            children.back().push(env, 1.0f, terminated, truncated);
          }
        }
        for (EpisodeRing& child : children) {
          const RingState s = state_of(child);
          if (reachable.emplace(s.key(capacity), s).second) next.push_back(std::move(child));
        }
      }
    }
    frontier = std::move(next);
  }
  return reachable;
}

// Each edit of one field of `s` to one value of a small domain around the
// valid ones: links, flags, rewards (NaN, inf), env fields, the frame count.
std::vector<std::function<void(RingState&)>> edits_of(const RingState& s, int64_t capacity,
                                                      int64_t max_total) {
  std::vector<std::function<void(RingState&)>> out;
  const int64_t size = std::min(s.total, capacity);
  for (int64_t slot = 0; slot < size; ++slot) {
    const auto at = [slot](RingState& m) -> EpisodeRing::Slot& { return m.slots[slot]; };
    for (int64_t v = -2; v <= s.total; ++v) {
      out.push_back([=](RingState& m) { at(m).prev = v; });
      out.push_back([=](RingState& m) { at(m).next = v; });
    }
    for (uint8_t v : {0, 1, 2}) {
      out.push_back([=](RingState& m) { at(m).terminated = v; });
      out.push_back([=](RingState& m) { at(m).ended = v; });
    }
    for (float v : {0.0f, 2.5f, std::nanf(""), HUGE_VALF})
      out.push_back([=](RingState& m) { at(m).reward = v; });
  }
  for (size_t e = 0; e < s.envs.size(); ++e) {
    for (int64_t v = -2; v <= s.total; ++v)
      out.push_back([=](RingState& m) { m.envs[e].last = v; });
    for (uint8_t v : {0, 1, 2}) out.push_back([=](RingState& m) { m.envs[e].open = v; });
  }
  // other frame counts: over the same slots once the ring has wrapped
  for (int64_t v = s.total >= capacity ? capacity : 0; v <= max_total; ++v)
    out.push_back([=](RingState& m) { m.total = v; });
  return out;
}

// `f(edited state, what)` for every single edit of every state, and for 12
// random pairs of edits of each.
template <typename Judge>
void for_each_edited(const std::map<std::string, RingState>& states, int64_t capacity,
                     int64_t max_total, Judge&& judge) {
  std::mt19937 rng(7);
  for (const auto& [key, s] : states) {
    const auto edits = edits_of(s, capacity, max_total);
    for (size_t i = 0; i < edits.size(); ++i) {
      RingState m = s;
      edits[i](m);
      judge(m, "edit " + std::to_string(i) + " of " + key);
    }
    for (int pair = 0; pair < 12 && edits.size() > 1; ++pair) {
      RingState m = s;
      const size_t a = rng() % edits.size(), b = rng() % edits.size();
      edits[a](m);
      edits[b](m);
      judge(m, "edits " + std::to_string(a) + ", " + std::to_string(b) + " of " + key);
    }
  }
}

// Before the ring wraps, everything pushes wrote is in view: check_state
// must accept exactly the states pushes make (ring of 6, two envs, up to 6
// frames): each one, and no state one or two edits make of one unless that
// is itself one.
TEST(EpisodeRing, CheckStateAcceptsExactlyTheStatesPushesMakeBeforeTheRingWraps) {
  constexpr int64_t kCapacity = 6;
  const auto reachable = reachable_states(kCapacity, kCapacity);
  ASSERT_GT(reachable.size(), 1000u);
  const EpisodeRing checker(kCapacity, 2, 2, 0.9);
  for (const auto& [key, s] : reachable) ASSERT_TRUE(accepted(checker, s)) << key;
  int64_t judged = 0, refused = 0;
  for_each_edited(
      reachable, kCapacity, kCapacity, [&](const RingState& m, const std::string& what) {
        if (HasFatalFailure()) return;
        const bool pushes_make_it = reachable.count(m.key(kCapacity)) > 0;
        ASSERT_EQ(accepted(checker, m), pushes_make_it) << what << " gives " << m.key(kCapacity);
        ++judged;
        refused += pushes_make_it ? 0 : 1;
      });
  EXPECT_GT(refused, judged / 2);
  std::printf("%zu states pushes make, %lld edited states judged, %lld refused\n", reachable.size(),
              static_cast<long long>(judged), static_cast<long long>(refused));
}

// A wrapped ring: frames before it are gone, and check_state judges only
// what is in view and what refers to the gone frames. Every state pushes
// make is accepted, and every state it accepts (of any edit) goes on safely:
// each valid transition's stack and n-step walk stay inside the ring, and
// every push keeps the state one check_state accepts.
TEST(EpisodeRing, EveryStateCheckStateAcceptsGoesOnInsideTheRing) {
  constexpr int64_t kCapacity = 3;
  constexpr int64_t kFrames = 7;
  const auto reachable = reachable_states(kCapacity, kFrames);
  const EpisodeRing checker(kCapacity, 2, 2, 0.9);
  for (const auto& [key, s] : reachable) ASSERT_TRUE(accepted(checker, s)) << key;
  std::mt19937 rng(11);
  int64_t went_on = 0;
  for_each_edited(reachable, kCapacity, kFrames, [&](const RingState& m, const std::string& what) {
    if (HasFatalFailure() || !accepted(checker, m)) return;
    EpisodeRing ring(kCapacity, 2, 2, 0.9);
    ring.restore(m.total, m.slots, m.envs);
    for (int step = 0; step < 6; ++step) {
      const int64_t size = ring.size();
      for (int64_t slot = 0; slot < size; ++slot) {
        if (!ring.valid(slot)) continue;
        const int64_t t = ring.logical_of(slot);
        int64_t stack[2];
        ring.stack(t, stack);
        const SampledTransition tr = ring.transition(t);
        ASSERT_TRUE(tr.next_frame > t && tr.next_frame < ring.total()) << what;
        ASSERT_TRUE(tr.action_slot >= 0 && tr.action_slot < size) << what;
        ASSERT_TRUE(tr.steps >= 1 && tr.steps <= 2) << what;
        for (int64_t s : stack) ASSERT_TRUE(s >= 0 && s < size) << what;
        ring.stack(tr.next_frame, stack);
        for (int64_t s : stack) ASSERT_TRUE(s >= 0 && s < size) << what;
      }
      const int64_t env = static_cast<int64_t>(rng() % 3);
      if (ring.can_continue(env) && rng() % 4 != 0) {
        ring.push(env, 1.0f, rng() % 5 == 0, rng() % 7 == 0);
      } else {
        ring.push_first(env);
      }
      ASSERT_TRUE(accepted(ring, state_of(ring))) << what << ", then " << step + 1 << " pushes";
    }
    ++went_on;
  });
  EXPECT_GT(went_on, static_cast<int64_t>(reachable.size()));
}

TEST(EpisodeRing, ARestoredStateGoesOnAsTheRingItWasTakenFrom) {
  EpisodeRing ring(5, 3, 2, 0.9);
  std::mt19937 rng(3);
  for (int i = 0; i < 40; ++i) {
    const int64_t env = static_cast<int64_t>(rng() % 3);
    if (!ring.can_continue(env) || rng() % 7 == 0) {
      ring.push_first(env);
    } else {
      ring.push(env, 0.5f, rng() % 9 == 0, rng() % 11 == 0);
    }
  }
  EpisodeRing copy(5, 3, 2, 0.9);
  copy.restore(ring.total(), ring.slots(), ring.envs());
  ASSERT_EQ(copy.num_valid(), ring.num_valid());
  for (int i = 0; i < 20; ++i) {
    for (EpisodeRing* r : {&ring, &copy}) {
      if (r->can_continue(1))
        r->push(1, 1.0f, false, false);
      else
        r->push_first(1);
    }
    ASSERT_EQ(copy.num_valid(), ring.num_valid());
    for (int64_t slot = 0; slot < ring.size(); ++slot)
      ASSERT_EQ(copy.valid(slot), ring.valid(slot));
  }
}

TEST(EpisodeRing, TheFrameCountStopsAtItsCapNamingIt) {
  EpisodeRing ring(2, 1, 1, 0.9);
  std::vector<EpisodeRing::Slot> slots(2);
  slots[0].ended = 1;  // frame kMaxFrames - 2 (slot 0), then a first frame in slot 1
  std::vector<EpisodeRing::Env> envs{{EpisodeRing::kMaxFrames - 1, 1}};
  expect_mentions(error_of<std::invalid_argument>(
                      [&] { ring.restore(EpisodeRing::kMaxFrames + 2, slots, envs); }),
                  {"the frame count 4611686018427387906 is outside [0, 2^62"});
  // ended frame kMaxFrames - 2 was env 0's before its reset at kMaxFrames - 1
  ring.restore(EpisodeRing::kMaxFrames, slots, envs);
  expect_mentions(error_of<std::overflow_error>([&] { ring.push(0, 1.0f, false, false); }),
                  {"has counted 4611686018427387904 frames", "the most it counts"});
  expect_mentions(error_of<std::overflow_error>([&] { ring.push_first(0); }),
                  {"the most it counts"});
  EXPECT_EQ(ring.total(), EpisodeRing::kMaxFrames);
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
