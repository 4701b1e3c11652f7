// kernels/float_math.h: the error bound it states (kFloatMathMaxUlp) over
// every input the ops feed it, the special values, and a known-answer table of
// exact bits that pins the algorithm (the CUDA side is checked against it).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <random>

#include "kernels/float_math.h"
#include "kernels/philox.h"

namespace obsaug {
namespace {

// The exhaustive loops take every input in the normal build and every
// kSanitizerStride-th one under ASan/TSan, which run them ~10x slower.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr uint32_t kStride = 61;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr uint32_t kStride = 61;
#else
constexpr uint32_t kStride = 1;
#endif
#else
constexpr uint32_t kStride = 1;
#endif

constexpr float kTwoPiF = 0x1.921fb6p+2f;  // float(2 pi), random_conv's 2pi_f

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// Distance in representable floats (+0 and -0 are one point); two NaNs are 0
// apart, a NaN and a number infinitely far.
int64_t ulp_distance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) {
    return std::isnan(a) && std::isnan(b) ? 0 : std::numeric_limits<int64_t>::max();
  }
  auto ordinal = [](float x) {
    const uint32_t u = bits(x);
    return (u & 0x80000000u) ? -static_cast<int64_t>(u & 0x7fffffffu) : static_cast<int64_t>(u);
  };
  const int64_t d = ordinal(a) - ordinal(b);
  return d < 0 ? -d : d;
}

// The largest error of a function over a set of inputs, and where.
struct WorstError {
  int64_t ulps = 0;
  float at = 0.0f, got = 0.0f, want = 0.0f;
  void add(float x, float g, float w) {
    const int64_t d = ulp_distance(g, w);
    if (d > ulps) *this = {d, x, g, w};
  }
};

::testing::AssertionResult within_bound(const char* what, const WorstError& e) {
  std::printf("%s: max %lld ulp\n", what, static_cast<long long>(e.ulps));
  if (e.ulps <= kFloatMathMaxUlp) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": " << e.ulps << " ulp at x = " << std::hexfloat << e.at << ": got " << e.got
         << ", correctly rounded " << e.want << " (bound " << std::dec << kFloatMathMaxUlp << ")";
}

// The correctly rounded result, up to double rounding, which cannot move it
// by more than one float from a faithful result's neighbour.
float exp_ref(float x) { return static_cast<float>(std::exp(static_cast<double>(x))); }
float log_ref(float x) { return static_cast<float>(std::log(static_cast<double>(x))); }
float sin_ref(float x) { return static_cast<float>(std::sin(static_cast<double>(x))); }
float cos_ref(float x) { return static_cast<float>(std::cos(static_cast<double>(x))); }

// random_conv's u1 = float((r0 >> 8) + 1) * 2^-24: all 2^24 values.
TEST(FloatMath, LogOverEveryBoxMullerU1) {
  WorstError e;
  for (uint32_t k = 1; k <= (1u << 24); k += kStride) {
    const float u1 = static_cast<float>(k) * 0x1p-24f;
    e.add(u1, log_f32(u1), log_ref(u1));
  }
  if (kStride > 1) e.add(1.0f, log_f32(1.0f), log_ref(1.0f));
  EXPECT_TRUE(within_bound("log(u1)", e));
}

// random_conv's th = 2pi_f * unit(r): all 2^24 values.
TEST(FloatMath, SinCosOverEveryBoxMullerAngle) {
  WorstError es, ec;
  for (uint32_t j = 0; j < (1u << 24); j += kStride) {
    const float th = mul_rn(kTwoPiF, unit(j << 8));
    es.add(th, sin_f32(th), sin_ref(th));
    ec.add(th, cos_f32(th), cos_ref(th));
  }
  EXPECT_TRUE(within_bound("sin(th)", es));
  EXPECT_TRUE(within_bound("cos(th)", ec));
}

// sigmoid's exp(-acc), acc any float: every 64th float of [-200, 200] (those
// beyond saturate to 0 or inf, checked below), and random floats of the range.
TEST(FloatMath, ExpOverDenseGrid) {
  WorstError e;
  const uint32_t top = bits(200.0f);
  for (uint32_t u = 0; u <= top; u += 64 * kStride) {
    for (const uint32_t sign : {0u, 0x80000000u}) {
      const float x = from_bits(u | sign);
      e.add(x, exp_f32(x), exp_ref(x));
    }
  }
  std::mt19937 gen(20240611u);
  std::uniform_real_distribution<float> acc(-104.0f, 89.0f);
  for (int i = 0; i < 1000000 / static_cast<int>(kStride); ++i) {
    const float x = acc(gen);
    e.add(x, exp_f32(x), exp_ref(x));
  }
  EXPECT_TRUE(within_bound("exp(x)", e));
}

