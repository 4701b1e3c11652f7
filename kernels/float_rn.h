// Correctly rounded float32 (and double) arithmetic that no compiler contracts into an FMA
// or replaces with an approximation, so that the CPU and the GPU round
// identically (DESIGN.md section 3a, "Float math"). Host code is built with
// -ffp-contract=off and without fast-math; device code uses the explicitly
// rounded intrinsics, whatever --fmad or -prec-div say.
#pragma once

#include <cmath>

#include "kernels/hd.h"

namespace obsaug {

enum class RoundedOp { kMul, kAdd, kSub, kDiv };

// a op b for T = float or double, correctly rounded.
template <RoundedOp kOp, typename T>
OBSAUG_HD T rounded(T a, T b) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == 8) {
    if constexpr (kOp == RoundedOp::kMul) return __dmul_rn(a, b);
    if constexpr (kOp == RoundedOp::kAdd) return __dadd_rn(a, b);
    if constexpr (kOp == RoundedOp::kSub) return __dsub_rn(a, b);
    if constexpr (kOp == RoundedOp::kDiv) return __ddiv_rn(a, b);
  } else {
    if constexpr (kOp == RoundedOp::kMul) return __fmul_rn(a, b);
    if constexpr (kOp == RoundedOp::kAdd) return __fadd_rn(a, b);
    if constexpr (kOp == RoundedOp::kSub) return __fsub_rn(a, b);
    if constexpr (kOp == RoundedOp::kDiv) return __fdiv_rn(a, b);
  }
#else
  if constexpr (kOp == RoundedOp::kMul) return a * b;
  if constexpr (kOp == RoundedOp::kAdd) return a + b;
  if constexpr (kOp == RoundedOp::kSub) return a - b;
  if constexpr (kOp == RoundedOp::kDiv) return a / b;
#endif
}

// clang-format off
template <typename T> OBSAUG_HD T mul_rn(T a, T b) { return rounded<RoundedOp::kMul>(a, b); }
template <typename T> OBSAUG_HD T add_rn(T a, T b) { return rounded<RoundedOp::kAdd>(a, b); }
template <typename T> OBSAUG_HD T sub_rn(T a, T b) { return rounded<RoundedOp::kSub>(a, b); }
template <typename T> OBSAUG_HD T div_rn(T a, T b) { return rounded<RoundedOp::kDiv>(a, b); }
// clang-format on

OBSAUG_HD float sqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

}  // namespace obsaug
