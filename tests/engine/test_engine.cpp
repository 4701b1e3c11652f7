// obsaug::Engine (engine/engine.h) on the embedded photos (data/photos;
// skipped when absent): construction from the presets, the step counter,
// explicit steps, state round trips (sync mode: bit-identical outputs),
// several threads augmenting while the async refresh runs, input errors and
// close. The reference for every output is the stateless op
// (ops::augment with the same pipeline, seed, step and pool images).
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/randint.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/pool/distractor_pool.h"
#include "kernels/augment.h"
#include "tests/test_util.h"

namespace obsaug {
namespace {

using testing::error_of;
using testing::expect_mentions;

const std::string kRoot = OBSAUG_SOURCE_DIR;
const std::string kPhotos = kRoot + "/data/photos";

bool have_photos() {
  const std::string probe = kPhotos + "/SOURCES.md";
  FILE* f = std::fopen(probe.c_str(), "rb");
  if (f) std::fclose(f);
  return f != nullptr;
}

#define SKIP_WITHOUT_PHOTOS() \
  if (!have_photos()) GTEST_SKIP() << "no " << kPhotos << " (bash scripts/fetch_photos.sh)"

// Overlay + shift over the photos (or `source`) with a small pool.
Config small_config(const std::string& mode, int64_t pool_size = 12, uint64_t seed = 3,
                    const std::string& source = kPhotos) {
  const std::string text = "seed: " + std::to_string(seed) +
                           "\n"
                           "frames: {stack: 3, channels: 3, height: 40, width: 48}\n"
                           "pipeline:\n"
                           "  - {op: shift, pad: 4}\n"
                           "  - {op: overlay, alpha: 0.5}\n"
                           "pool:\n"
                           "  size: " +
                           std::to_string(pool_size) +
                           "\n"
                           "  sources: ['" +
                           source +
                           "']\n"
                           "  refresh: {threads: 2, mode: " +
                           mode + ", per_call: 3}\n";
  return load_config_string(text, "<test>");
}

at::Tensor random_obs(int64_t batch, int64_t channels, int64_t h, int64_t w, int64_t seed) {
  at::manual_seed(seed);
  return at::randint(0, 256, {batch, channels, h, w}, at::TensorOptions().dtype(at::kByte));
}

TEST(Engine, DefaultPresetAugmentsUint8) {
  SKIP_WITHOUT_PHOTOS();
  Engine engine = Engine::from_file(kRoot + "/configs/default.yaml");
  ASSERT_NE(engine.pool(), nullptr);
  const at::Tensor obs = random_obs(4, 9, 84, 84, 0);
  const at::Tensor out = engine.augment(obs);
  EXPECT_EQ(out.sizes(), obs.sizes());
  EXPECT_EQ(out.scalar_type(), at::kByte);
  EXPECT_FALSE(at::equal(out, obs));
  EXPECT_EQ(engine.step(), 1u);
  const EngineStats stats = engine.stats();
  EXPECT_EQ(stats.calls, 1u);
  EXPECT_EQ(stats.samples, 4u);
  EXPECT_TRUE(stats.has_pool);
  EXPECT_GE(stats.pool_decoded, 256u);
}

TEST(Engine, StepAdvancesAndExplicitStepReproduces) {
  SKIP_WITHOUT_PHOTOS();
  // threads: 0 means the pool is filled once and never refreshed, so the
  // pool is fixed and every output can be checked against the stateless op.
  Config config = small_config("async");
  config.pool.refresh.threads = 0;
  Engine engine(config);
  const at::Tensor pool = engine.pool()->images().clone();
  const at::Tensor obs = random_obs(5, 9, 40, 48, 1);
  const at::Tensor a = engine.augment(obs);
  const at::Tensor b = engine.augment(obs);
  EXPECT_EQ(engine.step(), 2u);
  EXPECT_FALSE(at::equal(a, b));  // steps 0 and 1 draw different parameters
  EXPECT_TRUE(at::equal(a, ops::augment(obs, pool, config.pipeline, config.seed, 0)));
  EXPECT_TRUE(at::equal(b, ops::augment(obs, pool, config.pipeline, config.seed, 1)));
  // An explicit step reuses parameters and leaves the counter alone.
  EXPECT_TRUE(at::equal(engine.augment(obs, 0), a));
  EXPECT_EQ(engine.step(), 2u);
  // In place equals out of place.
  const at::Tensor inplace = obs.clone();
  engine.augment_(inplace, 1);
  EXPECT_TRUE(at::equal(inplace, b));
  EXPECT_TRUE(at::equal(engine.pool()->images(), pool));
}

TEST(Engine, FloatOutputAppliesScaleAndBias) {
  SKIP_WITHOUT_PHOTOS();
  Config config = small_config("async");
  config.pool.refresh.threads = 0;
  config.output.dtype = OutputDtype::kFloat32;
  config.output.scale = 1.0 / 255;
  config.output.bias = -0.5;
  Engine engine(config);
  const at::Tensor obs = random_obs(3, 9, 40, 48, 2);
  const at::Tensor out = engine.augment(obs, 7);
  ASSERT_EQ(out.scalar_type(), at::kFloat);
  const at::Tensor v = ops::augment(obs, engine.pool()->images(), config.pipeline, config.seed, 7);
  EXPECT_TRUE(out.allclose(v.to(at::kFloat).mul(1.0 / 255).sub(0.5), 1e-6, 1e-6));
}

// output.reuse: one buffer per call site and shape, rewritten by the next
// call of that site; without it every call returns a fresh tensor.
TEST(Engine, ReusedOutputsKeepOneBufferPerSite) {
  SKIP_WITHOUT_PHOTOS();
  Config config = small_config("async");
  config.pool.refresh.threads = 0;
  Engine fresh(config);
  config.output.reuse = true;
  Engine reusing(config);
  const at::Tensor obs = random_obs(4, 9, 40, 48, 3);
  const at::Tensor a = reusing.augment(obs, 0);
  const at::Tensor a_value = a.clone();
  const at::Tensor b = reusing.augment(obs, 1);
  EXPECT_EQ(a.data_ptr(), b.data_ptr());
  EXPECT_TRUE(at::equal(b, fresh.augment(obs, 1)));
  EXPECT_TRUE(at::equal(a_value, fresh.augment(obs, 0)));
  // another shape: its own buffer
  const at::Tensor small = reusing.augment(random_obs(2, 9, 40, 48, 4), 2);
  EXPECT_NE(small.data_ptr(), b.data_ptr());
  // the gather sites never alias augment's or each other's buffer
  const at::Tensor storage = at::randint(0, 256, {6, 3, 40, 48}, at::kByte);
  const at::Tensor idx = at::randint(0, 6, {4, 3}, at::kLong);
  const at::Tensor g = reusing.gather_augment(storage, idx, 3);
  const at::Tensor o = reusing.gather_augment(storage, idx, 3, false, {}, OutputSite::kSampleObs);
  const at::Tensor n =
      reusing.gather_augment(storage, idx, 4, false, {}, OutputSite::kSampleNextObs);
  std::set<const void*> distinct = {b.data_ptr(), g.data_ptr(), o.data_ptr(), n.data_ptr()};
  EXPECT_EQ(distinct.size(), 4u);
  EXPECT_EQ(reusing.gather_augment(storage, idx, 5).data_ptr(), g.data_ptr());
  EXPECT_TRUE(at::equal(n, fresh.gather_augment(storage, idx, 4)));
  // the default returns a fresh tensor per call
  const at::Tensor f0 = fresh.augment(obs, 0);
  const at::Tensor f1 = fresh.augment(obs, 0);
  EXPECT_NE(f0.data_ptr(), f1.data_ptr());
  // out= wins over reuse and is checked
  const at::Tensor mine = at::empty_like(obs);
  EXPECT_EQ(reusing.augment(obs, 1, mine).data_ptr(), mine.data_ptr());
  EXPECT_TRUE(at::equal(mine, b));
  expect_mentions(error_of<c10::TypeError>(
                      [&] { reusing.augment(obs, 1, at::empty(obs.sizes(), at::kFloat)); }),
                  {"out must be uint8", "got float32"});
}

TEST(Engine, SyncStateRoundTripGivesIdenticalOutputs) {
  SKIP_WITHOUT_PHOTOS();
  const at::Tensor obs = random_obs(6, 9, 40, 48, 3);
  Engine first(small_config("sync"));
  for (int i = 0; i < 5; ++i) first.augment(obs);  // pool slots partly refreshed
  const EngineState saved = first.state();
  EXPECT_EQ(saved.step, 5u);
  EXPECT_EQ(saved.pool_calls, 5u);
  ASSERT_EQ(saved.pool_slots.size(), 12u);
  std::vector<at::Tensor> expected;
  for (int i = 0; i < 6; ++i) expected.push_back(first.augment(obs));

  Engine resumed(small_config("sync"));
  resumed.load_state(saved);
  EXPECT_EQ(resumed.step(), 5u);
  const EngineState again = resumed.state();
  EXPECT_EQ(again.pool_slots, saved.pool_slots);
  for (int i = 0; i < 6; ++i) {
    EXPECT_TRUE(at::equal(resumed.augment(obs), expected[static_cast<size_t>(i)])) << "call " << i;
  }
  EXPECT_TRUE(at::equal(resumed.pool()->images(), first.pool()->images()));

  Config other_seed = small_config("sync", 12, 4);
  Engine wrong(other_seed);
  EXPECT_THROW(wrong.load_state(saved), std::invalid_argument);
}

// A sync state names its pool's listing: loaded after a file of the sources
// was deleted (every serial would name another file) it is refused with a
// SourceError, and the engine keeps its step and pool; a state without the
// listing (pool_files 0) is refused too.
TEST(Engine, SyncStateIsRefusedAfterTheSourcesChanged) {
  SKIP_WITHOUT_PHOTOS();
  testing::TempDir photos;
  int copied = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kPhotos)) {
    if (entry.path().extension() != ".jpg" || copied == 6) continue;
    std::filesystem::copy_file(entry.path(), photos.path() / entry.path().filename());
    ++copied;
  }
  ASSERT_EQ(copied, 6);
  const at::Tensor obs = random_obs(4, 9, 40, 48, 3);
  const Config config = small_config("sync", 4, 3, photos.path().string());
  EngineState saved;
  {
    Engine first(config);
    first.augment(obs);
    saved = first.state();
  }
  EXPECT_EQ(saved.pool_files, 6u);
  EXPECT_EQ(saved.pool_checksums.size(), 4u);
  {
    Engine same(config);
    same.load_state(saved);  // unchanged sources: accepted
    EXPECT_EQ(same.step(), 1u);
    EngineState without_listing = saved;
    without_listing.pool_files = 0;
    expect_mentions(error_of<SourceError>([&] { same.load_state(without_listing); }),
                    {"a state without its listing"});
  }
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(photos.path())) {
    files.push_back(entry.path());
  }
  std::filesystem::remove(*std::min_element(files.begin(), files.end()));
  Engine changed(config);
  const at::Tensor pool_before = changed.pool()->images().clone();
  expect_mentions(
      error_of<SourceError>([&] { changed.load_state(saved); }),
      {"the sources now list 5 files, 6 when the state was taken", "files added or deleted since"});
  EXPECT_EQ(changed.step(), 0u);
  EXPECT_TRUE(at::equal(changed.pool()->images(), pool_before));
}

