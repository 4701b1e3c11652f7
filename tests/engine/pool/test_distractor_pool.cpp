// DistractorPool (engine/pool/distractor_pool.h) with real threads: the fill
// against an independent single-threaded decode, oldest-first replacement,
// a stress test proving that no pool slot is ever torn, corrupt and vanishing
// files, worker exceptions, shutdown under load, the rate cap, sync-mode
// determinism and restore(). The JPEG fixtures are written here with TurboJPEG.
#include <ATen/Context.h>
#include <ATen/ops/equal.h>
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "engine/pool/distractor_pool.h"
#include "tests/test_util.h"

namespace obsaug {
namespace {

using Bytes = std::vector<uint8_t>;
using testing::error_of;
using testing::expect_mentions;
using testing::read_file;
using testing::TempDir;
using testing::write_file;
using testing::write_text;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A w x h RGB JPEG whose pattern depends on `variant`.
Bytes make_jpeg(int w, int h, int variant) {
  Bytes rgb(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      uint8_t* p = &rgb[(static_cast<size_t>(y) * w + x) * 3];
      p[0] = static_cast<uint8_t>((x * 255 / w + variant * 37) & 255);
      p[1] = static_cast<uint8_t>((y * 255 / h + variant * 91) & 255);
      p[2] = static_cast<uint8_t>(127.5 + 100.0 * std::sin(x * 0.1 * (1 + variant % 5)));
    }
  }
  tjhandle tj = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  const int rc = tjCompress2(tj, rgb.data(), w, 0, h, TJPF_RGB, &buf, &size, TJSAMP_420, 90, 0);
  EXPECT_EQ(rc, 0) << tjGetErrorStr2(tj);
  Bytes out(buf, buf + (rc == 0 ? size : 0));
  tjFree(buf);
  tjDestroy(tj);
  return out;
}

// `n` valid JPEGs img00.jpg, img01.jpg, ... in `dir`.
void write_jpegs(const TempDir& dir, int n, int w = 96, int h = 72) {
  for (int i = 0; i < n; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "img%02d.jpg", i);
    write_file(dir / name, make_jpeg(w + 8 * i, h + 4 * i, i));
  }
}

// A temporary folder holding `n` JPEGs from write_jpegs.
class JpegDir : public TempDir {
 public:
  explicit JpegDir(int n, int w = 96, int h = 72) { write_jpegs(*this, n, w, h); }
};

DistractorPoolOptions small_options(const TempDir& dir, int64_t size, RefreshMode mode) {
  DistractorPoolOptions o;
  o.sources = {dir.path().string()};
  o.size = size;
  o.height = 24;
  o.width = 20;
  o.channels = 3;
  o.threads = 2;
  o.mode = mode;
  o.per_call = std::min<int64_t>(3, size);  // sync mode: at most size
  o.seed = 7;
  o.show_progress = false;
  return o;
}

size_t image_bytes(const DistractorPool& pool) {
  const auto& o = pool.options();
  return static_cast<size_t>(o.channels) * o.height * o.width;
}

const uint8_t* slot_ptr(const DistractorPool& pool, int64_t slot) {
  return pool.images().data_ptr<uint8_t>() + static_cast<size_t>(slot) * image_bytes(pool);
}

// The image of `serial` decoded from scratch on this thread.
Bytes independent_decode(const DistractorPool& pool, uint32_t ref_index, uint64_t serial) {
  const ImageRef& ref = pool.refs().at(ref_index);
  const Bytes bytes = read_image_bytes(ref, pool.options().limits.max_bytes);
  ImageDecoder decoder(pool.options().limits);
  Bytes out(image_bytes(pool));
  decoder.decode_augmented(bytes.data(), bytes.size(), ref.display_name(), pool.augment_spec(),
                           pool.options().seed, serial, out.data());
  return out;
}

// Every slot holds exactly the image its SlotInfo names.
void expect_slots_consistent(const DistractorPool& pool, bool redecode) {
  for (int64_t k = 0; k < pool.options().size; ++k) {
    const SlotInfo info = pool.slot_info(k);
    ASSERT_EQ(image_checksum(slot_ptr(pool, k), image_bytes(pool)), info.checksum)
        << "slot " << k << " (serial " << info.serial << ") is not the image staged for it";
    ASSERT_EQ(info.ref_index, pool.ref_index_for_serial(info.serial));
    if (redecode) {
      const Bytes expected = independent_decode(pool, info.ref_index, info.serial);
      ASSERT_EQ(0, std::memcmp(expected.data(), slot_ptr(pool, k), expected.size()))
          << "slot " << k << " differs from a fresh decode of serial " << info.serial;
    }
  }
}

