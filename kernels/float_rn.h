// Correctly rounded float32 arithmetic that no compiler contracts into an FMA
// or replaces with an approximation, so that the CPU and the GPU round
// identically (DESIGN.md section 3a, "Float math"). Host code is built with
// -ffp-contract=off and without fast-math; device code uses the explicitly
// rounded intrinsics, whatever --fmad or -prec-div say.
#pragma once

#include <cmath>

#include "kernels/hd.h"

namespace obsaug {

OBSAUG_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
OBSAUG_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
OBSAUG_HD float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
OBSAUG_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
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
