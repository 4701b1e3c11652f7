// CUDA backend: thin launchers over raw device pointers. Declared here so
// that the tensor-level code (compiled by the host compiler) can call into
// kernels/augment_cuda.cu without that file seeing any torch header.
#pragma once

#include <cstdint>

#include "kernels/augment_cpu.h"

typedef struct CUstream_st* cudaStream_t;

namespace obsaug {

// Dynamic shared memory one block may use without opting in: 48 KiB less
// room for the kernel's static shared memory (the draws, 8 x 60 bytes).
constexpr int64_t kCudaSharedBytes = 48 * 1024 - 1024;

// True when a plane of `in_plane_bytes` can be staged in shared memory, which
// is what makes an in-place launch safe (every input byte is read before any
// output byte of the plane is written).
bool cuda_can_stage(const PipelineDesc& p, int64_t in_plane_bytes);

// Bytes of scratch (AugmentBuffers::scratch, device memory) a launch over
// `units` stacked frames needs: the per-frame path's staged frames; 0 for the
// per-plane path.
int64_t cuda_scratch_bytes(const PipelineDesc& p, int64_t units, bool in_place,
                           int64_t element_size, int sm_count);

// Enqueues the fused pipeline on `stream`; returns cudaGetLastError() of the
// launch as an int (0 = success). No synchronisation, no allocation.
template <typename In, typename Out>
int augment_cuda(const PipelineDesc& p, const AugmentBuffers<In, Out>& buffers, cudaStream_t stream,
                 int sm_count);

}  // namespace obsaug