// Calls prepare_for_augment until `done` or the timeout; false on timeout.
template <typename Done>
bool prepare_until(DistractorPool& pool, Done done, double timeout_s = 20) {
  const auto start = Clock::now();
  while (!done()) {
    if (seconds_since(start) > timeout_s) return false;
    pool.prepare_for_augment();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(PermutedIndex, IsABijectionThatDependsOnSeedAndEpoch) {
  for (uint64_t n : {1, 2, 3, 7, 64, 100, 1000}) {
    std::set<uint64_t> seen;
    for (uint64_t i = 0; i < n; ++i) seen.insert(permuted_index(i, n, 3, 5));
    EXPECT_EQ(seen.size(), n);
    EXPECT_LT(*seen.rbegin(), n);
  }
  int moved = 0;
  for (uint64_t i = 0; i < 100; ++i) {
    moved += permuted_index(i, 100, 3, 5) != permuted_index(i, 100, 3, 6);
    moved += permuted_index(i, 100, 3, 5) != permuted_index(i, 100, 4, 5);
  }
  EXPECT_GT(moved, 150);
}

TEST(DistractorPool, FillPutsAnIndependentlyDecodedImageInEverySlot) {
  JpegDir dir(9);
  DistractorPoolOptions o = small_options(dir, 20, RefreshMode::kAsync);
  o.threads = 3;
  DistractorPool pool(o);
  ASSERT_EQ(pool.images().sizes(), (std::vector<int64_t>{20, 3, 24, 20}));
  EXPECT_EQ(pool.images().scalar_type(), at::kByte);
  for (int64_t k = 0; k < 20; ++k) {
    EXPECT_EQ(pool.slot_info(k).serial,
              static_cast<uint64_t>(k));  // no failures: slot k = serial k
    EXPECT_EQ(pool.slot_info(k).stamp, static_cast<uint64_t>(k));
  }
  expect_slots_consistent(pool, /*redecode=*/true);
  // Epoch 0 visits every file once.
  std::set<uint32_t> files;
  for (int64_t k = 0; k < 9; ++k) files.insert(pool.slot_info(k).ref_index);
  EXPECT_EQ(files.size(), 9u);
  const DistractorPoolStats s = pool.stats();
  EXPECT_GE(s.decoded, 20u);  // the workers have started since
  EXPECT_EQ(s.failed, 0u);
}

TEST(DistractorPool, AsyncRefreshReplacesOldestFirst) {
  JpegDir dir(5);
  DistractorPool pool(small_options(dir, 8, RefreshMode::kAsync));
  const int64_t P = 8;
  uint64_t rounds_with_uploads = 0;
  const auto start = Clock::now();
  while (pool.stats().uploaded < 40 && seconds_since(start) < 20) {
    std::vector<uint64_t> before(P);
    for (int64_t k = 0; k < P; ++k) before[k] = pool.slot_info(k).stamp;
    const uint64_t uploaded = pool.stats().uploaded;
    pool.prepare_for_augment();
    const uint64_t n = std::min<uint64_t>(pool.stats().uploaded - uploaded, P);
    if (n == 0) continue;
    ++rounds_with_uploads;
    // The n slots with the smallest stamps, and only they, were rewritten.
    std::vector<uint64_t> sorted = before;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t k = 0; k < P; ++k) {
      const bool was_oldest = before[k] < sorted[n - 1] + 1;
      EXPECT_EQ(pool.slot_info(k).stamp != before[k], was_oldest) << "slot " << k;
    }
  }
  EXPECT_GE(pool.stats().uploaded, 40u);
  EXPECT_GT(rounds_with_uploads, 0u);
  // Afterwards the slots hold the P most recent stamps, slot = stamp % P.
  const uint64_t next = pool.cursor().next_stamp;
  for (int64_t k = 0; k < P; ++k) {
    const uint64_t stamp = pool.slot_info(k).stamp;
    EXPECT_GE(stamp + P, next);
    EXPECT_EQ(stamp % P, static_cast<uint64_t>(k));
  }
  expect_slots_consistent(pool, /*redecode=*/true);
}

// The consumer prepares and reads the pool in a loop while the workers decode
// at full speed. Right after each prepare and again just before the next one,
// every slot's bytes must have the checksum the worker computed when it
// staged that image: a torn copy, or a worker writing a staging slot while
// its copy is read, or anything writing the pool outside prepare, fails.
TEST(DistractorPool, StressNoTornImagesUnderFullSpeedRefresh) {
  JpegDir dir(6, 64, 48);
  DistractorPoolOptions o = small_options(dir, 16, RefreshMode::kAsync);
  o.threads = 4;
  DistractorPool pool(o);
  const auto start = Clock::now();
  uint64_t iterations = 0;
  while (seconds_since(start) < 1.5 || pool.stats().uploaded < 64) {
    ASSERT_LT(seconds_since(start), 30) << "refresh too slow: " << pool.stats().uploaded;
    expect_slots_consistent(pool, false);  // unchanged since the previous prepare
    pool.prepare_for_augment();
    expect_slots_consistent(pool, (iterations % 64) == 0);
    ++iterations;
  }
  const DistractorPoolStats s = pool.stats();
  EXPECT_GT(s.uploaded, 64u);
  EXPECT_EQ(s.failed, 0u);
  EXPECT_LE(s.queue_depth, static_cast<uint64_t>(o.threads * DistractorPool::kStagingPerWorker));
  std::printf("[ stress   ] %llu prepares, %llu uploads, %.0f decodes/s\n",
              static_cast<unsigned long long>(iterations),
              static_cast<unsigned long long>(s.uploaded), s.decode_rate);
}

TEST(DistractorPool, CorruptFilesAreSkippedCountedAndReported) {
  JpegDir dir(3);
  const Bytes good = make_jpeg(80, 60, 1);
  write_file(dir / "zero.jpg", {});
  write_file(dir / "truncated.jpg", Bytes(good.begin(), good.begin() + good.size() / 2));
  Bytes noise(5000);
  for (size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<uint8_t>(i * 7919 + 13);
  write_file(dir / "noise.jpg", noise);
  write_file(dir / "notpng.PNG", Bytes{0x89, 'P', 'N', 'G', 0, 0, 1, 2, 3});
  DistractorPool pool(small_options(dir, 6, RefreshMode::kSync));  // 7 files, 4 of them bad
  for (int i = 0; i < 6; ++i) pool.prepare_for_augment();
  const DistractorPoolStats s = pool.stats();
  EXPECT_GT(s.failed, 4u);
  EXPECT_GT(s.uploaded, 0u);
  ASSERT_FALSE(s.first_failures.empty());
  EXPECT_LE(s.first_failures.size(), static_cast<size_t>(kMaxReportedFailures));
  const std::set<std::string> bad = {"zero.jpg", "truncated.jpg", "noise.jpg", "notpng.PNG"};
  for (const auto& f : s.first_failures) {
    const std::string name = std::filesystem::path(f.path).filename().string();
    EXPECT_TRUE(bad.count(name)) << f.path << ": " << f.message;
    EXPECT_FALSE(f.message.empty());
  }
  expect_slots_consistent(pool, /*redecode=*/true);
  for (int64_t k = 0; k < 6; ++k) {
    const std::string name =
        std::filesystem::path(pool.refs()[pool.slot_info(k).ref_index].path).filename().string();
    EXPECT_FALSE(bad.count(name)) << "slot " << k << " holds " << name;
  }
}

TEST(DistractorPool, FileDeletedMidRunIsACountedFailure) {
  JpegDir dir(6);
  DistractorPool pool(small_options(dir, 4, RefreshMode::kAsync));
  EXPECT_EQ(pool.stats().failed, 0u);
  for (int i = 0; i < 3; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "img%02d.jpg", i);
    std::filesystem::remove(dir / name);
  }
  ASSERT_TRUE(prepare_until(pool, [&] { return pool.stats().failed >= 3; }));
  const uint64_t uploaded = pool.stats().uploaded;
  ASSERT_TRUE(prepare_until(pool, [&] { return pool.stats().uploaded >= uploaded + 8; }));
  const DistractorPoolStats s = pool.stats();
  ASSERT_FALSE(s.first_failures.empty());
  EXPECT_NE(s.first_failures[0].path.find("img0"), std::string::npos);
  expect_slots_consistent(pool, false);
}

TEST(DistractorPool, SourceWithoutUsableImageFailsNamingThePath) {
  TempDir empty;
  std::filesystem::create_directories(empty / "nothing_here");
  try {
    DistractorPool pool(small_options(empty, 4, RefreshMode::kAsync));
    FAIL() << "expected SourceError";
  } catch (const SourceError& e) {
    EXPECT_NE(std::string(e.what()).find(empty.path().string()), std::string::npos) << e.what();
  }
  TempDir corrupt;
  write_file(corrupt / "a.jpg", {});
  write_file(corrupt / "b.jpg", Bytes(300, 0xFF));
  try {
    DistractorPool pool(small_options(corrupt, 4, RefreshMode::kAsync));
    FAIL() << "expected SourceError";
  } catch (const SourceError& e) {
    EXPECT_NE(std::string(e.what()).find(corrupt.path().string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("decode"), std::string::npos) << e.what();
  }
}

TEST(DistractorPool, BadOptionsAreRejectedWithTheValue) {
  JpegDir dir(1);
  DistractorPoolOptions o = small_options(dir, 4, RefreshMode::kAsync);
  o.channels = 2;
  try {
    DistractorPool pool(o);
    FAIL() << "expected invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("channels must be 1 or 3, got 2"), std::string::npos);
  }
  EXPECT_THROW(parse_refresh_mode("fast"), std::invalid_argument);
}

// The rank and world size, and sync mode's per_call (the config loader's
// pool.refresh.per_call rule), are checked before the sources are listed.
TEST(DistractorPool, RankAndPerCallAreChecked) {
  JpegDir dir(1);
  DistractorPoolOptions o = small_options(dir, 4, RefreshMode::kAsync);
  o.rank = 2;
  o.world_size = 2;
  expect_mentions(error_of<std::invalid_argument>([&] { DistractorPool pool(o); }),
                  {"DistractorPool: rank must be in [0, world_size) = [0, 2), got 2"});
  o.rank = 0;
  o.world_size = 0;
  expect_mentions(error_of<std::invalid_argument>([&] { DistractorPool pool(o); }),
                  {"DistractorPool: world_size must be >= 1, got 0"});
  o = small_options(dir, 4, RefreshMode::kSync);
  o.per_call = 5;
  expect_mentions(error_of<std::invalid_argument>([&] { DistractorPool pool(o); }),
                  {"DistractorPool: per_call must be at most size (4) in sync mode, got 5"});
  o.mode = RefreshMode::kAsync;  // unused there
  DistractorPool pool(o);
  EXPECT_EQ(pool.options().per_call, 5);
}

TEST(DistractorPool, WorkerExceptionReachesTheNextPrepare) {
  JpegDir dir(3);
  DistractorPoolOptions o = small_options(dir, 4, RefreshMode::kAsync);
  o.before_decode = [](const ImageRef&, uint64_t serial) {
    if (serial == 10) throw std::runtime_error("injected failure at serial 10");
  };
  DistractorPool pool(o);
  bool thrown = false;
  const auto start = Clock::now();
  while (!thrown && seconds_since(start) < 20) {
    try {
      pool.prepare_for_augment();
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("serial 10"), std::string::npos);
      thrown = true;
    }
  }
  EXPECT_TRUE(thrown);
  pool.prepare_for_augment();  // reported once; the other worker goes on
  EXPECT_EQ(pool.stats().failed, 0u);
}

TEST(DistractorPool, ShutdownUnderLoadIsQuick) {
  JpegDir dir(4);
  {  // queues full: nobody consumes, every worker waits for a free slot
    DistractorPoolOptions o = small_options(dir, 4, RefreshMode::kAsync);
    o.threads = 4;
    auto pool = std::make_unique<DistractorPool>(o);
    const auto wait = Clock::now();
    while (pool->stats().queue_depth < 12 && seconds_since(wait) < 20) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(pool->stats().queue_depth, 12u);
    const auto start = Clock::now();
    pool.reset();
    EXPECT_LT(seconds_since(start), 1.0);
  }
  {  // workers busy decoding, and others asleep on a slow rate cap
    DistractorPoolOptions o = small_options(dir, 4, RefreshMode::kAsync);
    o.threads = 3;
    o.max_per_second = 0.5;
    DistractorPool pool(o);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto start = Clock::now();
    pool.close();
    EXPECT_LT(seconds_since(start), 1.0);
    EXPECT_TRUE(pool.closed());
    EXPECT_THROW(pool.prepare_for_augment(), std::logic_error);
    pool.close();  // idempotent
  }
  {
    DistractorPoolOptions o = small_options(dir, 4, RefreshMode::kAsync);
    o.before_decode = [](const ImageRef&, uint64_t serial) {
      if (serial >= 4) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    };
    auto pool = std::make_unique<DistractorPool>(o);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const auto start = Clock::now();
    pool.reset();
    EXPECT_LT(seconds_since(start), 1.0);
  }
}

TEST(DistractorPool, RateCapThrottlesTheWorkers) {
  JpegDir dir(4);
  DistractorPoolOptions o = small_options(dir, 4, RefreshMode::kAsync);
  o.max_per_second = 40;
  DistractorPool pool(o);
  const uint64_t after_fill = pool.stats().decoded;
  const auto start = Clock::now();
  while (seconds_since(start) < 0.5) {
    pool.prepare_for_augment();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const double elapsed = seconds_since(start);
  const uint64_t decoded = pool.stats().decoded - after_fill;
  EXPECT_LE(static_cast<double>(decoded), 40 * elapsed + 2);
  EXPECT_GE(decoded, 5u);  // and it does run
}

TEST(DistractorPool, SyncModeIsBitReproducible) {
  JpegDir dir(7);
  write_file(dir / "broken.jpg", Bytes(100, 0x42));
  DistractorPoolOptions o = small_options(dir, 10, RefreshMode::kSync);
  o.threads = 3;
  DistractorPool a(o);
  o.threads = 1;
  DistractorPool b(o);
  EXPECT_TRUE(at::equal(a.images(), b.images()));
  for (int i = 0; i < 9; ++i) {
    a.prepare_for_augment();
    b.prepare_for_augment();
    ASSERT_TRUE(at::equal(a.images(), b.images())) << "after call " << i + 1;
  }
  EXPECT_EQ(a.stats().uploaded, 27u);
  EXPECT_EQ(a.cursor().next_serial, b.cursor().next_serial);
  EXPECT_GT(a.stats().failed, 0u);
  expect_slots_consistent(a, /*redecode=*/true);

  o.seed = 8;
  DistractorPool c(o);
  EXPECT_FALSE(at::equal(a.images(), c.images()));

  // Restoring the cursor (with the content) continues identically.
  o.seed = 7;
  DistractorPool d(o);
  d.images().copy_(a.images());
  d.set_cursor(a.cursor());
  for (int i = 0; i < 4; ++i) {
    a.prepare_for_augment();
    d.prepare_for_augment();
  }
  EXPECT_TRUE(at::equal(a.images(), d.images()));
}

TEST(DistractorPool, StatsTrackAgeAndUploads) {
  JpegDir dir(5);
  DistractorPoolOptions o = small_options(dir, 6, RefreshMode::kSync);
  o.per_call = 2;
  DistractorPool pool(o);
  EXPECT_EQ(pool.stats().mean_age_calls, 0.0);
  pool.prepare_for_augment();  // call 1 rewrites slots 0, 1
  pool.prepare_for_augment();  // call 2 rewrites slots 2, 3
  DistractorPoolStats s = pool.stats();
  EXPECT_EQ(s.calls, 2u);
  EXPECT_EQ(s.uploaded, 4u);
  // ages: slots 0,1 -> 1; 2,3 -> 0; 4,5 -> 2 (written at the fill, call 0)
  EXPECT_DOUBLE_EQ(s.mean_age_calls, (1 + 1 + 0 + 0 + 2 + 2) / 6.0);
  EXPECT_EQ(pool.slot_info(0).written_call, 1u);
  EXPECT_EQ(pool.slot_info(3).written_call, 2u);
  EXPECT_GT(s.decode_rate, 0.0);
  EXPECT_EQ(s.queue_depth, 0u);
}

// restore(): a fresh pool given another pool's cursor and slot serials holds
// exactly that pool's images and SlotInfo, and continues bit-exactly in sync
// mode; it needs no test hook and no state outside the pool.
TEST(DistractorPool, RestoreRebuildsTheContentAndContinuesExactly) {
  JpegDir dir(7);
  write_file(dir / "broken.jpg", Bytes(100, 0x42));  // failed serials are skipped, not held
  const DistractorPoolOptions o = small_options(dir, 10, RefreshMode::kSync);
  DistractorPool a(o);
  for (int i = 0; i < 5; ++i) a.prepare_for_augment();  // 15 uploads: stamps wrap once
  const PoolState state = a.state();
  const PoolCursor cursor = state.cursor;
  const std::vector<uint64_t> serials = state.slot_serials;
  const at::Tensor saved = a.images().clone();
  ASSERT_EQ(serials.size(), 10u);
  EXPECT_EQ(serials, a.slot_serials());
  EXPECT_EQ(state.listing.files, 8u);
  for (int64_t k = 0; k < 10; ++k) EXPECT_EQ(state.slot_checksums[k], a.slot_info(k).checksum);

  DistractorPool b(o);
  ASSERT_FALSE(at::equal(b.images(), saved));
  EXPECT_TRUE(b.listing() == state.listing);
  b.restore(state);
  EXPECT_TRUE(at::equal(b.images(), saved));
  EXPECT_EQ(b.slot_serials(), serials);
  EXPECT_EQ(b.cursor().next_serial, cursor.next_serial);
  EXPECT_EQ(b.cursor().next_stamp, cursor.next_stamp);
  EXPECT_EQ(b.cursor().calls, cursor.calls);
  for (int64_t k = 0; k < 10; ++k) {
    EXPECT_EQ(b.slot_info(k).stamp, a.slot_info(k).stamp) << "slot " << k;
    EXPECT_EQ(b.slot_info(k).ref_index, a.slot_info(k).ref_index) << "slot " << k;
    EXPECT_EQ(b.slot_info(k).checksum, a.slot_info(k).checksum) << "slot " << k;
  }
  EXPECT_EQ(b.stats().mean_age_calls, 0.0);  // ages restart at the restore
  expect_slots_consistent(b, /*redecode=*/true);

  for (int i = 0; i < 4; ++i) {  // oldest first from the restored stamps, the same serials
    a.prepare_for_augment();
    b.prepare_for_augment();
    ASSERT_TRUE(at::equal(a.images(), b.images())) << "after call " << i + 1;
  }
  EXPECT_EQ(a.slot_serials(), b.slot_serials());
}

// restore() is all or nothing: a wrong slot count or an image that no longer
// decodes leaves the pool (content, SlotInfo, cursor) as it was.
TEST(DistractorPool, RestoreFailuresLeaveThePoolUnchanged) {
  JpegDir dir(5);
  const DistractorPoolOptions o = small_options(dir, 6, RefreshMode::kSync);
  DistractorPool a(o);
  a.prepare_for_augment();
  const PoolState state = a.state();
  const std::vector<uint64_t>& serials = state.slot_serials;

  DistractorPool b(o);
  const at::Tensor before = b.images().clone();
  const std::vector<uint64_t> serials_before = b.slot_serials();
  try {
    PoolState short_state = state;
    short_state.slot_serials.pop_back();
    b.restore(short_state);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("one entry per slot (6), got 5 and 6"), std::string::npos)
        << e.what();
  }
  // The file of the last slot's serial is deleted: it no longer decodes.
  const uint32_t gone = b.ref_index_for_serial(serials.back());
  const std::string gone_path = b.refs()[gone].path;
  std::filesystem::remove(gone_path);
  try {
    b.restore(state);
    FAIL() << "expected SourceError";
  } catch (const SourceError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("slot "), std::string::npos) << what;
    EXPECT_NE(what.find(gone_path), std::string::npos) << what;
    EXPECT_NE(what.find("no longer decodes"), std::string::npos) << what;
  }
  EXPECT_TRUE(at::equal(b.images(), before));
  EXPECT_EQ(b.slot_serials(), serials_before);
  EXPECT_EQ(b.cursor().calls, 0u);
  EXPECT_EQ(b.cursor().next_stamp, 6u);

  b.close();
  EXPECT_THROW(b.restore(state), std::logic_error);
}

