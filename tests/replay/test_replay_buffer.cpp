// obsaug::ReplayBuffer's C++ API: rejected calls leave the buffer as it was,
// checkpoints round-trip exactly and refuse damaged files, a save that fails
// (file size limit standing in for a full disk) keeps the previous
// checkpoint, and sample(augment_with(engine)) equals sample-then-augment.
#include <ATen/ops/abs.h>
#include <ATen/ops/add.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "replay/replay_buffer.h"
#include "tests/test_util.h"
#ifdef OBSAUG_WITH_ENGINE
#include "engine/config.h"
#include "kernels/augment.h"
#include "replay/engine_augment.h"
#endif

namespace obsaug {
namespace {

using testing::error_of;
using testing::expect_mentions;

ReplayOptions small_options(bool prioritized = false) {
  ReplayOptions o;
  o.capacity = 40;
  o.frame_shape = {3, 6, 5};
  o.frame_stack = 3;
  o.action_shape = {2};
  o.n_step = 2;
  o.gamma = 0.9;
  o.prioritized = prioritized;
  o.seed = 11;
  return o;
}

at::Tensor frame(int64_t value, const ReplayOptions& o) {
  return at::full({o.frame_shape[0], o.frame_shape[1], o.frame_shape[2]}, value % 251,
                  at::TensorOptions().dtype(at::kByte));
}

at::Tensor flag(bool v) { return at::scalar_tensor(v, at::TensorOptions().dtype(at::kBool)); }
at::Tensor number(double v) { return at::scalar_tensor(v, at::TensorOptions().dtype(at::kFloat)); }

// Episodes of 9 steps, long enough to wrap the ring twice.
void fill(ReplayBuffer& rb, int64_t steps) {
  const ReplayOptions& o = rb.options();
  int64_t t = rb.total_frames();
  for (int64_t i = 0; i < steps; ++i, ++t) {
    if (t % 10 == 0) {
      rb.add_first(frame(t, o));
      continue;
    }
    const at::Tensor action =
        at::arange(double(t), double(t + 2), at::TensorOptions().dtype(at::kFloat));
    rb.add(action, number(0.5 * t), frame(t, o), flag(t % 10 == 9), flag(false));
  }
}

void expect_same_batch(const ReplayBatch& a, const ReplayBatch& b) {
  EXPECT_TRUE(at::equal(a.obs, b.obs));
  EXPECT_TRUE(at::equal(a.next_obs, b.next_obs));
  EXPECT_TRUE(at::equal(a.action, b.action));
  EXPECT_TRUE(at::equal(a.reward, b.reward));
  EXPECT_TRUE(at::equal(a.discount, b.discount));
  EXPECT_TRUE(at::equal(a.indices, b.indices));
  EXPECT_EQ(a.weights.defined(), b.weights.defined());
  if (a.weights.defined()) {
    EXPECT_TRUE(at::equal(a.weights, b.weights));
  }
}

std::string temp_dir(const std::string& name) {
  return ::testing::TempDir() + "obsaug_replay_" + name + "_" + std::to_string(::getpid());
}

// The names in `dir` but . and .., sorted.
std::vector<std::string> entries_of(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(ReplayBuffer, RejectedAddLeavesTheBufferUnchanged) {
  ReplayBuffer rb(small_options());
  ReplayBuffer twin(small_options());
  fill(rb, 25);
  fill(twin, 25);
  const ReplayOptions& o = rb.options();
  const at::Tensor f = frame(99, o);
  // Wrong frame dtype / shape, wrong action shape, NaN reward, env without an episode.
  expect_mentions(error_of<c10::TypeError>([&] {
                    rb.add(at::zeros({2}), number(1), f.to(at::kFloat), flag(false), flag(false));
                  }),
                  {"ReplayBuffer.add", "frame must be uint8 [3, 6, 5]", "got float32"});
  expect_mentions(error_of<std::invalid_argument>([&] {
                    rb.add(at::zeros({2}), number(1), f.narrow(1, 0, 3), flag(false), flag(false));
                  }),
                  {"frame must be uint8 [3, 6, 5]", "[3, 3, 5]"});
  expect_mentions(error_of<std::invalid_argument>(
                      [&] { rb.add(at::zeros({3}), number(1), f, flag(false), flag(false)); }),
                  {"action must have shape [2]", "[3]"});
  expect_mentions(error_of<std::invalid_argument>(
                      [&] { rb.add(at::zeros({2}), number(NAN), f, flag(false), flag(false)); }),
                  {"reward"});
  // A batch where env 1 has no open episode: env 0's step is not written either.
  expect_mentions(error_of<std::invalid_argument>([&] {
                    rb.add(at::zeros({2, 2}), at::zeros({2}), at::stack({f, f}),
                           at::zeros({2}, at::TensorOptions().dtype(at::kBool)),
                           at::zeros({2}, at::TensorOptions().dtype(at::kBool)));
                  }),
                  {"add_first"});
  EXPECT_EQ(rb.total_frames(), twin.total_frames());
  EXPECT_EQ(rb.num_valid(), twin.num_valid());
  EXPECT_TRUE(at::equal(rb.storage(), twin.storage()));
  expect_same_batch(rb.sample(16), twin.sample(16));
  // With replacement, as SB3 and TorchRL: B > num_valid is a batch like any other; only an
  // empty buffer and a batch past the Philox b word's 2^32 draws are refused.
  const ReplayBatch large = rb.sample(rb.num_valid() + 1);
  EXPECT_EQ(large.indices.size(0), rb.num_valid() + 1);
  expect_same_batch(large, twin.sample(twin.num_valid() + 1));
  EXPECT_THROW(rb.sample((int64_t{1} << 32) + 1), std::invalid_argument);
  EXPECT_THROW(ReplayBuffer(small_options()).sample(1), std::invalid_argument);
}

TEST(ReplayBuffer, ASparseFrameIsRefusedBeforeTheRingChanges) {
  ReplayBuffer rb(small_options(true));
  ReplayBuffer twin(small_options(true));
  fill(rb, 25);
  fill(twin, 25);
  const at::Tensor sparse = frame(99, rb.options()).to_sparse();
  expect_mentions(
      error_of<c10::TypeError>(
          [&] { rb.add(at::zeros({2}), number(1), sparse, flag(false), flag(false)); }),
      {"ReplayBuffer.add", "frame must be a dense (strided) uint8 tensor", "Sparse", "to_dense()"});
  expect_mentions(error_of<c10::TypeError>([&] { rb.add_first(sparse); }),
                  {"ReplayBuffer.add_first", "dense (strided)"});
  expect_mentions(error_of<c10::TypeError>([&] {
                    rb.add_first(
                        at::stack({frame(1, rb.options()), frame(2, rb.options())}).to_sparse(),
                        std::vector<int64_t>{3, 4});
                  }),
                  {"dense (strided)"});
  EXPECT_EQ(rb.total_frames(), twin.total_frames());
  EXPECT_EQ(rb.num_valid(), twin.num_valid());
  EXPECT_TRUE(at::equal(rb.storage(), twin.storage()));
  expect_same_batch(rb.sample(16), twin.sample(16));
  // and the env's episode continues as if the calls had not been made
  fill(rb, 3);
  fill(twin, 3);
  expect_same_batch(rb.sample(16), twin.sample(16));
}

TEST(ReplayBuffer, ABatchTakesOneRewardPerEnvAndNamesItsEnvs) {
  ReplayOptions o = small_options();
  o.n_step = 1;
  ReplayBuffer rb(o);
  ReplayBuffer twin(o);
  const at::Tensor two = at::stack({frame(1, o), frame(2, o)});
  expect_mentions(
      error_of<std::invalid_argument>([&] { rb.add_first(two, std::vector<int64_t>{}); }),
      {"ReplayBuffer.add_first", "env names 0 envs for 2 frames"});
  EXPECT_EQ(rb.total_frames(), 0);
  rb.add_first(two);  // envs not given: 0 and 1
  twin.add_first(two, std::vector<int64_t>{0, 1});
  const at::Tensor actions = at::zeros({2, 2});
  const at::Tensor no = at::zeros({2}, at::TensorOptions().dtype(at::kBool));
  // One number for a batch of two envs: refused, not copied to both.
  expect_mentions(error_of<std::invalid_argument>([&] { rb.add(actions, number(5), two, no, no); }),
                  {"ReplayBuffer.add", "reward must be [N] = [2], one per env", "got"});
  expect_mentions(error_of<std::invalid_argument>(
                      [&] { rb.add(actions, at::ones({2}), two, no, no, std::vector<int64_t>{}); }),
                  {"env names 0 envs for 2 frames"});
  EXPECT_EQ(rb.total_frames(), 2);
  EXPECT_EQ(rb.num_valid(), 0);
  // [N] rewards, and one flag for all, are taken.
  rb.add(actions, at::tensor({1.0f, 2.0f}), two, flag(false), flag(false));
  twin.add(actions, at::tensor({1.0f, 2.0f}), two, flag(false), flag(false),
           std::vector<int64_t>{0, 1});
  EXPECT_EQ(rb.num_valid(), 2);
  expect_same_batch(rb.sample(8), twin.sample(8));
}

TEST(ReplayBuffer, FloatActionsMustBeFiniteInTheActionDtype) {
  for (const at::ScalarType dtype : {at::kHalf, at::kBFloat16, at::kFloat, at::kDouble}) {
    ReplayOptions o = small_options();
    o.action_dtype = dtype;
    o.n_step = 1;
    ReplayBuffer rb(o);
    rb.add_first(frame(0, o));
    const auto f64 = at::TensorOptions().dtype(at::kDouble);
    const double beyond = dtype == at::kHalf       ? 1e5
                          : dtype == at::kBFloat16 ? 1e39
                          : dtype == at::kFloat    ? 1e39
                                                   : 0.0;
    if (beyond != 0.0) {
      expect_mentions(error_of<std::invalid_argument>([&] {
                        rb.add(at::tensor({0.5, beyond}, f64), number(1), frame(1, o), flag(false),
                               flag(false));
                      }),
                      {"ReplayBuffer.add", "action must be finite", "at element 1",
                       "beyond the range of action_dtype"});
    }
    expect_mentions(error_of<std::invalid_argument>([&] {
                      rb.add(at::tensor({double(NAN), 0.0}, f64), number(1), frame(1, o),
                             flag(false), flag(false));
                    }),
                    {"action must be finite", "nan", "at element 0"});
    expect_mentions(error_of<std::invalid_argument>([&] {
                      rb.add(at::tensor({0.0, -double(INFINITY)}, f64), number(1), frame(1, o),
                             flag(false), flag(false));
                    }),
                    {"action must be finite", "-inf", "at element 1"});
    // batched: the row and column are one flat element index
    const at::Tensor two = at::stack({frame(1, o), frame(2, o)});
    expect_mentions(error_of<std::invalid_argument>([&] {
                      rb.add(at::tensor({0.0, 1.0, double(NAN), 3.0}, f64).view({2, 2}),
                             at::ones({2}), two, flag(false), flag(false),
                             std::vector<int64_t>{0, 1});
                    }),
                    {"action must be finite", "at element 2"});
    EXPECT_EQ(rb.total_frames(), 1) << c10::toString(dtype);
    rb.add(at::tensor({-1.5, 1000.0}, f64), number(1), frame(1, o), flag(false), flag(false));
    EXPECT_EQ(rb.total_frames(), 2);
    EXPECT_EQ(rb.sample(1).action[0][1].item<double>(), 1000.0);
  }
}

TEST(ReplayBuffer, BadPrioritiesChangeNothing) {
  ReplayBuffer rb(small_options(true));
  ReplayBuffer twin(small_options(true));
  fill(rb, 30);
  fill(twin, 30);
  const at::Tensor idx = at::tensor({1, 2, 3}, at::TensorOptions().dtype(at::kLong));
  for (const double bad : {double(NAN), -1.0, double(INFINITY)}) {
    expect_mentions(error_of<std::invalid_argument>([&] {
                      rb.update_priorities(idx, at::tensor({1.0, bad, 2.0}));
                    }),
                    {"priorities must be finite and >= 0", "position 1"});
  }
  expect_mentions(error_of<std::out_of_range>([&] {
                    rb.update_priorities(
                        at::tensor({101, 102, 103}, at::TensorOptions().dtype(at::kLong)),
                        at::tensor({1.0, 1.0, 1.0}));
                  }),
                  {"index 101", "not a stored slot"});
  // A priority dtype that is not real (bool, complex) is the wrong type.
  expect_mentions(error_of<c10::TypeError>([&] {
                    rb.update_priorities(idx, at::ones({3}, at::TensorOptions().dtype(at::kBool)));
                  }),
                  {"ReplayBuffer.update_priorities", "priorities must be a real", "bool"});
  expect_mentions(error_of<c10::TypeError>([&] {
                    rb.update_priorities(
                        idx, at::ones({3}, at::TensorOptions().dtype(at::kComplexFloat)));
                  }),
                  {"priorities must be a real", "complex"});
  expect_mentions(
      error_of<std::invalid_argument>([&] { rb.update_priorities(idx, at::ones({2})); }),
      {"priorities must be a real", "K = 3"});
  expect_same_batch(rb.sample(8), twin.sample(8));
  rb.update_priorities(idx, at::tensor({5.0, 0.0, 2.0}));
  twin.update_priorities(idx, at::tensor({5.0, 0.0, 2.0}));
  expect_same_batch(rb.sample(8), twin.sample(8));
}

TEST(ReplayBuffer, AnIndexRepeatedInOneUpdateKeepsItsLastPriority) {
  // Every stored slot's priority 0 but one valid slot's, given twice in one
  // call: the tree's total and smallest weight are the later value's q = p^alpha.
  for (const bool later_larger : {true, false}) {
    ReplayBuffer rb(small_options(true));
    fill(rb, 30);
    const int64_t slot = rb.sample(1).indices[0].item<int64_t>();  // a valid one
    const auto longs = at::TensorOptions().dtype(at::kLong);
    rb.update_priorities(at::arange(rb.size(), longs),
                         at::zeros({rb.size()}, at::TensorOptions().dtype(at::kDouble)));
    const double first = later_larger ? 1.0 : 4.0, last = later_larger ? 4.0 : 1.0;
    rb.update_priorities(at::tensor({slot, slot}, longs), at::tensor({first, last}));
    const PrioritySummary summary = rb.priority_summary();
    const double q = std::pow(last, rb.options().alpha);
    EXPECT_EQ(summary.total, q);
    EXPECT_EQ(summary.smallest, q);
  }
}

TEST(ReplayBuffer, CheckpointRoundTripContinuesExactly) {
  for (bool prioritized : {false, true}) {
    ReplayBuffer rb(small_options(prioritized));
    fill(rb, 95);  // wrapped twice
    rb.sample(4);
    const std::string dir = temp_dir("roundtrip");
    rb.save(dir);
    ReplayBuffer loaded = ReplayBuffer::load(dir);
    EXPECT_EQ(loaded.num_valid(), rb.num_valid());
    EXPECT_EQ(loaded.sample_calls(), rb.sample_calls());
    expect_same_batch(loaded.sample(12), rb.sample(12));
    fill(rb, 7);
    fill(loaded, 7);
    expect_same_batch(loaded.sample(12), rb.sample(12));
    std::remove((dir + "/replay.obsaug").c_str());
    ::rmdir(dir.c_str());
  }
}

TEST(ReplayBuffer, DamagedCheckpointsAreRefusedByName) {
  ReplayBuffer rb(small_options(true));
  fill(rb, 50);
  const std::string dir = temp_dir("damaged");
  rb.save(dir);
  const std::string path = dir + "/replay.obsaug";
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const auto write = [&](const std::string& content) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << content;
  };
  const auto message_of_load = [&]() -> std::string {
    try {
      ReplayBuffer::load(dir);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "loaded";
  };
  std::string flipped = bytes;
  flipped[flipped.size() / 2] ^= 0x10;
  write(flipped);
  EXPECT_NE(message_of_load().find("checksum"), std::string::npos) << message_of_load();
  write(bytes.substr(0, bytes.size() / 3));
  EXPECT_NE(message_of_load().find("truncated"), std::string::npos) << message_of_load();
  write("NOTARBUF" + bytes.substr(8));
  EXPECT_NE(message_of_load().find("OBSAUGRB"), std::string::npos) << message_of_load();
  write(bytes + "x");
  EXPECT_NE(message_of_load().find("after the data"), std::string::npos) << message_of_load();
  write(bytes);
  EXPECT_EQ(ReplayBuffer::load(dir).num_valid(), rb.num_valid());
  std::remove(path.c_str());
  ::rmdir(dir.c_str());
}

// A save that cannot be written (here: the file size limit, as a full disk
// would) throws, removes its temporary file and leaves the previous
// checkpoint loadable.
TEST(ReplayBuffer, FailedSaveKeepsThePreviousCheckpoint) {
  ReplayBuffer rb(small_options());
  fill(rb, 30);
  const std::string dir = temp_dir("failed_save");
  rb.save(dir);
  fill(rb, 30);
  std::string error;
  {
    const testing::ScopedFileSizeLimit full_disk(512);
    try {
      rb.save(dir);
    } catch (const std::runtime_error& e) {
      error = e.what();
    }
  }
  EXPECT_NE(error.find("cannot write"), std::string::npos) << error;
  EXPECT_EQ(entries_of(dir), std::vector<std::string>{"replay.obsaug"}) << "temporary left behind";
  const ReplayBuffer previous = ReplayBuffer::load(dir);
  EXPECT_EQ(previous.total_frames(), 30);
  std::remove((dir + "/replay.obsaug").c_str());
  ::rmdir(dir.c_str());
}

// A sample whose draws, rows and outputs would take more than the memory
// limit is refused with its size before anything is allocated (it was a bare
// bad_alloc at 2^32 draws, 16 GiB of host vectors at 2^31), and counts no call.
TEST(ReplayBuffer, ASampleTooLargeForMemoryIsRefusedWithItsSizeBeforeAllocating) {
  ReplayBuffer rb(small_options());
  fill(rb, 8);
  const uint64_t calls = rb.sample_calls();
  struct rusage before;
  ::getrusage(RUSAGE_SELF, &before);
  for (const int64_t batch : {int64_t{1} << 32, int64_t{1} << 31}) {
    const std::string words = "batch size " + std::to_string(batch) + " needs ";
    expect_mentions(error_of<std::invalid_argument>([&] { rb.sample(batch); }),
                    {"ReplayBuffer.sample: ", words.c_str(), "of host memory", "bytes per draw",
                     "more than the", "lower the batch size"});
  }
  struct rusage after;
  ::getrusage(RUSAGE_SELF, &after);
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 256 << 10) << "KiB of peak memory grew";
  EXPECT_EQ(rb.sample_calls(), calls);
  EXPECT_EQ(rb.sample(4).obs.size(0), 4);
}

// One thread adds while another samples and updates priorities: every call
// holds the buffer's lock, so none fails and (under TSan) none races.
TEST(ReplayBuffer, AddsInOneThreadWhileAnotherSamplesAndUpdates) {
  ReplayBuffer rb(small_options(/*prioritized=*/true));
  fill(rb, 40);
  std::atomic<int> failures{0};
  std::thread actor([&] {
    try {
      fill(rb, 1500);
    } catch (const std::exception&) {
      ++failures;
    }
  });
  for (int k = 0; k < 300; ++k) {
    try {
      const ReplayBatch b = rb.sample(8);
      rb.update_priorities(b.indices, at::full({8}, 0.5 + k % 5, at::kDouble));
      EXPECT_GE(rb.num_valid(), 1);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "call " << k << ": " << e.what();
    }
  }
  actor.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(rb.total_frames(), 1540);
}

#ifdef OBSAUG_WITH_ENGINE
const std::string kPhotos = std::string(OBSAUG_SOURCE_DIR) + "/data/photos";

bool have_photos() { return ::access((kPhotos + "/SOURCES.md").c_str(), F_OK) == 0; }

// Shift + overlay on 24x20 frames of 3 RGB stacked frames, a pool of 4 photos
// refreshed as `refresh` says.
Engine small_engine(const std::string& refresh) {
  return Engine(
      load_config_string("seed: 4\nframes: {stack: 3, channels: 3, height: 24, width: 20}\n"
                         "pipeline: [{op: shift, pad: 3}, {op: overlay, alpha: 0.4}]\n"
                         "pool: {size: 4, sources: [" +
                             kPhotos + "], refresh: " + refresh + "}\n",
                         "<test>", ""));
}

ReplayOptions small_frames(bool prioritized = false) {
  ReplayOptions o = small_options(prioritized);
  o.frame_shape = {3, 24, 20};
  return o;
}

TEST(ReplayBuffer, FusedSampleEqualsSampleThenAugment) {
  if (!have_photos()) GTEST_SKIP() << "no " << kPhotos;
  const ReplayOptions o = small_frames();
  Engine engine = small_engine("{threads: 0}");
  ReplayBuffer fused(o);
  ReplayBuffer plain(o);
  fill(fused, 60);
  fill(plain, 60);
  const StackAugment augment = augment_with(engine);
  for (bool share : {false, true}) {
    const uint64_t step = engine.step();
    const ReplayBatch a = fused.sample(10, &augment, share);
    const ReplayBatch b = plain.sample(10);
    EXPECT_EQ(engine.step(), step + (share ? 1 : 2));
    EXPECT_TRUE(at::equal(a.obs, engine.augment(b.obs, step)));
    EXPECT_TRUE(at::equal(a.next_obs, engine.augment(b.next_obs, share ? step : step + 1)));
    EXPECT_TRUE(at::equal(a.reward, b.reward));
  }
}

// The soak's shape in small (the full one is scripts/soak.py): one thread
// adds and samples with augmentation while another augments batches through
// the same engine, the refresh decoding at full speed. Run under TSan by
// scripts/sanitize.sh.
TEST(ReplayBuffer, SamplesWhileAnotherThreadAugmentsAndThePoolRefreshes) {
  if (!have_photos()) GTEST_SKIP() << "no " << kPhotos;
  const ReplayOptions o = small_frames(true);
  Engine engine = small_engine("{threads: 1, mode: async}");
  ReplayBuffer rb(o);
  fill(rb, 30);
  const StackAugment augment = augment_with(engine);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> augmented{0};
  std::thread other([&] {
    const at::Tensor obs = at::zeros({8, 9, 24, 20}, at::TensorOptions().dtype(at::kByte));
    while (!stop.load()) {
      engine.augment(obs);
      augmented.fetch_add(1);
    }
  });
  int64_t sampled = 0;
  for (int i = 0; i < 150; ++i) {
    fill(rb, 3);
    const ReplayBatch b = rb.sample(8, &augment);
    rb.update_priorities(b.indices, at::add(b.reward.abs().to(at::kDouble), 0.1));
    sampled += b.obs.size(0);
  }
  stop.store(true);
  other.join();
  EXPECT_EQ(sampled, 150 * 8);
  EXPECT_GT(augmented.load(), 0);
  EXPECT_EQ(engine.stats().pool_failed, 0u);
}
#endif

}  // namespace
}  // namespace obsaug
