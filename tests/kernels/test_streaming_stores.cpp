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

}  // namespace
}  // namespace obsaug
