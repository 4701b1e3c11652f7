// obsaug's own float32 exp, log, sin and cos (DESIGN.md section 3a, "Float
// math"): one algorithm for the CPU loops and the CUDA kernels, built only
// from the correctly rounded operations of kernels/float_rn.h, integer
// arithmetic and bit casts, so every backend returns the same bits.
//
// Error against the correctly rounded float32 result (the long double
// function rounded to float), in ulps of that result; kFloatMathMaxUlp below.
// Measured with (about 30 s of CPU)
//   build/tests/obsaug_float_math_tests --gtest_also_run_disabled_tests
//   --gtest_filter='*MeasureAgainstLongDouble'
// (max ulp distance; max real error, in ulps of the true value's binade):
//   log(k * 2^-24), every k = 1..2^24 (random_conv's u1):      1 ulp; 0.83
//   sin(2pi_f * unit(r)), all 2^24 angles (random_conv's th):  1 ulp; 0.78
//   cos(2pi_f * unit(r)), all 2^24 angles:                     1 ulp; 0.79
//   exp, every 97th float of the whole range (sigmoid's -acc): 1 ulp; 0.75
//   log, every 97th float > 0 (subnormals included):           1 ulp; 0.78
//   sin, cos, every 97th float with |x| <= 200:                1 ulp; 0.78
// The results are faithful (real error below 1 ulp), so the bound holds
// against any reference that is itself faithful to float32 (the suite uses
// the double functions: exhaustive over the ops' inputs above, a dense grid
// for exp, samples elsewhere).
// Domains: exp all floats (+inf for x >= 0x1.62e430p+6 = 88.7228394, where
// the true value rounds to +inf; +0 for x <= -0x1.9fe36ap+6 = -103.972084,
// where it rounds to +0; subnormal results rounded once); log all x >= 0;
// sin and cos |x| <= 200 (the reduction by pi/2 is exact for quadrants
// |n| <= 127), NaN for |x| > 200.
// Specials: exp(NaN) = NaN, exp(-inf) = +0, exp(+inf) = +inf; log(NaN) = NaN,
// log(+-0) = -inf, log(x < 0) = NaN, log(+inf) = +inf; sin/cos(NaN or +-inf)
// = NaN; sin(+-0) = +-0, log(1) = +0, exp(+-0) = 1.
//
// The known-answer table in the test pins the bits: a change of algorithm or
// constant must update it (and the CUDA side is checked against the same table).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/float_rn.h"
#include "kernels/hd.h"

