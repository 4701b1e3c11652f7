// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC 2011), the Random123 reference algorithm, and the counter/key layout of
// DESIGN.md section 3. Host and device share this one definition, which is
// what makes the CPU and CUDA backends draw identical parameters.
#pragma once

#include <cstdint>

#include "kernels/hd.h"

namespace obsaug {

struct Philox4 {
  uint32_t v[4];
};

namespace detail {
constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;  // sqrt(3) - 1

OBSAUG_HD void mulhilo32(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t product = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(product >> 32);
  *lo = static_cast<uint32_t>(product);
}
}  // namespace detail

// Ten rounds of Philox4x32 on `counter` under `key` (Random123 philox4x32_10).
OBSAUG_HD Philox4 philox4x32_10(Philox4 counter, uint32_t key0, uint32_t key1) {
  Philox4 c = counter;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    detail::mulhilo32(detail::kPhiloxM0, c.v[0], &hi0, &lo0);
    detail::mulhilo32(detail::kPhiloxM1, c.v[2], &hi1, &lo1);
    c = Philox4{{hi1 ^ c.v[1] ^ key0, lo1, hi0 ^ c.v[3] ^ key1, lo0}};
    key0 += detail::kPhiloxW0;
    key1 += detail::kPhiloxW1;
  }
  return c;
}

// The block an op draws its parameters from (DESIGN.md section 3):
// key = (seed lo, seed hi), counter = (step lo, step hi, b, k | s << 16),
// with b the sample index, k the op's index in the pipeline, s the frame
// index (0 unless the op draws per frame).
OBSAUG_HD Philox4 draw_block(uint64_t seed, uint64_t step, uint32_t sample, uint32_t op_index,
                             uint32_t frame) {
  const Philox4 counter{{static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32), sample,
                         (op_index & 0xffffu) | (frame << 16)}};
  return philox4x32_10(counter, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// Uniform integer in [0, n): floor(r * n / 2^32).
OBSAUG_HD uint32_t below(uint32_t r, uint32_t n) {
  return static_cast<uint32_t>((static_cast<uint64_t>(r) * n) >> 32);
}

// Uniform integer in [0, n) for n up to 2^32 (a replay buffer's slots):
// floor(r * n / 2^32), the same as below(r, n) for every n < 2^32.
OBSAUG_HD uint64_t below_wide(uint32_t r, uint64_t n) {
  return (static_cast<uint64_t>(r) * n) >> 32;
}

// Uniform float in [0, 1) with 24 random bits.
OBSAUG_HD float unit(uint32_t r) { return static_cast<float>(r >> 8) * (1.0f / 16777216.0f); }

}  // namespace obsaug