// restore() refuses a state taken over another listing: serial s names file
// file_for_serial(s, N, seed), so with a file added or deleted (N changes),
// renamed or resized (N stays) every serial would name another image. The
// same files moved elsewhere keep the listing; a file rewritten in place at
// its old size is caught by the slot checksums. The pool stays as it was.
TEST(DistractorPool, RestoreRefusesAStateOfAnotherListing) {
  JpegDir dir(6);
  const DistractorPoolOptions o = small_options(dir, 4, RefreshMode::kSync);
  PoolState state;
  at::Tensor saved;
  {
    DistractorPool a(o);
    a.prepare_for_augment();
    state = a.state();
    saved = a.images().clone();
  }
  TempDir moved;
  std::filesystem::copy(dir.path(), moved.path(), std::filesystem::copy_options::recursive);
  const DistractorPoolOptions o_moved = small_options(moved, 4, RefreshMode::kSync);
  {
    DistractorPool b(o_moved);
    EXPECT_TRUE(b.listing() == state.listing);
    b.restore(state);
    EXPECT_TRUE(at::equal(b.images(), saved));
  }
  std::filesystem::remove(moved / "img00.jpg");
  {
    DistractorPool b(o_moved);
    const at::Tensor before = b.images().clone();
    expect_mentions(error_of<SourceError>([&] { b.restore(state); }),
                    {"the sources now list 5 files, 6 when the state was taken",
                     "files added or deleted since", "restore with the sources the state was"});
    EXPECT_TRUE(at::equal(b.images(), before));
  }
  write_file(moved / "renamed.jpg", read_file(dir / "img00.jpg"));
  {
    DistractorPool b(o_moved);
    const at::Tensor before = b.images().clone();
    expect_mentions(error_of<SourceError>([&] { b.restore(state); }),
                    {"the sources list 6 files",
                     "as many as when the state was taken, but not the "
                     "same ones",
                     "a file renamed, replaced or resized since"});
    EXPECT_TRUE(at::equal(b.images(), before));
  }

  DistractorPool c(o);
  PoolState without_listing = state;
  without_listing.listing = PoolListing{};
  expect_mentions(error_of<SourceError>([&] { c.restore(without_listing); }),
                  {"now list 6 files, 0 when the state was taken (a state without its listing)"});
  // Slot 0's file rewritten as another JPEG padded to the old size (bytes
  // after the end-of-image marker are not read).
  const std::string rewritten = c.refs()[c.ref_index_for_serial(state.slot_serials[0])].path;
  Bytes other = make_jpeg(48, 36, 5);
  const size_t old_size = std::filesystem::file_size(rewritten);
  ASSERT_LT(other.size(), old_size);
  other.resize(old_size, 0);
  write_file(rewritten, other);
  const at::Tensor before = c.images().clone();
  expect_mentions(error_of<SourceError>([&] { c.restore(state); }),
                  {"slot 0 held serial", rewritten.c_str(), "now decodes to another image",
                   "the file changed since"});
  EXPECT_TRUE(at::equal(c.images(), before));
  EXPECT_EQ(c.cursor().calls, 0u);
}

