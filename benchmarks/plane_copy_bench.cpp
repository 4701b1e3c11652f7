// obsaug_plane_copy_bench: memcpy against a forward vector loop at each
// distance of the destination past the source modulo 4 KiB, and what
// copy_plane_bytes (kernels/plane_copy.h) picks.
//
//   obsaug_plane_copy_bench [--bytes N] [--blocks K] [--rounds R]
//
// Copies K blocks of N bytes (default 288 blocks of 26880 bytes: the
// translated blocks of a float32 [32, 9, 84, 84] shift by four rows, 7.7 MB,
// so the buffers stay in a 32 MiB cache) from one buffer to another, block i
// of each at i * (N + 1344) plus the distance. Prints per distance the best
// of R rounds (default 9, the methods alternating within a round) in ms
// for memcpy, the loop and copy_plane_bytes, and memcpy / loop.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/plane_copy.h"

namespace {

int parse_int(const char* flag, const char* value) {
  char* end = nullptr;
  const long v = std::strtol(value, &end, 10);
  if (end == value || *end != '\0' || v <= 0 || v > (1L << 30)) {
    std::fprintf(stderr, "%s wants a positive integer, got '%s'\n", flag, value);
    std::exit(2);
  }
  return static_cast<int>(v);
}

}  // namespace

int main(int argc, char** argv) {
  int bytes = 26880, blocks = 288, rounds = 9;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 < argc && a == "--bytes") {
      bytes = parse_int("--bytes", argv[++i]);
    } else if (i + 1 < argc && a == "--blocks") {
      blocks = parse_int("--blocks", argv[++i]);
    } else if (i + 1 < argc && a == "--rounds") {
      rounds = parse_int("--rounds", argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--bytes N] [--blocks K] [--rounds R]\n", argv[0]);
      return 2;
    }
  }
  if (bytes < 64) {
    std::fprintf(stderr, "--bytes must be at least 64 (copy_plane_bytes' loop), got %d\n", bytes);
    return 2;
  }
  const size_t stride = static_cast<size_t>(bytes) + 1344;
  const size_t total = stride * static_cast<size_t>(blocks) + 8192;
  // page-aligned buffers, so that the distance is exactly the one named
  auto* src = static_cast<unsigned char*>(std::aligned_alloc(4096, (total + 4095) / 4096 * 4096));
  auto* dst = static_cast<unsigned char*>(std::aligned_alloc(4096, (total + 4095) / 4096 * 4096));
  if (src == nullptr || dst == nullptr) {
    std::fprintf(stderr, "out of memory for two buffers of %zu bytes\n", total);
    return 1;
  }
  std::memset(src, 1, total);
  std::memset(dst, 2, total);
  std::vector<int> distances;
  for (int d = 0; d <= 32; ++d) distances.push_back(d);
  for (int d : {48, 64, 2048, 4095}) distances.push_back(d);
  using Copy = void (*)(void*, const void*, size_t);
  const Copy methods[3] = {[](void* d, const void* s, size_t n) { std::memcpy(d, s, n); },
                           [](void* d, const void* s, size_t n) {
                             obsaug::copy_bytes(static_cast<unsigned char*>(d),
                                                static_cast<const unsigned char*>(s),
                                                static_cast<int64_t>(n));
                           },
                           obsaug::copy_plane_bytes};
  std::printf("blocks %d x %d bytes, best of %d rounds, ms per pass over the blocks\n", blocks,
              bytes, rounds);
  std::printf("%8s %9s %9s %16s %14s\n", "distance", "memcpy", "loop", "copy_plane_bytes",
              "memcpy / loop");
  for (int distance : distances) {
    double best[3] = {1e30, 1e30, 1e30};
    for (int r = 0; r < rounds; ++r) {
      for (int m = 0; m < 3; ++m) {
        const auto start = std::chrono::steady_clock::now();
        for (int b = 0; b < blocks; ++b) {
          const size_t at = static_cast<size_t>(b) * stride + 64;
          methods[m](dst + at + distance, src + at, static_cast<size_t>(bytes));
        }
        asm volatile("" : : "r"(dst) : "memory");
        const std::chrono::duration<double, std::milli> took =
            std::chrono::steady_clock::now() - start;
        best[m] = std::min(best[m], took.count());
      }
    }
    std::printf("%8d %9.3f %9.3f %16.3f %13.2fx\n", distance, best[0], best[1], best[2],
                best[0] / best[1]);
  }
  std::free(src);
  std::free(dst);
  return 0;
}