// A state's pool cursor and slot serials out of their ranges (counters past
// 2^62, a stamp below the fill's or past the serials, a slot holding a serial
// not yet decoded) are refused naming the field, and the engine keeps its
// state: the sync restore and the async cursor alike.
TEST(Engine, AStateOutOfItsRangesIsRefusedNamingTheField) {
  SKIP_WITHOUT_PHOTOS();
  const at::Tensor obs = random_obs(2, 9, 40, 48, 3);
  for (const std::string mode : {"sync", "async"}) {
    Engine engine(small_config(mode, 4));
    engine.augment(obs);
    const EngineState saved = engine.state();
    const auto refused = [&](EngineState bad, const char* words) {
      expect_mentions(error_of<std::invalid_argument>([&] { engine.load_state(bad); }),
                      {"the cursor is outside its range", words});
      EXPECT_EQ(engine.step(), saved.step);
    };
    EngineState bad = saved;
    bad.pool_stamp = (uint64_t{1} << 62) + 1;
    refused(bad, "next_stamp 4611686018427387905 is beyond 2^62");
    bad = saved;
    bad.pool_stamp = 3;
    refused(bad, "next_stamp 3 is below the pool's 4 slots");
    bad = saved;
    bad.pool_stamp = saved.pool_serial + 1;
    refused(bad, "is beyond next_serial");
    bad = saved;
    bad.pool_calls = uint64_t{1} << 61;
    refused(bad, "times the pool's 4 slots passes 2^62");
    if (mode == "sync") {
      bad = saved;
      bad.pool_slots[1] = saved.pool_serial;
      expect_mentions(error_of<std::invalid_argument>([&] { engine.load_state(bad); }),
                      {"slot 1 holds serial", "not one decoded before the cursor's next_serial"});
    }
    engine.load_state(saved);  // the state it had still loads
  }
}

