// kernels/plane_copy.h: which distances take the vector loop, and that the
// copy is exact at every distance near them and every length. (That augment
// outputs at those distances equal the per-pixel path: test_augment.cpp,
// PlanesAtEveryPageDistanceMatchPerPixelPath.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/plane_copy.h"

namespace obsaug {
namespace {

TEST(PlaneCopy, SlowDistanceIsOneToThirtyOneBytesAheadModuloFourKiB) {
  std::vector<unsigned char> buffer(3 * 4096);
  const unsigned char* src = buffer.data() + 4096;
  for (int64_t ahead = -4096; ahead <= 4096 + 64; ++ahead) {
    const int64_t page_offset = ((ahead % 4096) + 4096) % 4096;
    const bool slow = page_offset >= 1 && page_offset <= 31;
    ASSERT_EQ(is_slow_memcpy_distance(src + ahead, src), slow) << "dst = src + " << ahead;
  }
}

TEST(PlaneCopy, CopiesExactlyAtEveryDistanceNearTheSlowOneAndEveryLength) {
  constexpr int64_t kGuard = 64;
  constexpr int64_t kLongest = 7057;
  std::vector<unsigned char> src_buffer(kLongest + 2 * kGuard);
  for (size_t i = 0; i < src_buffer.size(); ++i)
    src_buffer[i] = static_cast<unsigned char>(i * 131 + 7);
  const unsigned char* src = src_buffer.data() + kGuard;
  std::vector<unsigned char> dst_buffer(kLongest + 2 * kGuard + 4096);
  std::vector<int64_t> distances;
  for (int64_t d = 0; d <= 40; ++d) distances.push_back(d);
  for (int64_t d : {63, 64, 65, 2048, 4064, 4080, 4095}) distances.push_back(d);
  for (int64_t distance : distances) {
    // dst at `distance` bytes past src modulo 4 KiB, at least kGuard into its buffer
    const uintptr_t base = reinterpret_cast<uintptr_t>(dst_buffer.data()) + kGuard;
    const uintptr_t want =
        (reinterpret_cast<uintptr_t>(src) + static_cast<uintptr_t>(distance)) & 4095;
    unsigned char* dst = reinterpret_cast<unsigned char*>(base + ((want - base) & 4095));
    for (int64_t n : {0, 1, 15, 31, 32, 33, 63, 64, 65, 95, 96, 97, 336, 1000, 4097, 7056, 7057}) {
      std::fill(dst_buffer.begin(), dst_buffer.end(), 0xA5);
      copy_plane_bytes(dst, src, static_cast<size_t>(n));
      for (int64_t i = 0; i < static_cast<int64_t>(dst_buffer.size()); ++i) {
        const int64_t at = static_cast<int64_t>(reinterpret_cast<uintptr_t>(dst_buffer.data()) + i -
                                                reinterpret_cast<uintptr_t>(dst));
        const unsigned char expected = at >= 0 && at < n ? src[at] : 0xA5;
        ASSERT_EQ(dst_buffer[i], expected)
            << "distance " << distance << ", length " << n << ", byte " << at;
      }
    }
  }
}

}  // namespace
}  // namespace obsaug
