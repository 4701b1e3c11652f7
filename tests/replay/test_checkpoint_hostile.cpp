// Replay checkpoints as a hostile user makes them: a saved file edited field
// by field and resealed (both checksums recomputed, tests/replay/
// checkpoint_edit.h), so that what each edit meets is the loader's
// validation after the checksums. Every edit that leaves a state no buffer
// could be in is refused with std::invalid_argument naming the field (and
// the slot or env); an edit that leaves a valid state (the ring moved to
// other frame numbers, up to the frame-count cap) loads and goes on exactly
// as the original. A path that is not a regular file is refused at once.
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <future>
#include <limits>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "replay/checkpoint_format.h"
#include "replay/replay_buffer.h"
#include "tests/replay/checkpoint_edit.h"
#include "tests/test_util.h"

namespace obsaug {
namespace {

using testing::CheckpointEdit;
using testing::error_of;
using testing::expect_mentions;
using testing::TempDir;

constexpr int64_t kCap = int64_t{1} << 62;  // EpisodeRing::kMaxFrames

at::Tensor frames_of(int64_t n, int64_t value) {
  return at::full({n, 1, 2, 2}, value % 251, at::TensorOptions().dtype(at::kByte));
}

at::Tensor flags(int64_t n, bool v) {
  return at::full({n}, v, at::TensorOptions().dtype(at::kBool));
}

// A buffer of `capacity` 1x2x2 frames, two envs stepping together with
// episodes of 5 steps, after `steps` steps (the ring wraps when steps > capacity / 2).
ReplayBuffer filled(int64_t capacity, int64_t steps, bool prioritized = false,
                    at::ScalarType action_dtype = at::kFloat) {
  ReplayOptions o;
  o.capacity = capacity;
  o.frame_shape = {1, 2, 2};
  o.frame_stack = 2;
  o.action_shape = {2};
  o.action_dtype = action_dtype;
  o.n_step = 2;
  o.prioritized = prioritized;
  ReplayBuffer rb(o);
  for (int64_t t = 0; t < steps; ++t) {
    if (t % 5 == 0) {
      rb.add_first(frames_of(2, t));
    } else {
      rb.add(at::full({2, 2}, 0.25 * t).to(action_dtype), at::full({2}, 0.5 * t), frames_of(2, t),
             flags(2, t % 5 == 4), flags(2, false));
    }
  }
  return rb;
}

// The message of the std::invalid_argument that loading `edit` raises.
std::string load_error(const TempDir& dir, const CheckpointEdit& edit) {
  edit.write_sealed(dir.path().string());
  return error_of<std::invalid_argument>([&] { ReplayBuffer::load(dir.path().string()); });
}

CheckpointEdit saved(const ReplayBuffer& rb, const TempDir& dir) {
  rb.save(dir.path().string());
  return CheckpointEdit::of_dir(dir.path().string());
}

TEST(CheckpointHostile, TheResealAloneLoads) {
  TempDir dir;
  const ReplayBuffer rb = filled(6, 9);
  saved(rb, dir).write_sealed(dir.path().string());
  EXPECT_EQ(ReplayBuffer::load(dir.path().string()).total_frames(), rb.total_frames());
}

// Case 1: the frame count near 2^63 with every link -1 (once loaded, six
// add_first calls overflowed the counter and wrote outside the storage).
TEST(CheckpointHostile, AFrameCountPastTheCapIsRefusedNamingIt) {
  TempDir dir;
  CheckpointEdit edit = saved(filled(3, 4), dir);
  ASSERT_EQ(edit.slots(), 3);
  for (int64_t slot = 0; slot < 3; ++slot)
    edit.set_slot<int64_t>(slot, "prev", -1).set_slot<int64_t>(slot, "next", -1);
  for (int64_t env = 0; env < edit.envs(); ++env) edit.set_env<int64_t>(env, "last", -1);
  for (const int64_t total :
       {std::numeric_limits<int64_t>::max() - 1, kCap + 1, std::numeric_limits<int64_t>::min()}) {
    edit.set_header("total_frames", total);
    const std::string words = "header field 'total_frames' is " + std::to_string(total) +
                              ", outside [0, 2^62 = 4611686018427387904]";
    expect_mentions(load_error(dir, edit), {"is corrupt or truncated", words.c_str()});
  }
  edit.set_header<uint64_t>("sample_calls", std::numeric_limits<uint64_t>::max());
  edit.set_header<int64_t>("total_frames", 8);
  expect_mentions(load_error(dir, edit), {"header field 'sample_calls' is 18446744073709551615"});
}

// The same ring, every frame number moved by a multiple of the capacity, is
// the same state: it loads and samples exactly as the original, up to the
// cap, where adding is refused by name (nothing written).
TEST(CheckpointHostile, ARingMovedToTheFrameCapLoadsAndStopsThere) {
  TempDir dir;
  ReplayBuffer rb = filled(12, 9);  // 18 frames: the ring wrapped
  ASSERT_GT(rb.num_valid(), 0);
  CheckpointEdit edit = saved(rb, dir);
  const int64_t total = rb.total_frames();
  const int64_t shift = (kCap - total) / 12 * 12;
  const auto moved = [&](int64_t v) { return v < 0 ? v : v + shift; };
  edit.set_header("total_frames", total + shift);
  for (int64_t slot = 0; slot < edit.slots(); ++slot) {
    for (const char* field : {"prev", "next"})
      edit.set_slot(slot, field, moved(edit.get<int64_t>(edit.slot_field(slot, field))));
  }
  for (int64_t env = 0; env < edit.envs(); ++env)
    edit.set_env(env, "last", moved(edit.get<int64_t>(edit.env_field(env, "last"))));
  edit.write_sealed(dir.path().string());
  ReplayBuffer far = ReplayBuffer::load(dir.path().string());
  EXPECT_EQ(far.total_frames(), total + shift);
  EXPECT_EQ(far.num_valid(), rb.num_valid());
  const ReplayBatch a = rb.sample(16), b = far.sample(16);
  EXPECT_TRUE(at::equal(a.indices, b.indices));
  EXPECT_TRUE(at::equal(a.obs, b.obs));
  EXPECT_TRUE(at::equal(a.reward, b.reward));
  // kCap - (total + shift) < 12 frames of room: two-env adds until the cap.
  while (far.total_frames() + 2 <= kCap) far.add_first(frames_of(2, 1));
  const int64_t before = far.total_frames();
  expect_mentions(error_of<std::overflow_error>([&] { far.add_first(frames_of(2, 1)); }),
                  {"frames; 2 more would pass 2^62", "the most it counts"});
  EXPECT_EQ(far.total_frames(), before);  // nothing written
}

// Case 2: non-finite values no add could have stored.
TEST(CheckpointHostile, NonFiniteRewardsActionsAndOptionsAreRefusedNamingThem) {
  TempDir dir;
  const float nan = std::nanf("");
  const CheckpointEdit edit = saved(filled(8, 5, /*prioritized=*/true), dir);
  const int64_t slot = 3;  // a step, not a first frame
  ASSERT_GE(edit.get<int64_t>(edit.slot_field(slot, "prev")), 0);
  for (const float bad : {nan, HUGE_VALF, -HUGE_VALF}) {
    CheckpointEdit e = edit;
    expect_mentions(load_error(dir, e.set_slot(slot, "reward", bad)),
                    {"slot 3 (frame 3): 'reward' is "});
  }
  for (const float bad : {nan, HUGE_VALF}) {
    CheckpointEdit e = edit;
    e.set(e.section("the actions") + 2 * e.action_row_bytes() + sizeof(float), bad);
    expect_mentions(load_error(dir, e), {"the action of slot 2 holds ", " at element 1",
                                         "(a float action must be finite)"});
  }
  struct Option {
    const char* field;
    double value;
    const char* words;
  };
  for (const Option& o : {Option{"gamma", std::nan(""), "gamma must be in [0, 1], got nan"},
                          Option{"gamma", 1.5, "gamma must be in [0, 1], got 1.500000"},
                          Option{"alpha", HUGE_VAL, "alpha must be finite and >= 0, got inf"},
                          Option{"alpha", -1, "alpha must be finite and >= 0, got -1.000000"},
                          Option{"beta", std::nan(""), "beta must be finite and >= 0, got nan"}}) {
    CheckpointEdit e = edit;
    expect_mentions(load_error(dir, e.set_header(o.field, o.value)),
                    {"is corrupt or truncated: header: ", o.words});
  }
  // a float16 buffer's action that is inf
  const CheckpointEdit half = saved(filled(8, 5, false, at::kHalf), dir);
  CheckpointEdit e = half;
  e.set<uint16_t>(e.section("the actions") + 4 * e.action_row_bytes(), 0x7c00);
  expect_mentions(load_error(dir, e), {"the action of slot 4 holds inf at element 0"});
}

TEST(CheckpointHostile, OptionsOutOfTheirRangesAreRefusedNamingThem) {
  TempDir dir;
  const CheckpointEdit edit = saved(filled(8, 5), dir);
  struct Case {
    const char* field;
    int64_t value;
    bool wide;  // int64 field (else int32)
    const char* words;
  };
  for (const Case& c :
       {Case{"frame_stack", 0, false, "frame_stack must be in [1, 64], got 0"},
        Case{"frame_stack", 65, false, "frame_stack must be in [1, 64], got 65"},
        Case{"n_step", 0, false, "n_step must be in [1, 1000], got 0"},
        Case{"n_step", 1001, false, "n_step must be in [1, 1000], got 1001"},
        Case{"capacity", (int64_t{1} << 32) + 1, true, "capacity must be at most 2^32"}}) {
    CheckpointEdit e = edit;
    if (c.wide) {
      e.set_header(c.field, c.value);
    } else {
      e.set_header(c.field, static_cast<int32_t>(c.value));
    }
    expect_mentions(load_error(dir, e), {"is corrupt or truncated: header: ", c.words});
  }
  CheckpointEdit e = edit;
  e.set<uint32_t>(e.section("the env count"), uint32_t{1} << 21);
  expect_mentions(load_error(dir, e),
                  {"the env count 2097152 is more than 2^20 (env ids lie in [0, 2^20))"});
}

// Case 3: links that are each in range but do not agree with each other.
TEST(CheckpointHostile, LinksThatDisagreeAreRefusedNamingTheSlotOrEnv) {
  TempDir dir;
  // frames 0..7: env 0's episode 0, 2, 4, 6 and env 1's 1, 3, 5, 7, both open
  const CheckpointEdit edit = saved(filled(12, 4), dir);
  struct Case {
    const char* what;
    std::function<void(CheckpointEdit&)> edit;
    const char* words;
  };
  const std::vector<Case> cases = {
      {"a next that does not link back",
       [](CheckpointEdit& e) { e.set_slot<int64_t>(2, "next", 6); },
       "slot 2 (frame 2): 'next' is 6 but frame 6 (slot 6) has 'prev' 4, not 2"},
      {"a prev that does not link back",
       [](CheckpointEdit& e) { e.set_slot<int64_t>(1, "prev", 0); },
       "slot 1 (frame 1): 'prev' is 0 but frame 0 (slot 0) has 'next' 2, not 1"},
      {"an open env whose last frame has a successor",
       [](CheckpointEdit& e) { e.set_env<int64_t>(0, "last", 4); },
       "env 0: 'open' is 1 but its 'last' frame 4 (slot 4) has a successor (its 'next' is 6)"},
      {"an ended frame with a successor",
       [](CheckpointEdit& e) { e.set_slot<uint8_t>(4, "ended", 1); },
       "slot 4 (frame 4): 'ended' is 1 but 'next' is 6"},
      {"a flag that is not 0 or 1", [](CheckpointEdit& e) { e.set_slot<uint8_t>(5, "ended", 7); },
       "slot 5 (frame 5): 'terminated' is 0 and 'ended' 7 (flags are 0 or 1)"},
      {"terminated without ended",
       [](CheckpointEdit& e) { e.set_slot<uint8_t>(7, "terminated", 1); },
       "slot 7 (frame 7): 'terminated' is 1 but 'ended' is 0"},
      {"a closed env whose last has not ended",
       [](CheckpointEdit& e) { e.set_env<uint8_t>(1, "open", 0); },
       "env 1: 'open' is 0 but its 'last' frame 7 (slot 7) has not ended"},
      {"two envs sharing a last frame", [](CheckpointEdit& e) { e.set_env<int64_t>(1, "last", 6); },
       "two envs have 'last' 6"},
      {"an open env without a frame", [](CheckpointEdit& e) { e.set_env<int64_t>(1, "last", -1); },
       "env 1: 'open' is 1 but 'last' is -1"},
      {"a frame no env can continue",
       [](CheckpointEdit& e) { e.set_env<int64_t>(1, "last", -1).set_env<uint8_t>(1, "open", 0); },
       "slot 7 (frame 7): it has no successor and has not ended, but it is no open env's 'last'"},
      {"a first frame with a reward", [](CheckpointEdit& e) { e.set_slot<float>(0, "reward", 1); },
       "slot 0 (frame 0): the first frame of an episode (its 'prev' is -1) has 'reward' 1"},
      {"a last beyond the frames written",
       [](CheckpointEdit& e) { e.set_env<int64_t>(0, "last", 8); },
       "env 0: 'last' is 8, not -1 or a frame written (< 8)"},
      {"a prev from the future", [](CheckpointEdit& e) { e.set_slot<int64_t>(1, "prev", 5); },
       "slot 1 (frame 1): 'prev' is 5, not -1 or an earlier frame"},
  };
  for (const Case& c : cases) {
    CheckpointEdit e = edit;
    c.edit(e);
    expect_mentions(load_error(dir, e),
                    {"is corrupt or truncated: replay state is inconsistent: ", c.words});
    if (HasFailure()) FAIL() << c.what;
  }
}

// Random in-range link and flag edits, resealed (the 300 checkpoints that
// all loaded, after which every sample raised a bare IndexError): each is
// refused as invalid_argument, or loads into a buffer that adds and samples.
TEST(CheckpointHostile, RandomLinkEditsAreRefusedOrLoadIntoAWorkingBuffer) {
  TempDir dir;
  const CheckpointEdit edit = saved(filled(10, 13, /*prioritized=*/true), dir);
  std::mt19937 rng(5);
  int loaded = 0;
  for (int i = 0; i < 300; ++i) {
    CheckpointEdit e = edit;
    const int64_t total = e.header().total_frames;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k) {
      const int64_t slot = static_cast<int64_t>(rng() % e.slots());
      const int64_t value = static_cast<int64_t>(rng() % (total + 2)) - 1;
      switch (rng() % 5) {
        case 0:
          e.set_slot(slot, "prev", value);
          break;
        case 1:
          e.set_slot(slot, "next", value);
          break;
        case 2:
          e.set_slot<uint8_t>(slot, "ended", rng() % 2);
          break;
        case 3:
          e.set_env(static_cast<int64_t>(rng() % e.envs()), "last", value);
          break;
        default:
          e.set_env<uint8_t>(static_cast<int64_t>(rng() % e.envs()), "open", rng() % 2);
      }
    }
    e.write_sealed(dir.path().string());
    std::optional<ReplayBuffer> rb;
    try {
      rb.emplace(ReplayBuffer::load(dir.path().string()));
    } catch (const std::invalid_argument& err) {
      EXPECT_NE(std::string(err.what()).find("is corrupt or truncated"), std::string::npos);
      continue;
    }
    ++loaded;
    rb->add_first(frames_of(2, 1));
    rb->add(at::zeros({2, 2}), at::zeros({2}), frames_of(2, 2), flags(2, false), flags(2, false));
    if (rb->num_valid() > 0) {
      const ReplayBatch b = rb->sample(8);
      EXPECT_EQ(b.obs.size(0), 8);
    }
  }
  EXPECT_GT(loaded, 0);  // the identity edits (a value set to what it was) load
}

TEST(CheckpointHostile, ACheckpointThatIsAFifoIsRefusedAtOnce) {
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir / checkpoint::kFileName).c_str(), 0600), 0);
  auto done = std::async(std::launch::async, [&] {
    return error_of<std::invalid_argument>([&] { ReplayBuffer::load(dir.path().string()); });
  });
  ASSERT_EQ(done.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "load blocked opening a FIFO";
  expect_mentions(done.get(), {"replay.obsaug: is a FIFO, not a regular file"});
}

}  // namespace
}  // namespace obsaug