TEST(Engine, ThreadsAugmentWhileAsyncRefreshRuns) {
  SKIP_WITHOUT_PHOTOS();
  Config config = small_config("async", 8);
  config.pipeline = {OpSpec::overlay(1.0)};  // out == the chosen pool image: checkable
  Engine engine(config);
  const int kThreads = 4;
  const int kCalls = 150;
  std::atomic<int> bad{0};
  std::atomic<int> errors{0};
  std::vector<at::Tensor> inputs;
  for (int t = 0; t < kThreads; ++t) inputs.push_back(random_obs(4, 6, 40, 48, 10 + t));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        const at::Tensor& obs = inputs[static_cast<size_t>(t)];
        for (int i = 0; i < kCalls; ++i) {
          const at::Tensor out = i % 2 ? engine.augment(obs) : [&] {
            at::Tensor copy = obs.clone();
            engine.augment_(copy);
            return copy;
          }();
          // alpha 1: both frames of a sample are the same pool image; a slot
          // rewritten between the two reads would make them differ.
          for (int64_t b = 0; b < out.size(0); ++b) {
            if (!at::equal(out[b].narrow(0, 0, 3), out[b].narrow(0, 3, 3))) ++bad;
          }
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        ++errors;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(engine.step(), static_cast<uint64_t>(kThreads * kCalls));
  EXPECT_EQ(engine.stats().calls, static_cast<uint64_t>(kThreads * kCalls));
  EXPECT_EQ(engine.pool()->stats().calls, static_cast<uint64_t>(kThreads * kCalls));
}

// refresh.threads = 0 in async mode: the pool is filled and nothing more is
// decoded or staged (no worker thread).
TEST(Engine, ZeroRefreshThreadsFillOnceAndDecodeNothingMore) {
  SKIP_WITHOUT_PHOTOS();
  Config config = small_config("async", 6);
  config.pool.refresh.threads = 0;
  Engine engine(config);
  const at::Tensor pool0 = engine.pool()->images().clone();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (int i = 0; i < 3; ++i) engine.augment(random_obs(2, 9, 40, 48, i));
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.pool_decoded, 6u);
  EXPECT_EQ(s.pool_uploaded, 0u);
  EXPECT_EQ(s.pool_queue_depth, 0u);
  EXPECT_TRUE(at::equal(engine.pool()->images(), pool0));
}

