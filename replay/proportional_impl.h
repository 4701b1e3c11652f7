// The Thrust code behind replay/proportional.h, shared by the host and CUDA
// instantiations. Included by exactly those two translation units.
#pragma once

#include <thrust/binary_search.h>
#include <thrust/functional.h>
#include <thrust/scan.h>
#include <thrust/transform.h>
#include <thrust/transform_reduce.h>

#include <cstdint>
#include <limits>

#include "kernels/hd.h"

namespace obsaug::detail {

struct ScaleByTotal {
  const double* total;  // the last prefix sum, in the policy's memory
  OBSAUG_HD double operator()(double u) const { return u * *total; }
};

struct PositiveOrInfinity {
  OBSAUG_HD double operator()(double w) const {
    return w > 0.0 ? w : std::numeric_limits<double>::infinity();
  }
};

template <class Policy>
double proportional_draw(const Policy& policy, const double* weights, int64_t n, double* prefix,
                         double* targets, int64_t batch, int64_t* slots) {
  thrust::inclusive_scan(policy, weights, weights + n, prefix);
  thrust::transform(policy, targets, targets + batch, targets, ScaleByTotal{prefix + n - 1});
  thrust::upper_bound(policy, prefix, prefix + n, targets, targets + batch, slots);
  return thrust::transform_reduce(policy, weights, weights + n, PositiveOrInfinity{},
                                  std::numeric_limits<double>::infinity(),
                                  thrust::minimum<double>());
}

}  // namespace obsaug::detail