// DESIGN.md section 4: a source with no usable image is an error at start-up
// naming it, also beside a good source, whether or not the fill drew from it.
// A source with one decodable file is usable even when the fill never drew
// from it; checking it costs no counted decode.
TEST(DistractorPool, EverySourceMustHoldAUsableImage) {
  JpegDir good(5);
  TempDir bad;
  write_file(bad / "empty.jpg", {});
  write_file(bad / "noise.jpg", Bytes(300, 0xFF));
  for (const RefreshMode mode : {RefreshMode::kSync, RefreshMode::kAsync}) {
    for (const int64_t size : {1, 8}) {  // size 1: the fill need not reach `bad`
      DistractorPoolOptions o = small_options(good, size, mode);
      o.sources = {good.path().string(), bad.path().string()};
      const std::string named = "image source " + bad.path().string() + " holds no usable image";
      expect_mentions(error_of<SourceError>([&] { DistractorPool pool(o); }),
                      {named.c_str(), "all 2 of its listed files failed to read or decode",
                       "empty.jpg", "noise.jpg", "remove it from the sources"});
    }
  }
  write_file(bad / "photo.jpg", make_jpeg(64, 48, 3));
  DistractorPoolOptions o = small_options(good, 1, RefreshMode::kSync);
  o.sources = {bad.path().string(), good.path().string()};
  DistractorPool pool(o);
  EXPECT_EQ(pool.refs().size(), 8u);
  EXPECT_EQ(pool.stats().decoded, 1u);
}