// stats() names the first inputs the pool skipped, not only their number.
TEST(Engine, StatsReportTheFirstFailures) {
  SKIP_WITHOUT_PHOTOS();
  testing::TempDir dir;
  testing::write_text(dir / "list.txt", kPhotos + "/lomiri_bridge.jpg\n" + kPhotos +
                                            "/no_such_photo.jpg\nbroken.jpg\n");
  testing::write_text(dir / "broken.jpg", "not a jpeg");
  Config config = small_config("sync", 4);
  config.pool.sources = {dir / "list.txt"};
  Engine engine(config);
  for (int i = 0; i < 3; ++i) engine.augment(random_obs(2, 9, 40, 48, i));
  const EngineStats s = engine.stats();
  EXPECT_GE(s.pool_failed, 2u);
  ASSERT_GE(s.pool_first_failures.size(), 2u);
  EXPECT_EQ(s.pool_first_failures[0].path, kPhotos + "/no_such_photo.jpg");
  EXPECT_NE(s.pool_first_failures[0].message.find("No such file or directory"), std::string::npos);
  EXPECT_EQ(s.pool_first_failures[1].path, dir / "broken.jpg");
  EXPECT_EQ(s.pool_failed, engine.pool()->stats().failed);
}

TEST(Engine, WrongInputsNameExpectedAndGot) {
  SKIP_WITHOUT_PHOTOS();
  Config config = small_config("async");
  config.pool.refresh.threads = 0;
  Engine engine(config);
  const auto augment = [&](const at::Tensor& obs) {
    return [&engine, obs] { engine.augment(obs); };
  };
  expect_mentions(error_of<std::invalid_argument>(augment(random_obs(2, 8, 40, 48, 0))),
                  {"8 channels", "multiple of frames.channels = 3"});
  expect_mentions(error_of<std::invalid_argument>(augment(random_obs(2, 9, 84, 84, 0))),
                  {"must be 40x48", "got 84x84"});
  expect_mentions(error_of<c10::TypeError>(augment(random_obs(2, 9, 40, 48, 0).to(at::kLong))),
                  {"uint8 or float32", "got int64"});
  expect_mentions(error_of<std::invalid_argument>(augment(random_obs(2, 9, 40, 48, 0)[0])),
                  {"uint8 or float32", "[B, S*C, H, W]"});
  EXPECT_EQ(engine.step(), 0u);  // failed calls take no step
}