// The wider domains the header states, away from the ops' inputs: log of
// every 4099th positive float (subnormals included), sin/cos of every 4099th
// float with |x| <= 200.
TEST(FloatMath, SampledWholeDomains) {
  WorstError el, es, ec;
  for (uint32_t u = 1; u < 0x7f800000u; u += 4099 * kStride) {
    const float x = from_bits(u);
    el.add(x, log_f32(x), log_ref(x));
  }
  for (uint32_t u = 0; u <= bits(200.0f); u += 4099 * kStride) {
    for (const uint32_t sign : {0u, 0x80000000u}) {
      const float x = from_bits(u | sign);
      es.add(x, sin_f32(x), sin_ref(x));
      ec.add(x, cos_f32(x), cos_ref(x));
    }
  }
  EXPECT_TRUE(within_bound("log(x), x > 0", el));
  EXPECT_TRUE(within_bound("sin(x), |x| <= 200", es));
  EXPECT_TRUE(within_bound("cos(x), |x| <= 200", ec));
}

TEST(FloatMath, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float neg_nan = -nan;
  const float max = std::numeric_limits<float>::max();
  const float denorm_min = std::numeric_limits<float>::denorm_min();

  EXPECT_EQ(bits(exp_f32(-inf)), 0u);
  EXPECT_EQ(exp_f32(inf), inf);
  EXPECT_TRUE(std::isnan(exp_f32(nan)));
  EXPECT_TRUE(std::isnan(exp_f32(neg_nan)));
  EXPECT_EQ(exp_f32(0.0f), 1.0f);
  EXPECT_EQ(exp_f32(-0.0f), 1.0f);
  // Overflow exactly where the true value rounds to inf (ln FLT_MAX =
  // 88.72283905...), underflow to +0 where it rounds to 0 (ln 2^-150 = -103.97207708...).
  EXPECT_EQ(exp_f32(from_bits(0x42b17218u)), inf);
  EXPECT_EQ(exp_f32(max), inf);
  EXPECT_TRUE(std::isfinite(exp_f32(from_bits(0x42b17217u))));
  EXPECT_EQ(bits(exp_f32(from_bits(0xc2cff1b5u))), 0u);
  EXPECT_EQ(bits(exp_f32(-max)), 0u);
  EXPECT_EQ(exp_f32(from_bits(0xc2cff1b4u)), denorm_min);
  // So the sigmoid of a large negative accumulator is exactly 0, of a large
  // positive one exactly 1.
  EXPECT_EQ(bits(div_rn(1.0f, add_rn(1.0f, exp_f32(300.0f)))), 0u);
  EXPECT_EQ(div_rn(1.0f, add_rn(1.0f, exp_f32(-300.0f))), 1.0f);

  EXPECT_EQ(log_f32(0.0f), -inf);
  EXPECT_EQ(log_f32(-0.0f), -inf);
  EXPECT_TRUE(std::isnan(log_f32(-1.0f)));
  EXPECT_TRUE(std::isnan(log_f32(-denorm_min)));
  EXPECT_TRUE(std::isnan(log_f32(-inf)));
  EXPECT_TRUE(std::isnan(log_f32(nan)));
  EXPECT_EQ(log_f32(inf), inf);
  EXPECT_EQ(bits(log_f32(1.0f)), 0u);
  EXPECT_EQ(ulp_distance(log_f32(denorm_min), log_ref(denorm_min)), 0);
  EXPECT_EQ(ulp_distance(log_f32(max), log_ref(max)), 0);

  for (const float x : {nan, neg_nan, inf, -inf}) {
    EXPECT_TRUE(std::isnan(sin_f32(x))) << x;
    EXPECT_TRUE(std::isnan(cos_f32(x))) << x;
  }
  EXPECT_EQ(bits(sin_f32(0.0f)), 0u);
  EXPECT_EQ(bits(sin_f32(-0.0f)), 0x80000000u);
  EXPECT_EQ(cos_f32(0.0f), 1.0f);
  EXPECT_EQ(sin_f32(denorm_min), denorm_min);
  // The domain ends at |x| = 200.
  EXPECT_FALSE(std::isnan(sin_f32(200.0f)));
  EXPECT_FALSE(std::isnan(cos_f32(-200.0f)));
  EXPECT_TRUE(std::isnan(sin_f32(std::nextafter(200.0f, inf))));
  EXPECT_TRUE(std::isnan(cos_f32(-std::nextafter(200.0f, inf))));

  // Every NaN result has the one canonical pattern, whatever the input.
  for (const float r : {exp_f32(neg_nan), log_f32(-1.0f), log_f32(neg_nan), sin_f32(inf),
                        cos_f32(neg_nan), sin_f32(1000.0f)}) {
    EXPECT_EQ(bits(r), 0x7fc00000u);
  }
}

