#include "engine/pool/file_order.h"

#include <cstring>

namespace obsaug {
namespace {

uint64_t mix64(uint64_t x) {  // splitmix64's finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace

uint64_t permuted_index(uint64_t i, uint64_t n, uint64_t seed, uint64_t epoch) {
  if (n <= 1) return 0;
  int bits = 0;
  while ((uint64_t{1} << bits) < n) ++bits;
  const int half = (bits + 1) / 2;  // a balanced Feistel network on 2 * half bits
  const uint64_t mask = (uint64_t{1} << half) - 1;
  const uint64_t key = mix64(seed ^ mix64(epoch + 0x5eed));
  uint64_t x = i;
  do {  // cycle walking: the domain is < 4n, so a few rounds on average
    uint64_t left = x >> half, right = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      const uint64_t f = mix64(right ^ key ^ (round << 56)) & mask;
      const uint64_t next_right = left ^ f;
      left = right;
      right = next_right;
    }
    x = (left << half) | right;
  } while (x >= n);
  return x;
}

uint32_t file_for_serial(uint64_t serial, uint64_t n, uint64_t seed) {
  return static_cast<uint32_t>(permuted_index(serial % n, n, seed, serial / n));
}

uint64_t image_checksum(const uint8_t* data, size_t size) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ size;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, data + i, 8);
    h = (h ^ word) * 0xff51afd7ed558ccdull;
    h ^= h >> 29;
  }
  for (; i < size; ++i) h = (h ^ data[i]) * 0x100000001b3ull;
  return mix64(h);
}

}  // namespace obsaug
