// kernels/streaming_stores.h: the copy itself at every alignment and length,
// and the threshold's override. (That streamed augment outputs equal the
// per-pixel path: test_augment.cpp, StreamedOutputsMatchPerPixelPath.)
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/streaming_stores.h"

namespace obsaug {
namespace {

TEST(StreamBytes, CopiesExactlyAtEveryAlignmentAndLength) {
  constexpr int kGuard = 64;
  std::vector<unsigned char> src(512 + 2 * kGuard);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 37 + 11);
  std::vector<unsigned char> ahead(300, 1);
  for (int n = 0; n <= 300; n += (n < 80 ? 1 : 7)) {
    for (int dst_offset = 0; dst_offset < 32; ++dst_offset) {
      for (int src_offset : {0, 1, 5, 16, 31}) {
        std::vector<unsigned char> dst(512 + 2 * kGuard, 0xA5);
        unsigned char* d = dst.data() + kGuard + dst_offset;
        const unsigned char* s = src.data() + kGuard + src_offset;
        if ((n + dst_offset) % 2) {
          stream_bytes(d, s, n);
        } else {
          stream_bytes(d, s, n, ahead.data(), static_cast<int64_t>(ahead.size()));
        }
        stream_fence();
        for (int i = 0; i < static_cast<int>(dst.size()); ++i) {
          const int at = i - kGuard - dst_offset;
          const unsigned char want = at >= 0 && at < n ? s[at] : 0xA5;
          ASSERT_EQ(dst[i], want) << "n " << n << ", dst offset " << dst_offset << ", src offset "
                                  << src_offset << ", byte " << at;
        }
      }
    }
  }
}

// A quarter of the cache, 8 MiB when it is unknown, and at most 32 MiB
// however large a cache the machine reports (a server socket's, seen whole
// from a VM).
TEST(StreamThreshold, AQuarterOfTheCacheUpTo32MiB) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  EXPECT_EQ(stream_threshold_for_cache(0), 8 * kMiB);
  EXPECT_EQ(stream_threshold_for_cache(-1), 8 * kMiB);
  EXPECT_EQ(stream_threshold_for_cache(2 * kMiB), kMiB / 2);
  EXPECT_EQ(stream_threshold_for_cache(32 * kMiB), 8 * kMiB);
  EXPECT_EQ(stream_threshold_for_cache(96 * kMiB), 24 * kMiB);
  EXPECT_EQ(stream_threshold_for_cache(128 * kMiB), 32 * kMiB);
  EXPECT_EQ(stream_threshold_for_cache(480 * kMiB), 32 * kMiB);
  EXPECT_EQ(stream_threshold_for_cache(int64_t{1} << 50), 32 * kMiB);
  EXPECT_LE(stream_threshold_bytes(), 32 * kMiB);
}

TEST(StreamThreshold, OverrideAndRestore) {
  const int64_t by_cache = stream_threshold_bytes();
  EXPECT_GT(by_cache, 0);
  set_stream_threshold_bytes(0);
  EXPECT_EQ(stream_threshold_bytes(), 0);
  set_stream_threshold_bytes(12345);
  EXPECT_EQ(stream_threshold_bytes(), 12345);
  set_stream_threshold_bytes(-1);
  EXPECT_EQ(stream_threshold_bytes(), by_cache);
}

// Outputs written straight from their input stream from the threshold, and
// by one thread from 3/4 of it; the others from the threshold.
TEST(StreamThreshold, ALoneThreadStreamsFromInputFromThreeQuarters) {
  set_stream_threshold_bytes(1000);
  EXPECT_TRUE(streams_output(1000));
  EXPECT_FALSE(streams_output(999));
  EXPECT_TRUE(streams_from_input(750, 1));
  EXPECT_FALSE(streams_from_input(749, 1));
  EXPECT_FALSE(streams_from_input(999, 2));
  EXPECT_TRUE(streams_from_input(1000, 2));
  set_stream_threshold_bytes(0);
  EXPECT_TRUE(streams_from_input(0, 1));
  EXPECT_TRUE(streams_from_input(0, 2));
  EXPECT_TRUE(streams_output(0));
  set_stream_threshold_bytes(int64_t{1} << 62);
  EXPECT_FALSE(streams_from_input(int64_t{1} << 61, 1));
  set_stream_threshold_bytes(-1);
  // With the build VM's 32 MiB cache: a float32 shift of 9x84x84 frames at
  // B = 32 (8.1 MB) streams with one thread and not with two; an output of
  // that size whose planes are all built in scratch (uint8 -> float32) does
  // not.
  if (stream_threshold_bytes() == int64_t{8} << 20) {
    const int64_t batch_32 = int64_t{32} * 9 * 84 * 84 * 4;
    EXPECT_TRUE(streams_from_input(batch_32, 1));
    EXPECT_FALSE(streams_from_input(batch_32, 2));
    EXPECT_FALSE(streams_output(batch_32));
  }
}

}  // namespace
}  // namespace obsaug
