// CUDA instantiation of the prioritized sampler: the same Thrust code on the
// caller's stream (device pointers).
#include <thrust/execution_policy.h>
#include <thrust/system/cuda/execution_policy.h>
#include <thrust/system_error.h>

#include <stdexcept>
#include <string>

#include "replay/proportional.h"
#include "replay/proportional_impl.h"

namespace obsaug {

double proportional_draw_cuda(const double* weights, int64_t n, double* prefix, double* targets,
                              int64_t batch, int64_t* slots, cudaStream_t stream) {
  try {
    return detail::proportional_draw(thrust::cuda::par.on(stream), weights, n, prefix, targets,
                                     batch, slots);
  } catch (const thrust::system_error& e) {
    throw std::runtime_error(std::string("obsaug replay: prioritized sampling on CUDA failed: ") +
                             e.what());
  }
}

}  // namespace obsaug
