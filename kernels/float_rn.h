// Correctly rounded float32 (and double) arithmetic that no compiler contracts into an FMA
// or replaces with an approximation, so that the CPU and the GPU round
// identically (DESIGN.md section 3a, "Float math"). Host code is built with
// -ffp-contract=off and without fast-math; device code uses the explicitly
// rounded intrinsics, whatever --fmad or -prec-div say.
#pragma once

#include <cmath>

#include "kernels/hd.h"

namespace obsaug {

// a * b, a + b, a - b, a / b for T = float or double.
template <typename T>
OBSAUG_HD T mul_rn(T a, T b) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == 8)
    return __dmul_rn(a, b);
  else
    return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
template <typename T>
OBSAUG_HD T add_rn(T a, T b) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == 8)
    return __dadd_rn(a, b);
  else
    return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
template <typename T>
OBSAUG_HD T sub_rn(T a, T b) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == 8)
    return __dsub_rn(a, b);
  else
    return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
template <typename T>
OBSAUG_HD T div_rn(T a, T b) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == 8)
    return __ddiv_rn(a, b);
  else
    return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
OBSAUG_HD float sqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

}  // namespace obsaug
