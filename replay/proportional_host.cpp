// Host instantiation of the prioritized sampler: Thrust's sequential host
// system, so the prefix sums are the left-to-right sums docs/replay.md names.
#include <thrust/execution_policy.h>

#include "replay/proportional.h"
#include "replay/proportional_impl.h"

namespace obsaug {

double proportional_draw_host(const double* weights, int64_t n, double* prefix, double* targets,
                              int64_t batch, int64_t* slots) {
  return detail::proportional_draw(thrust::seq, weights, n, prefix, targets, batch, slots);
}

}  // namespace obsaug
