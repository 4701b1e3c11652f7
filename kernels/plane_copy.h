// Byte copies between buffers that do not overlap: short rows by fixed-size
// moves, whole planes and blocks (kilobytes) by memcpy, except at the one
// distance where memcpy is slow.
//
// glibc (2.36 on the build VM) copies blocks from a few KiB up with
// `rep movsb` on CPUs that announce fast short rep mov. On the build VM's
// AMD Zen 4 (Zen 3 is reported to behave alike) that runs several times
// slower when the destination lies 1 to 15 bytes past the source modulo
// 4 KiB, and somewhat slower up to 31 bytes, than a forward loop in 32-byte
// steps (26880-byte blocks in the cache: 2.2-3.3 ms against 0.4-1.1 ms per
// 7.7 MB; benchmarks/plane_copy_bench.cpp, BENCHMARKS.md "memcpy's slow
// distance"). Fresh input and output tensors share their page offset, so a
// plane shifted one to four pixels to the right (and not vertically) puts
// its translated block exactly there. copy_plane_bytes takes the loop
// within 31 bytes ahead and memcpy everywhere else, where memcpy is as fast
// or faster.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace obsaug {

// True when dst lies 1 to 31 bytes past src modulo 4 KiB.
inline bool is_slow_memcpy_distance(const void* dst, const void* src) {
  const uintptr_t ahead =
      (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & uintptr_t{4095};
  return ahead != 0 && ahead < 32;
}

// Copies n bytes forward with fixed-size moves the compiler turns into
// vector loads and stores (32-byte steps, the last one overlapping): short
// rows without a memcpy call, and the copy at memcpy's slow distance.
inline void copy_bytes(unsigned char* __restrict dst, const unsigned char* __restrict src,
                       int64_t n) {
  if (n >= 32) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) __builtin_memcpy(dst + i, src + i, 32);
    if (i < n) __builtin_memcpy(dst + n - 32, src + n - 32, 32);
  } else if (n >= 16) {
    __builtin_memcpy(dst, src, 16);
    __builtin_memcpy(dst + n - 16, src + n - 16, 16);
  } else if (n >= 8) {
    __builtin_memcpy(dst, src, 8);
    __builtin_memcpy(dst + n - 8, src + n - 8, 8);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
  }
}

// memcpy(dst, src, n) for buffers that do not overlap.
inline void copy_plane_bytes(void* dst, const void* src, size_t n) {
  if (n >= 64 && is_slow_memcpy_distance(dst, src)) {
    copy_bytes(static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src),
               static_cast<int64_t>(n));
  } else {
    std::memcpy(dst, src, n);
  }
}

}  // namespace obsaug
