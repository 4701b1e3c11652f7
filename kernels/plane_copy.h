// Copies of whole planes and blocks (kilobytes) between buffers that do not
// overlap: memcpy, except at the one distance where memcpy is slow.
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

// Forward copy in 32-byte steps, the last one overlapping (n >= 32; the
// buffers do not overlap).
inline void copy_by_vectors(void* dst, const void* src, size_t n) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) __builtin_memcpy(d + i, s + i, 32);
  if (i < n) __builtin_memcpy(d + n - 32, s + n - 32, 32);
}

// memcpy(dst, src, n) for buffers that do not overlap.
inline void copy_plane_bytes(void* dst, const void* src, size_t n) {
  if (n >= 64 && is_slow_memcpy_distance(dst, src)) {
    copy_by_vectors(dst, src, n);
  } else {
    std::memcpy(dst, src, n);
  }
}

}  // namespace obsaug