// A file that fails again each epoch is reported once: first_failures names
// distinct files, while `failed` counts every failure.
TEST(DistractorPool, FirstFailuresNameEachFileOnce) {
  JpegDir dir(2);
  write_file(dir / "empty.jpg", {});
  write_file(dir / "noise.jpg", Bytes(300, 0xFF));
  DistractorPool pool(small_options(dir, 2, RefreshMode::kSync));
  for (int i = 0; i < 10; ++i) pool.prepare_for_augment();  // about 15 epochs of 4 files
  const DistractorPoolStats s = pool.stats();
  EXPECT_GT(s.failed, 10u);
  ASSERT_EQ(s.first_failures.size(), 2u);
  std::set<std::string> names;
  for (const auto& f : s.first_failures) {
    names.insert(std::filesystem::path(f.path).filename().string());
  }
  EXPECT_EQ(names, (std::set<std::string>{"empty.jpg", "noise.jpg"}));
}

// Relative sources are made absolute at construction: a later chdir does not
// make every refresh read fail.
TEST(DistractorPool, RelativeSourcesAreMadeAbsoluteAtConstruction) {
  JpegDir dir(4);
  DistractorPoolOptions o = small_options(dir, 2, RefreshMode::kSync);
  o.sources = {dir.path().filename().string()};
  const std::filesystem::path cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir.path().parent_path());
  std::unique_ptr<DistractorPool> pool;
  try {
    pool = std::make_unique<DistractorPool>(o);
  } catch (...) {
    std::filesystem::current_path(cwd);
    throw;
  }
  std::filesystem::current_path(cwd);
  EXPECT_EQ(pool->options().sources, std::vector<std::string>{dir.path().string()});
  for (int i = 0; i < 4; ++i) pool->prepare_for_augment();
  const DistractorPoolStats s = pool->stats();
  EXPECT_EQ(s.failed, 0u);
  EXPECT_EQ(s.uploaded, 4 * static_cast<uint64_t>(o.per_call));
}