namespace obsaug {

// The bound above, in ulps, for the tests (C++ and Python) to assert.
constexpr int kFloatMathMaxUlp = 1;

namespace float_math_detail {

OBSAUG_HD uint32_t bits_of(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

OBSAUG_HD float float_of(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

// The one NaN every function returns (a NaN input's payload is not kept, as
// host and device would propagate it differently).
constexpr uint32_t kNaN = 0x7fc00000u;

// ln 2 = kLn2Hi + kLn2Lo (error 5.5e-14): kLn2Hi has 15 significant bits, so
// k * kLn2Hi is exact for |k| < 512.
constexpr float kLn2Hi = 0x1.62e4p-1f;
constexpr float kLn2Lo = 0x1.7f7d1cp-20f;
constexpr float kInvLn2 = 0x1.715476p+0f;

// pi/2 = kPio2A + kPio2B + kPio2C (error 1.2e-18): A and B have at most 17
// significant bits, so n * A and n * B are exact for |n| <= 127.
constexpr float kPio2A = 0x1.921fp+0f;
constexpr float kPio2B = 0x1.6a88p-17f;
constexpr float kPio2C = 0x1.0b4612p-34f;
constexpr float kTwoOverPi = 0x1.45f306p-1f;
constexpr float kTrigMaxAbs = 200.0f;

// a + b = s + e exactly (Knuth's TwoSum; any magnitudes, no FMA needed).
struct TwoSum {
  float s, e;
};
OBSAUG_HD TwoSum two_sum(float a, float b) {
  const float s = add_rn(a, b);
  const float bb = sub_rn(s, a);
  const float e = add_rn(sub_rn(a, sub_rn(s, bb)), sub_rn(b, bb));
  return {s, e};
}

// sin(h + l) for |h| <= pi/4 + a little, |l| <= ulp(h): h + (h^3 * P(h^2) +
// l * (1 - h^2/2)), Taylor through h^11.
OBSAUG_HD float sin_kernel(float h, float l) {
  const float z = mul_rn(h, h);
  float p = -0x1.ae6456p-26f;                  // -1/11!
  p = add_rn(mul_rn(p, z), 0x1.71de3ap-19f);   // 1/9!
  p = add_rn(mul_rn(p, z), -0x1.a01a02p-13f);  // -1/7!
  p = add_rn(mul_rn(p, z), 0x1.111112p-7f);    // 1/5!
  p = add_rn(mul_rn(p, z), -0x1.555556p-3f);   // -1/3!
  const float tail = sub_rn(mul_rn(mul_rn(h, z), p), sub_rn(mul_rn(mul_rn(0.5f, z), l), l));
  return add_rn(h, tail);
}

// cos(h + l), same range: w = 1 - z/2 with its rounding error recovered
// exactly, plus z^2 * Q(z) - h * l, Taylor through h^12.
OBSAUG_HD float cos_kernel(float h, float l) {
  const float z = mul_rn(h, h);
  float q = 0x1.1eed8ep-29f;                   // 1/12!
  q = add_rn(mul_rn(q, z), -0x1.27e4fcp-22f);  // -1/10!
  q = add_rn(mul_rn(q, z), 0x1.a01a02p-16f);   // 1/8!
  q = add_rn(mul_rn(q, z), -0x1.6c16c2p-10f);  // -1/6!
  q = add_rn(mul_rn(q, z), 0x1.555556p-5f);    // 1/4!
  const float hz = mul_rn(0.5f, z);
  const float w = sub_rn(1.0f, hz);
  const float w_err = sub_rn(sub_rn(1.0f, w), hz);  // exact: 1 - hz = w + w_err
  const float tail = add_rn(w_err, sub_rn(mul_rn(mul_rn(z, z), q), mul_rn(h, l)));
  return add_rn(w, tail);
}

// x = n * pi/2 + (h + l), |h + l| <= pi/4 + a little, for |x| <= kTrigMaxAbs.
struct Reduced {
  int n;
  float h, l;
};
OBSAUG_HD Reduced reduce_pio2(float x) {
  const int n = static_cast<int>(add_rn(mul_rn(x, kTwoOverPi), x < 0.0f ? -0.5f : 0.5f));
  const float fn = static_cast<float>(n);
  const float r1 = sub_rn(x, mul_rn(fn, kPio2A));  // exact (Sterbenz; n * A exact)
  const TwoSum r2 = two_sum(r1, -mul_rn(fn, kPio2B));
  const float w = sub_rn(r2.e, mul_rn(fn, kPio2C));
  const TwoSum r = two_sum(r2.s, w);
  return {n, r.s, r.e};
}

}  // namespace float_math_detail

// Whether exp_f32(x) takes a special case (NaN, or a result that rounds to
// +0 or +inf) instead of exp_f32_main.
OBSAUG_HD bool exp_f32_is_special(float x) {
  using namespace float_math_detail;
  const uint32_t ux = bits_of(x);
  const uint32_t ax = ux & 0x7fffffffu;
  return ax > 0x7f800000u || (ux >= 0x80000000u ? ax >= 0x42cff1b5u : ax >= 0x42b17218u);
}

// e^x for x with !exp_f32_is_special(x), without branches (every scaling
// computed, one selected) so that a CPU lane loop over it vectorizes.
OBSAUG_HD float exp_f32_main(float x) {
  using namespace float_math_detail;
  // x = k ln2 + hi - lo, |hi - lo| <= ln2/2 + a little; hi exact (Sterbenz).
  const int k = static_cast<int>(add_rn(mul_rn(x, kInvLn2), x < 0.0f ? -0.5f : 0.5f));
  const float fk = static_cast<float>(k);
  const float hi = sub_rn(x, mul_rn(fk, kLn2Hi));
  const float lo = mul_rn(fk, kLn2Lo);
  const float r = sub_rn(hi, lo);
  // e^r = 1 + hi - lo + r^2 P(r), Taylor through r^8; 1 + hi split exactly.
  float p = 0x1.a01a02p-16f;                  // 1/8!
  p = add_rn(mul_rn(p, r), 0x1.a01a02p-13f);  // 1/7!
  p = add_rn(mul_rn(p, r), 0x1.6c16c2p-10f);  // 1/6!
  p = add_rn(mul_rn(p, r), 0x1.111112p-7f);   // 1/5!
  p = add_rn(mul_rn(p, r), 0x1.555556p-5f);   // 1/4!
  p = add_rn(mul_rn(p, r), 0x1.555556p-3f);   // 1/3!
  p = add_rn(mul_rn(p, r), 0.5f);
  const float c = sub_rn(mul_rn(mul_rn(r, r), p), lo);
  const float s = add_rn(1.0f, hi);
  const float s_err = sub_rn(hi, sub_rn(s, 1.0f));  // exact: |hi| < 1
  const float y = add_rn(s, add_rn(s_err, c));      // in [0.70, 1.42]
  // y * 2^k, k in [-150, 128], as (y * s1) * s2: exact, or a single rounding
  // when the result is subnormal (y * 2^(k+100) is normal and exact, then
  // times 2^-100). k = 128: s1 = 2, s2 = 2^127; k >= -126: s1 = 2^k, s2 = 1
  // (times 1 is exact); below: s1 = 2^(k+100), s2 = 2^-100. The scalings are
  // picked as integers and both products always computed: no branch.
  const uint32_t s1 =
      k > 127 ? 0x40000000u : static_cast<uint32_t>(k >= -126 ? k + 127 : k + 227) << 23;
  const uint32_t s2 = k > 127 ? 0x7f000000u : (k >= -126 ? 0x3f800000u : 0x0d800000u);
  return mul_rn(mul_rn(y, float_of(s1)), float_of(s2));
}

// e^x (see the top of the file for the error and the specials).
OBSAUG_HD float exp_f32(float x) {
  using namespace float_math_detail;
  if (exp_f32_is_special(x)) {
    if ((bits_of(x) & 0x7fffffffu) > 0x7f800000u) return float_of(kNaN);
    return x < 0.0f ? 0.0f : float_of(0x7f800000u);  // x <= -103.972084: +0; >= 88.7228394: +inf
  }
  return exp_f32_main(x);
}

// ln x (see the top of the file for the error and the specials).
OBSAUG_HD float log_f32(float x) {
  using namespace float_math_detail;
  uint32_t ux = bits_of(x);
  if ((ux & 0x7fffffffu) > 0x7f800000u) return float_of(kNaN);
  if ((ux & 0x7fffffffu) == 0u) return float_of(0xff800000u);  // +-0: -inf
  if (ux >= 0x80000000u) return float_of(kNaN);                // x < 0
  if (ux == 0x7f800000u) return x;                             // +inf
  int k = 0;
  if (ux < 0x00800000u) {  // subnormal: times 2^25, exact
    ux = bits_of(mul_rn(x, 0x1p25f));
    k = -25;
  }
  // x = 2^k m, m in [sqrt(1/2), sqrt(2)); f = m - 1 exact (Sterbenz).
  const uint32_t mant = ux & 0x007fffffu;
  k += static_cast<int>(ux >> 23) - 127;
  float m;
  if (mant > 0x3504f3u) {  // mantissa above sqrt(2): halve it
    m = float_of(mant | 0x3f000000u);
    k += 1;
  } else {
    m = float_of(mant | 0x3f800000u);
  }
  const float f = sub_rn(m, 1.0f);
  // ln(1 + f) = f - (f^2/2 - s (f^2/2 + R)), s = f / (2 + f),
  // R = 2s^2/3 + 2s^4/5 + ... + 2s^12/13 (the series of ln((1+s)/(1-s)) - 2s, over s).
  const float s = div_rn(f, add_rn(2.0f, f));
  const float z = mul_rn(s, s);
  float R = 0x1.3b13b2p-3f;                  // 2/13
  R = add_rn(mul_rn(R, z), 0x1.745d18p-3f);  // 2/11
  R = add_rn(mul_rn(R, z), 0x1.c71c72p-3f);  // 2/9
  R = add_rn(mul_rn(R, z), 0x1.24924ap-2f);  // 2/7
  R = add_rn(mul_rn(R, z), 0x1.99999ap-2f);  // 2/5
  R = add_rn(mul_rn(R, z), 0x1.555556p-1f);  // 2/3
  R = mul_rn(R, z);
  const float hfsq = mul_rn(mul_rn(0.5f, f), f);
  const float fk = static_cast<float>(k);
  // k ln2 + ln(1 + f), k * kLn2Hi exact, the small parts summed first.
  const float small = sub_rn(hfsq, add_rn(mul_rn(s, add_rn(hfsq, R)), mul_rn(fk, kLn2Lo)));
  return sub_rn(mul_rn(fk, kLn2Hi), sub_rn(small, f));
}

// sin x, for |x| <= 200 (NaN beyond; see the top of the file).
OBSAUG_HD float sin_f32(float x) {
  using namespace float_math_detail;
  if (!(x >= -kTrigMaxAbs && x <= kTrigMaxAbs)) return float_of(kNaN);  // NaN too
  if (x == 0.0f) return x;  // keeps the sign of -0, which the reduction loses
  const Reduced r = reduce_pio2(x);
  switch (r.n & 3) {
    case 0:
      return sin_kernel(r.h, r.l);
    case 1:
      return cos_kernel(r.h, r.l);
    case 2:
      return -sin_kernel(r.h, r.l);
    default:
      return -cos_kernel(r.h, r.l);
  }
}

// cos x, for |x| <= 200 (NaN beyond; see the top of the file).
OBSAUG_HD float cos_f32(float x) {
  using namespace float_math_detail;
  if (!(x >= -kTrigMaxAbs && x <= kTrigMaxAbs)) return float_of(kNaN);  // NaN too
  const Reduced r = reduce_pio2(x);
  switch (r.n & 3) {
    case 0:
      return cos_kernel(r.h, r.l);
    case 1:
      return -sin_kernel(r.h, r.l);
    case 2:
      return -cos_kernel(r.h, r.l);
    default:
      return sin_kernel(r.h, r.l);
  }
}

}  // namespace obsaug
