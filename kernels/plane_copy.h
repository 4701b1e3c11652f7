// Copies of whole planes and blocks (kilobytes) between buffers that do not
// overlap: memcpy, except at the one distance where memcpy is slow.
//
// glibc (before 2.39) copies blocks from a few KiB up with `rep movsb` on
// CPUs that announce fast short rep mov, AMD Zen 3 and 4 among them. There it
// runs 10-20x slower when the destination lies 1 to 15 bytes past the source
// modulo 4 KiB (Zen 4, glibc 2.36, a 26880-byte block in the cache:
// 2.3-3.5 GB/s, against 32-54 GB/s for a 32-byte vector loop and 46-57 GB/s
// for memcpy at other distances; BENCHMARKS.md, "memcpy one to fifteen bytes
// ahead"). A plane shifted one to three pixels to the right (float32) or one
// to four (uint8) puts its block exactly there when the input and output
// planes share their page offset, as two fresh tensors do: 4 to 5% of DrQ's
// shifts. A forward vector loop has no such distance, so copy_plane_bytes
// takes it within 32 bytes ahead and memcpy everywhere else.
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

// memcpy(dst, src, n) for buffers that do not overlap. Inline, so that a
// caller compiled for AVX2 (OBSAUG_CLONES) gets 32-byte moves in the loop.
inline void copy_plane_bytes(void* dst, const void* src, size_t n) {
  if (n < 64 || !is_slow_memcpy_distance(dst, src)) {
    std::memcpy(dst, src, n);
    return;
  }
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) __builtin_memcpy(d + i, s + i, 32);
  if (i < n) __builtin_memcpy(d + n - 32, s + n - 32, 32);  // the last 32, overlapping
}

}  // namespace obsaug
