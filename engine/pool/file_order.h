// The distractor pool's seeded file order and its image checksum: pure
// functions, shared by the pool (engine/pool/distractor_pool.cpp) and the
// tests that check it.
//
// File order: serial s (0, 1, 2, ...) of a pool over n files names file
// perm_{s / n}(s % n), where perm_e is the seeded pseudo-random permutation
// of epoch e (every file once per epoch, a fresh order each epoch).
#pragma once

#include <cstddef>
#include <cstdint>

namespace obsaug {

// The seeded permutation of 0..n-1 for `epoch`: a bijection, computed in
// O(1) per index (a Feistel network with cycle walking). 0 when n <= 1.
uint64_t permuted_index(uint64_t i, uint64_t n, uint64_t seed, uint64_t epoch);

// The file of `serial` among `n` files (n >= 1): epoch serial / n, position
// serial % n of that epoch's permutation.
uint32_t file_for_serial(uint64_t serial, uint64_t n, uint64_t seed);

// A fast 64-bit checksum of an image's bytes (not cryptographic).
uint64_t image_checksum(const uint8_t* data, size_t size);

}  // namespace obsaug