// A construction that fails after some workers started (a thread that could
// not start, here the test hook) stops and joins them: the exception reaches
// the caller instead of std::terminate.
TEST(DistractorPool, ConstructionFailingAfterWorkersStartedJoinsThem) {
  JpegDir dir(3);
  DistractorPoolOptions o = small_options(dir, 4, RefreshMode::kAsync);
  o.threads = 3;
  int started = 0;
  o.after_worker_start = [&](int worker) {
    started = worker + 1;
    if (worker == 1) throw std::system_error(EAGAIN, std::generic_category(), "thread 3");
  };
  expect_mentions(error_of<std::system_error>([&] { DistractorPool pool(o); }), {"thread 3"});
  EXPECT_EQ(started, 2);
}

TEST(DistractorPool, GrayscaleAndShardedPools) {
  JpegDir dir(6);
  DistractorPoolOptions o = small_options(dir, 5, RefreshMode::kSync);
  o.channels = 1;
  o.world_size = 2;
  o.rank = 1;
  DistractorPool pool(o);
  EXPECT_EQ(pool.images().size(1), 1);
  EXPECT_EQ(pool.refs().size(), 3u);
  expect_slots_consistent(pool, /*redecode=*/true);
}

// 10 files of which only f00 and f01 decode, P = 64: after the first pass
// most slots are full and later passes try a few serials each, so runs of
// ten and more failed serials are common; with seed 23 such a run straddles
// two epochs, and a fill that gave up after N consecutive failures failed
// although both good files were never tried in it.
TEST(DistractorPool, FillGivesUpOnlyWhenEveryFileFailedWithinAnEpoch) {
  TempDir dir;
  for (int i = 0; i < 10; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "f%02d.jpg", i);
    write_file(dir / name, i < 2 ? make_jpeg(64, 48, i) : Bytes(300, 0x42));
  }
  DistractorPoolOptions o = small_options(dir, 64, RefreshMode::kSync);
  for (const uint64_t seed : {23, 26, 32, 35, 37}) {
    o.seed = seed;
    std::unique_ptr<DistractorPool> pool;
    ASSERT_NO_THROW(pool = std::make_unique<DistractorPool>(o)) << "seed " << seed;
    for (int64_t k = 0; k < 64; ++k) ASSERT_LT(pool->slot_info(k).ref_index, 2u);
    EXPECT_GT(pool->stats().failed, 0u);
  }

  // Every file fails: the error says so, after at most two epochs of serials.
  TempDir bad;
  for (int i = 0; i < 10; ++i)
    write_file(bad / ("b" + std::to_string(i) + ".jpg"), Bytes(300, 0x42));
  DistractorPoolOptions ob = small_options(bad, 64, RefreshMode::kSync);
  try {
    DistractorPool pool(ob);
    FAIL() << "expected SourceError";
  } catch (const SourceError& e) {
    EXPECT_NE(
        std::string(e.what()).find("DistractorPool: no usable image in " + bad.path().string() +
                                   ": all 10 listed files failed to read or decode"),
        std::string::npos)
        << e.what();
  }
}