// The functions are odd (sin) and even (cos) bit for bit.
TEST(FloatMath, SinOddCosEven) {
  for (uint32_t u = 0; u <= bits(200.0f); u += 100003 * kStride) {
    const float x = from_bits(u);
    EXPECT_EQ(bits(sin_f32(-x)), bits(sin_f32(x)) ^ 0x80000000u) << std::hexfloat << x;
    EXPECT_EQ(bits(cos_f32(-x)), bits(cos_f32(x))) << std::hexfloat << x;
  }
}

// The measurement behind the numbers at the top of kernels/float_math.h (about
// 30 s, so not part of the suite): long double references, the integer ulp
// distance to the rounded reference and the real error in ulps of its binade.
// Run with --gtest_also_run_disabled_tests --gtest_filter='*MeasureAgainstLongDouble'.
struct RealError {
  int64_t ulps = 0;
  double real = 0.0;
  float at = 0.0f;
  void add(float x, float got, long double want) {
    const int64_t d = ulp_distance(got, static_cast<float>(want));
    if (d > ulps) ulps = d;
    if (!std::isfinite(want) || want == 0.0L || !std::isfinite(got)) return;
    int e;
    std::frexp(want, &e);
    const long double ulp = std::ldexp(1.0L, e - 24 < -149 ? -149 : e - 24);
    const double r = static_cast<double>(std::fabs(static_cast<long double>(got) - want) / ulp);
    if (r > real) real = r, at = x;
  }
  void print(const char* what) const {
    std::printf("%-36s max %lld ulp, max real error %.4f ulp at %a\n", what,
                static_cast<long long>(ulps), real, at);
  }
};

TEST(FloatMath, DISABLED_MeasureAgainstLongDouble) {
  RealError l24, s24, c24, e, l, s, c;
  for (uint32_t k = 1; k <= (1u << 24); ++k) {
    const float u1 = static_cast<float>(k) * 0x1p-24f;
    l24.add(u1, log_f32(u1), std::log(static_cast<long double>(u1)));
  }
  for (uint32_t j = 0; j < (1u << 24); ++j) {
    const float th = mul_rn(kTwoPiF, unit(j << 8));
    s24.add(th, sin_f32(th), std::sin(static_cast<long double>(th)));
    c24.add(th, cos_f32(th), std::cos(static_cast<long double>(th)));
  }
  for (uint32_t u = 0; u < 0xff800000u; u += 97) {
    const float x = from_bits(u);
    if (std::isnan(x)) continue;
    e.add(x, exp_f32(x), std::exp(static_cast<long double>(x)));
    if (u > 0 && u < 0x7f800000u) l.add(x, log_f32(x), std::log(static_cast<long double>(x)));
    if ((u & 0x7fffffffu) <= bits(200.0f)) {
      s.add(x, sin_f32(x), std::sin(static_cast<long double>(x)));
      c.add(x, cos_f32(x), std::cos(static_cast<long double>(x)));
    }
  }
  l24.print("log(k * 2^-24), k = 1..2^24");
  s24.print("sin(2pi_f * unit), all 2^24");
  c24.print("cos(2pi_f * unit), all 2^24");
  e.print("exp, every 97th float");
  l.print("log, every 97th float > 0");
  s.print("sin, every 97th float, |x| <= 200");
  c.print("cos, every 97th float, |x| <= 200");
  for (const RealError* r : {&l24, &s24, &c24, &e, &l, &s, &c}) {
    EXPECT_LE(r->ulps, kFloatMathMaxUlp);
    EXPECT_LT(r->real, 1.0);  // faithful
  }
}

// Inputs -> the exact result bits of this algorithm. Generated from the
// implementation and checked against the reference within the bound; a change
// of algorithm or constant must update the table (and the CUDA check with it).
struct KnownAnswer {
  const char* function;
  uint32_t x, result;
};
// clang-format off
constexpr KnownAnswer kKnownAnswers[] = {
#include "tests/kernels/float_math_known_answers.inc"
};
// clang-format on

float apply(const char* function, float x) {
  if (std::strcmp(function, "exp") == 0) return exp_f32(x);
  if (std::strcmp(function, "log") == 0) return log_f32(x);
  if (std::strcmp(function, "sin") == 0) return sin_f32(x);
  return cos_f32(x);
}
float reference(const char* function, float x) {
  if (std::strcmp(function, "exp") == 0) return exp_ref(x);
  if (std::strcmp(function, "log") == 0) return log_ref(x);
  if (std::strcmp(function, "sin") == 0) return sin_ref(x);
  return cos_ref(x);
}

TEST(FloatMath, KnownAnswers) {
  for (const KnownAnswer& a : kKnownAnswers) {
    const float x = from_bits(a.x);
    const float got = apply(a.function, x);
    EXPECT_EQ(bits(got), a.result) << a.function << "(" << std::hexfloat << x << ") = " << got;
    EXPECT_LE(ulp_distance(from_bits(a.result), reference(a.function, x)), kFloatMathMaxUlp)
        << a.function << "(" << std::hexfloat << x << ")";
  }
}

}  // namespace
}  // namespace obsaug
