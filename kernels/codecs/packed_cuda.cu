// The launcher of kernels/codecs/packed_cuda_kernel.cuh (kernels/codecs/packed_cuda.h).
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/codecs/packed_cuda.h"
#include "kernels/codecs/packed_cuda_kernel.cuh"

namespace obsaug {
namespace codecs {

int launch_packed_decode(const PackedDecodeJob* jobs, int64_t count, FrameShape shape,
                         int32_t* status, int32_t* failed_tile, cudaStream_t stream) {
  if (count <= 0) return static_cast<int>(cudaSuccess);
  // Blocks stride over the frames beyond the grid's limit.
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(count, 65535));
  packed_decode_kernel<<<blocks, kPackedDecodeThreads, 0, stream>>>(jobs, count, shape, status,
                                                                    failed_tile);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace codecs
}  // namespace obsaug