// What the listing skipped is counted and reported with the decode failures.
TEST(DistractorPool, ListingFailuresAreCountedAndReported) {
  JpegDir dir(3);
  write_text(dir / "list.txt", "img00.jpg\nmissing1.jpg\nimg01.jpg\nmissing2.jpg\n");
  // A shard cut inside its second member: the first one is used.
  const Bytes jpeg = make_jpeg(64, 48, 5);
  Bytes shard(512, 0);
  std::snprintf(reinterpret_cast<char*>(shard.data()), 100, "first.jpg");
  std::snprintf(reinterpret_cast<char*>(&shard[100]), 8, "%07o", 0644);
  std::snprintf(reinterpret_cast<char*>(&shard[124]), 12, "%011llo",
                static_cast<unsigned long long>(jpeg.size()));
  shard[156] = '0';
  std::memset(&shard[148], ' ', 8);
  unsigned sum = 0;
  for (uint8_t c : shard) sum += c;
  std::snprintf(reinterpret_cast<char*>(&shard[148]), 8, "%06o", sum);
  Bytes second_header = shard;  // the same header again, cut after 200 bytes
  shard.insert(shard.end(), jpeg.begin(), jpeg.end());
  shard.resize(512 + (jpeg.size() + 511) / 512 * 512, 0);
  shard.insert(shard.end(), second_header.begin(), second_header.begin() + 200);
  write_file(dir / "cut.tar", shard);

  DistractorPoolOptions o = small_options(dir, 4, RefreshMode::kSync);
  o.sources = {dir / "list.txt", dir / "cut.tar"};
  DistractorPool pool(o);
  EXPECT_EQ(pool.refs().size(), 3u);
  const DistractorPoolStats s = pool.stats();
  EXPECT_EQ(s.failed, 3u);
  ASSERT_EQ(s.first_failures.size(), 3u);
  EXPECT_EQ(s.first_failures[0].path, dir / "missing1.jpg");
  EXPECT_EQ(s.first_failures[1].path, dir / "missing2.jpg");
  EXPECT_NE(s.first_failures[1].message.find("list.txt line 4: "), std::string::npos)
      << s.first_failures[1].message;
  EXPECT_EQ(s.first_failures[2].path, dir / "cut.tar");
  EXPECT_NE(s.first_failures[2].message.find("truncated header (200 bytes left)"),
            std::string::npos)
      << s.first_failures[2].message;
}

// Listing failures beyond the reported few leave room for the decode
// failures: the fill's error names the files that failed to decode, and the
// stats keep both lists.
TEST(DistractorPool, DecodeFailuresAreReportedBesideManyListingFailures) {
  JpegDir dir(1);
  write_file(dir / "bad1.jpg", Bytes{1, 2, 3});
  write_file(dir / "bad2.jpg", Bytes{4, 5, 6});
  std::string list;
  for (int i = 0; i < 6; ++i) list += "missing" + std::to_string(i) + ".jpg\n";
  write_text(dir / "list.txt", list + "bad1.jpg\nbad2.jpg\n");
  DistractorPoolOptions o = small_options(dir, 4, RefreshMode::kSync);
  o.sources = {dir / "list.txt"};
  std::string error;
  try {
    DistractorPool pool(o);
  } catch (const SourceError& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("all 2 listed files failed"), std::string::npos) << error;
  EXPECT_NE(error.find("bad1.jpg"), std::string::npos) << error;
  EXPECT_NE(error.find("bad2.jpg"), std::string::npos) << error;
  EXPECT_EQ(error.find("missing"), std::string::npos) << error;

  write_text(dir / "list.txt", list + "bad1.jpg\nimg00.jpg\n");
  DistractorPool pool(o);
  const DistractorPoolStats s = pool.stats();
  ASSERT_GE(s.first_failures.size(), 6u);
  EXPECT_EQ(s.first_failures[0].path, dir / "missing0.jpg");
  EXPECT_EQ(s.first_failures[5].path, dir / "bad1.jpg");
}

