// CUDA backend of the fused pipeline: the launches of the kernel in
// kernels/augment_cuda_kernel.cuh (which the CPU emulation in
// tests/cuda_emulation/ also runs).
#include <cuda_runtime.h>

#include "kernels/augment_cuda.h"
#include "kernels/augment_cuda_kernel.cuh"

namespace obsaug {

bool cuda_can_stage(const PipelineDesc& p, int64_t in_plane_bytes) {
  if (p.n_segments > 0) return true;  // the per-frame path stages in its scratch
  // In place the plane is staged first, whatever the output tiles take after it.
  return shared_layout(p, in_plane_bytes, /*out_element_bytes=*/1, /*in_place=*/true).stage_bytes >
         0;
}

int64_t cuda_scratch_bytes(const PipelineDesc& p, int64_t units, bool in_place,
                           int64_t element_size, int sm_count) {
  if (p.n_segments == 0) return 0;
  return frame_launch(p, units, in_place, sm_count, element_size).scratch_elems() * element_size;
}

template <typename In, typename Out>
int augment_cuda(const PipelineDesc& p, const AugmentBuffers<In, Out>& buf, cudaStream_t stream,
                 int sm_count) {
  if (p.n_segments > 0) {
    const int64_t units = buf.batch * (buf.channels / p.frame_channels);
    const bool in_place = static_cast<const void*>(buf.in) == static_cast<const void*>(buf.out);
    const FrameLaunch launch = frame_launch(p, units, in_place, sm_count, sizeof(In));
    if (launch.blocks == 0) return 0;
    augment_frames_kernel<In, Out>
        <<<launch.blocks, kThreads, 0, stream>>>(p, buf, static_cast<In*>(buf.scratch), launch);
    return static_cast<int>(cudaGetLastError());
  }
  const AugmentLaunch launch = augment_launch(p, buf, sm_count);
  if (launch.blocks == 0) return 0;
  augment_kernel<In, Out>
      <<<launch.blocks, kThreads, static_cast<size_t>(launch.layout.total()), stream>>>(
          p, buf, launch.layout);
  return static_cast<int>(cudaGetLastError());
}

template int augment_cuda<uint8_t, uint8_t>(const PipelineDesc&,
                                            const AugmentBuffers<uint8_t, uint8_t>&, cudaStream_t,
                                            int);
template int augment_cuda<uint8_t, float>(const PipelineDesc&,
                                          const AugmentBuffers<uint8_t, float>&, cudaStream_t, int);
template int augment_cuda<float, float>(const PipelineDesc&, const AugmentBuffers<float, float>&,
                                        cudaStream_t, int);

}  // namespace obsaug
