// Philox4x32-10 against the Random123 known-answer vectors, and the counter
// layout of DESIGN.md section 3.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/philox.h"

namespace obsaug {
namespace {

// Random123's known answers (kat_vectors, philox4x32 10 rounds): counter and
// key, then the four output words. The first two are DESIGN.md's.
struct KnownAnswer {
  const char* name;
  Philox4 counter;
  uint32_t key_lo, key_hi;
  Philox4 expected;
};

TEST(Philox, KnownAnswers) {
  const KnownAnswer answers[] = {
      {"zero", {{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}},
      {"all ones",
       {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}},
       0xffffffffu,
       0xffffffffu,
       {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}},
      {"digits of pi",
       {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
       0xa4093822u,
       0x299f31d0u,
       {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}},
  };
  for (const KnownAnswer& a : answers) {
    const Philox4 r = philox4x32_10(a.counter, a.key_lo, a.key_hi);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(r.v[i], a.expected.v[i]) << a.name << " word " << i;
  }
}

TEST(Philox, DrawBlockLayout) {
  const uint64_t seed = 0x0123456789abcdefull;
  const uint64_t step = 0xfedcba9876543210ull;
  const Philox4 expected = philox4x32_10(Philox4{{0x76543210u, 0xfedcba98u, 7u, 3u | (5u << 16)}},
                                         0x89abcdefu, 0x01234567u);
  const Philox4 got = draw_block(seed, step, 7, 3, 5);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got.v[i], expected.v[i]) << "word " << i;
}

TEST(Philox, BelowCoversFullRange) {
  EXPECT_EQ(below(0u, 9), 0u);
  EXPECT_EQ(below(0xffffffffu, 9), 8u);
  EXPECT_EQ(below(0xffffffffu, 1), 0u);
  std::vector<int> seen(9, 0);
  for (uint32_t b = 0; b < 900; ++b) ++seen[below(draw_block(1, 2, b, 0, 0).v[0], 9)];
  for (int v = 0; v < 9; ++v) EXPECT_GT(seen[v], 50) << "value " << v;
}

TEST(Philox, BelowWideReachesEverySlotOfAFull2To32Ring) {
  // n = 2^32 (a replay buffer of that capacity): floor(r * 2^32 / 2^32) = r,
  // every slot; a 32-bit n would wrap to 0 and give 0 for every r.
  const uint64_t full = uint64_t{1} << 32;
  for (const uint32_t r : {0u, 1u, 12345u, 0x80000000u, 0xffffffffu}) {
    EXPECT_EQ(below_wide(r, full), r);
  }
  // Below 2^32 it is below(), draw for draw (the sampler's draws do not change).
  for (const uint32_t n : {1u, 2u, 9u, 100000u, 0xfffffffeu, 0xffffffffu}) {
    for (uint32_t b = 0; b < 64; ++b) {
      const uint32_t r = draw_block(3, 4, b, 0, 0).v[0];
      EXPECT_EQ(below_wide(r, n), below(r, n)) << "n " << n << " r " << r;
    }
  }
}

TEST(Philox, UnitIsInHalfOpenInterval) {
  EXPECT_EQ(unit(0u), 0.0f);
  EXPECT_LT(unit(0xffffffffu), 1.0f);
  EXPECT_EQ(unit(0x80000000u), 0.5f);
}

}  // namespace
}  // namespace obsaug