// The folder vanishes: every decode fails. The workers back off instead of
// spinning, close() still returns at once, and a success resets the back-off.
TEST(DistractorPool, WorkersBackOffWhileEveryFileFails) {
  JpegDir dir(4);
  DistractorPool pool(small_options(dir, 2, RefreshMode::kAsync));
  for (int i = 0; i < 4; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "img%02d.jpg", i);
    std::filesystem::remove(dir / name);
  }
  // Uploads free the staging slots, so both workers decode (and fail).
  ASSERT_TRUE(prepare_until(pool, [&] { return pool.stats().failed >= 8; }));
  pool.prepare_for_augment();
  const uint64_t before = pool.stats().failed;
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  // Two workers sleeping 10, 20, 40 ... ms try about 7 times each in a
  // second; spinning, they fail thousands of times.
  EXPECT_LT(pool.stats().failed - before, 40u);

  write_jpegs(dir, 4);
  const uint64_t uploaded = pool.stats().uploaded;
  EXPECT_TRUE(prepare_until(
      pool, [&] { return pool.stats().uploaded >= uploaded + 4; }, 5));

  for (int i = 0; i < 4; ++i) {  // back off again, to the longest sleeps
    char name[32];
    std::snprintf(name, sizeof name, "img%02d.jpg", i);
    std::filesystem::remove(dir / name);
  }
  const uint64_t failed_again = pool.stats().failed;
  ASSERT_TRUE(prepare_until(pool, [&] { return pool.stats().failed >= failed_again + 8; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const auto start = Clock::now();
  pool.close();
  EXPECT_LT(seconds_since(start), 0.25);
}

TEST(DistractorPool, RateCapBelowTheMinimumIsRejected) {
  JpegDir dir(2);
  DistractorPoolOptions o = small_options(dir, 2, RefreshMode::kAsync);
  for (const double rate : {1e-300, 1e-9, -1.0}) {
    o.max_per_second = rate;
    try {
      DistractorPool pool(o);
      FAIL() << "expected invalid_argument for " << rate;
    } catch (const std::invalid_argument& e) {
      std::ostringstream want;
      want << "max_per_second must be 0 (no cap) or >= 0.001, got " << rate;
      EXPECT_NE(std::string(e.what()).find(want.str()), std::string::npos) << e.what();
    }
  }
  o.max_per_second = kMinMaxPerSecond;  // the slowest cap: works, closes at once
  DistractorPool pool(o);
  const auto start = Clock::now();
  pool.close();
  EXPECT_LT(seconds_since(start), 0.25);
}

// threads = 0: filled (by one thread), then never refreshed, no worker.
TEST(DistractorPool, ZeroThreadsFillsOnceAndStartsNoWorker) {
  JpegDir dir(5);
  DistractorPoolOptions o = small_options(dir, 4, RefreshMode::kAsync);
  o.threads = 0;
  DistractorPool pool(o);
  expect_slots_consistent(pool, /*redecode=*/true);
  const at::Tensor filled = pool.images().clone();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  pool.prepare_for_augment();
  const DistractorPoolStats s = pool.stats();
  EXPECT_EQ(s.decoded, 4u);
  EXPECT_EQ(s.uploaded, 0u);
  EXPECT_EQ(s.queue_depth, 0u);
  EXPECT_TRUE(at::equal(pool.images(), filled));

  o.threads = -1;
  try {
    DistractorPool bad(o);
    FAIL() << "expected invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("threads must be >= 0, got -1"), std::string::npos);
  }
}

// CUDA: the same stress loop on the device; the pool is read back after a
// synchronisation. Skips without a GPU.
TEST(DistractorPoolCuda, StressNoTornImagesOnTheDevice) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  JpegDir dir(6, 64, 48);
  DistractorPoolOptions o = small_options(dir, 16, RefreshMode::kAsync);
  o.device = c10::Device("cuda:0");
  o.threads = 4;
  DistractorPool pool(o);
  const size_t bytes = image_bytes(pool);
  const auto start = Clock::now();
  while (seconds_since(start) < 1.5 || pool.stats().uploaded < 64) {
    ASSERT_LT(seconds_since(start), 30);
    pool.prepare_for_augment();
    const at::Tensor host = pool.images().cpu();  // stream-ordered after the uploads
    for (int64_t k = 0; k < o.size; ++k) {
      ASSERT_EQ(image_checksum(host.data_ptr<uint8_t>() + k * bytes, bytes),
                pool.slot_info(k).checksum)
          << "slot " << k;
    }
  }
  pool.close();
}

// CUDA: a construction failing after its copy events were created and its
// workers started stops the workers and destroys the events (close()), again
// and again; a pool built afterwards works.
TEST(DistractorPoolCuda, ConstructionFailingAfterWorkersStartedReleasesEvents) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  JpegDir dir(3);
  DistractorPoolOptions o = small_options(dir, 4, RefreshMode::kAsync);
  o.device = c10::Device("cuda:0");
  o.threads = 2;
  o.after_worker_start = [](int worker) {
    if (worker == 1) throw std::system_error(EAGAIN, std::generic_category(), "thread 2");
  };
  for (int i = 0; i < 3; ++i) {
    expect_mentions(error_of<std::system_error>([&] { DistractorPool pool(o); }), {"thread 2"});
  }
  o.after_worker_start = nullptr;
  DistractorPool pool(o);
  pool.prepare_for_augment();
  EXPECT_TRUE(pool.images().is_cuda());
}

// CUDA sync mode: the same images as the CPU pool, call after call.
TEST(DistractorPoolCuda, SyncModeMatchesTheCpuPool) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  JpegDir dir(5);
  DistractorPoolOptions o = small_options(dir, 6, RefreshMode::kSync);
  o.per_call = 4;
  DistractorPool cpu(o);
  o.device = c10::Device("cuda:0");
  DistractorPool cuda(o);
  ASSERT_TRUE(cuda.images().is_cuda());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(at::equal(cpu.images(), cuda.images().cpu())) << "after call " << i;
    cpu.prepare_for_augment();
    cuda.prepare_for_augment();
  }
  EXPECT_TRUE(at::equal(cpu.images(), cuda.images().cpu()));
}

}  // namespace
}  // namespace obsaug
