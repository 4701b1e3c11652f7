#include "kernels/streaming_stores.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <string>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace obsaug {

namespace {

// The last-level cache one core shares, in bytes: the largest level sysfs
// lists for cpu0 (per instance: on a CPU with several L3 slices sysconf
// reports their sum, 256 MiB against 32 MiB on the build VM); sysconf when
// sysfs says nothing; 0 when neither does.
int64_t last_level_cache_bytes() {
  int64_t best = 0;
  int best_level = 0;
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    std::ifstream level_file(dir + "/level");
    std::ifstream size_file(dir + "/size");
    int level = 0;
    int64_t size = 0;
    std::string unit;
    if (!(level_file >> level) || !(size_file >> size)) continue;
    size_file >> unit;  // "32768K"
    if (!unit.empty() && (unit[0] == 'K' || unit[0] == 'k')) size <<= 10;
    if (!unit.empty() && unit[0] == 'M') size <<= 20;
    if (level > best_level || (level == best_level && size > best)) {
      best_level = level;
      best = size;
    }
  }
  if (best > 0) return best;
  const long cache = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return cache > 0 ? static_cast<int64_t>(cache) : 0;
}

std::atomic<int64_t> threshold_override{-1};

}  // namespace

int64_t stream_threshold_for_cache(int64_t cache_bytes) {
  constexpr int64_t kLargestShare = int64_t{128} << 20;
  if (cache_bytes <= 0) return int64_t{8} << 20;
  return std::min(cache_bytes, kLargestShare) / 4;
}

int64_t stream_threshold_bytes() {
  static const int64_t from_cache = stream_threshold_for_cache(last_level_cache_bytes());
  const int64_t set = threshold_override.load(std::memory_order_relaxed);
  return set >= 0 ? set : from_cache;
}

bool streams_output(int64_t bytes) { return bytes >= stream_threshold_bytes(); }

bool streams_from_input(int64_t bytes, int64_t threads) {
  const int64_t threshold = stream_threshold_bytes();
  return bytes >= threshold || (threads == 1 && bytes >= threshold - threshold / 4);
}

void set_stream_threshold_bytes(int64_t bytes) {
  threshold_override.store(bytes < 0 ? -1 : bytes, std::memory_order_relaxed);
}

void stream_bytes(void* dst, const void* src, int64_t n, const void* ahead, int64_t ahead_bytes) {
#if defined(__x86_64__)
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  LinePrefetch prefetch(ahead, ahead_bytes, n);
  const int64_t head =
      std::min<int64_t>(n, (16 - static_cast<int64_t>(reinterpret_cast<uintptr_t>(d) & 15)) & 15);
  std::memcpy(d, s, static_cast<size_t>(head));
  int64_t i = head;
  for (; i + 64 <= n; i += 64) {
    prefetch.line();
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  for (; i + 16 <= n; i += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
  }
  std::memcpy(d + i, s + i, static_cast<size_t>(n - i));
  prefetch.finish();
#else
  std::memcpy(dst, src, static_cast<size_t>(n));
#endif
}

void stream_fence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

}  // namespace obsaug