TEST(Engine, PipelineWithoutOverlayHasNoPool) {
  Engine engine = Engine::from_file(kRoot + "/configs/drq_shift.yaml");
  EXPECT_EQ(engine.pool(), nullptr);
  EXPECT_FALSE(engine.stats().has_pool);
  const at::Tensor obs = random_obs(2, 9, 84, 84, 5);
  EXPECT_TRUE(at::equal(engine.augment(obs),
                        ops::augment(obs, std::nullopt, engine.config().pipeline, 0, 0)));
  const EngineState state = engine.state();
  EXPECT_TRUE(state.pool_slots.empty());
}

TEST(Engine, CloseThenCallsThrow) {
  SKIP_WITHOUT_PHOTOS();
  Engine engine(small_config("async"));
  const at::Tensor obs = random_obs(2, 9, 40, 48, 6);
  engine.augment(obs);
  engine.close();
  EXPECT_TRUE(engine.closed());
  EXPECT_TRUE(engine.pool()->closed());
  engine.close();  // idempotent
  try {
    engine.augment(obs);
    FAIL() << "augment after close did not throw";
  } catch (const std::logic_error& e) {
    EXPECT_STREQ(e.what(), "engine is closed");
  }
  EXPECT_THROW(engine.augment_(obs), std::logic_error);
  EXPECT_EQ(engine.stats().calls, 1u);  // stats still readable

  Engine moved(std::move(engine));
  EXPECT_TRUE(moved.closed());
}

TEST(Engine, RankValidation) {
  const std::string path = kRoot + "/configs/drq_shift.yaml";  // no pool: cheap to build
  const struct {
    int rank, world_size;
    const char* expect;
  } bad[] = {{-1, 2, "rank must be in [0, world_size) = [0, 2), got rank -1"},
             {2, 2, "rank must be in [0, world_size) = [0, 2), got rank 2"},
             {0, 0, "world_size must be >= 1, got 0"},
             {0, -3, "world_size must be >= 1, got -3"}};
  for (const auto& b : bad) {
    try {
      Engine engine = Engine::from_file(path, DistributedRank{b.rank, b.world_size});
      FAIL() << "rank " << b.rank << " of " << b.world_size << " did not throw";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(b.expect), std::string::npos) << e.what();
    }
  }
  Engine last = Engine::from_file(path, DistributedRank{3, 4});
  EXPECT_EQ(last.distributed().rank, 3);
  EXPECT_EQ(last.distributed().world_size, 4);
  EXPECT_EQ(last.seed(), last.config().seed + 3);
  EXPECT_EQ(last.state().seed, last.seed());
}

TEST(Engine, RanksDrawDifferentParametersFromDisjointFiles) {
  SKIP_WITHOUT_PHOTOS();
  const at::Tensor obs = random_obs(4, 9, 40, 48, 8);
  Engine single(small_config("sync", 12, 3));
  Engine r0(small_config("sync", 12, 3), DistributedRank{0, 2});
  Engine r1(small_config("sync", 12, 3), DistributedRank{1, 2});
  EXPECT_EQ(r0.seed(), 3u);  // rank 0 keeps the configured seed
  EXPECT_EQ(r1.seed(), 4u);
  // Parameters: rank 1's kernel key is seed + 1 (same pool images, different draws).
  const at::Tensor pool1 = r1.pool()->images();
  EXPECT_TRUE(at::equal(r1.augment(obs, 0), ops::augment(obs, pool1, r1.config().pipeline, 4, 0)));
  EXPECT_FALSE(at::equal(ops::augment(obs, pool1, r1.config().pipeline, 4, 0),
                         ops::augment(obs, pool1, r1.config().pipeline, 3, 0)));
  // Files: disjoint shares whose union is the single-rank listing.
  std::vector<std::string> all, shares;
  for (const ImageRef& r : single.pool()->refs()) all.push_back(r.display_name());
  for (const Engine* e : {&r0, &r1}) {
    for (const ImageRef& r : e->pool()->refs()) shares.push_back(r.display_name());
  }
  EXPECT_FALSE(r0.pool()->refs().empty());
  EXPECT_FALSE(r1.pool()->refs().empty());
  std::sort(all.begin(), all.end());
  std::sort(shares.begin(), shares.end());
  EXPECT_EQ(std::adjacent_find(shares.begin(), shares.end()), shares.end());  // disjoint
  EXPECT_EQ(shares, all);                                                     // union = all
  // A state taken on one rank does not load on another.
  EXPECT_THROW(r0.load_state(r1.state()), std::invalid_argument);
}

}  // namespace
}  // namespace obsaug
