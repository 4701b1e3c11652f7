// The CUDA kernel of the fused pipeline and its launch shape, in a header that
// both nvcc (kernels/augment_cuda.cu, the real launch) and the host compiler
// (the CPU emulation of the CUDA execution model in tests/cuda_emulation/,
// DESIGN.md section 8) compile. Everything here has internal linkage, so each
// includer gets its own copy. The host compiler needs the CUDA built-ins
// (threadIdx, __syncthreads, __shared__, uint4, ...) before this header:
// include tests/cuda_emulation/cuda_emulation.h first.
//
// One block per channel plane (grid-stride over planes). Per plane, the block
// draws the parameters, traces the output rows and columns into shared
// memory, stages the input plane in shared memory when it fits (required for
// in place), then each thread evaluates 16 bytes of output with eval_pixel
// from kernels/pipeline.h and writes them with one 16-byte store when aligned.
#pragma once

#if !defined(__CUDACC__) && !defined(CUDA_EMULATION)
#error "augment_cuda_kernel.cuh needs nvcc or tests/cuda_emulation/cuda_emulation.h"
#endif

#include <cstdint>
#include <type_traits>

#include "kernels/augment_cpu.h"
#include "kernels/augment_cuda.h"
#include "kernels/pipeline.h"

namespace obsaug {
namespace {

constexpr int kThreads = 256;

struct SharedLayout {
  int64_t traces_bytes;  // (out_h + out_w) AxisTraces, or 0 when traced per pixel
  int64_t stage_bytes;   // input plane, or 0 when read from global memory
  int64_t total() const { return traces_bytes + stage_bytes; }
};

inline int64_t align16(int64_t bytes) { return (bytes + 15) / 16 * 16; }

// In place, the input plane must be staged (every input byte of a plane is
// read before any output byte is written); the traces come second. Out of
// place, the traces come first and the plane is staged only beside them.
inline SharedLayout shared_layout(const PipelineDesc& p, int64_t in_plane_bytes, bool in_place) {
  const int64_t traces =
      align16((static_cast<int64_t>(p.out_h) + p.out_w) * static_cast<int64_t>(sizeof(AxisTrace)));
  const int64_t stage = align16(in_plane_bytes);
  if (traces + stage <= kCudaSharedBytes) return {traces, stage};
  if (in_place) return {0, stage <= kCudaSharedBytes ? stage : 0};
  return {traces <= kCudaSharedBytes ? traces : 0, 0};
}

// Grid size and shared memory of one launch over `buf` (blocks == 0: nothing to do).
struct AugmentLaunch {
  unsigned blocks;
  SharedLayout layout;
};

template <typename In, typename Out>
AugmentLaunch augment_launch(const PipelineDesc& p, const AugmentBuffers<In, Out>& buf,
                             int sm_count) {
  const int64_t planes = buf.batch * buf.channels;
  const bool in_place = static_cast<const void*>(buf.in) == static_cast<const void*>(buf.out);
  const SharedLayout layout =
      shared_layout(p, static_cast<int64_t>(p.in_h) * p.in_w * sizeof(In), in_place);
  const int64_t max_blocks = static_cast<int64_t>(sm_count > 0 ? sm_count : 1) * 64;
  return {static_cast<unsigned>(planes < max_blocks ? planes : max_blocks), layout};
}

template <typename T>
__device__ void stage_plane(const T* __restrict__ src, T* __restrict__ dst, int64_t count) {
  const int64_t bytes = count * static_cast<int64_t>(sizeof(T));
  const bool aligned = (reinterpret_cast<uintptr_t>(src) % 16) == 0;
  if (aligned) {
    const int64_t vectors = bytes / 16;
    const uint4* s = reinterpret_cast<const uint4*>(src);
    uint4* d = reinterpret_cast<uint4*>(dst);
    // Plain loads, not __ldg: in place, this memory is written later in the launch.
    for (int64_t i = threadIdx.x; i < vectors; i += blockDim.x) d[i] = s[i];
    const unsigned char* s_bytes = reinterpret_cast<const unsigned char*>(src);
    unsigned char* d_bytes = reinterpret_cast<unsigned char*>(dst);
    for (int64_t i = vectors * 16 + threadIdx.x; i < bytes; i += blockDim.x)
      d_bytes[i] = s_bytes[i];
  } else {
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) dst[i] = src[i];
  }
}

template <typename In, typename Out>
__global__ void __launch_bounds__(kThreads)
    augment_kernel(PipelineDesc p, AugmentBuffers<In, Out> buf, SharedLayout layout) {
  extern __shared__ __align__(16) unsigned char dynamic_shared[];
  __shared__ OpDraw draws[kMaxOps];
  AxisTrace* rows = reinterpret_cast<AxisTrace*>(dynamic_shared);
  AxisTrace* cols = rows + p.out_h;
  In* staged = reinterpret_cast<In*>(dynamic_shared + layout.traces_bytes);

  constexpr int kPerThread = 16 / sizeof(Out);
  const bool direct = std::is_same<In, Out>::value && buf.scale == 1.0f && buf.bias == 0.0f;
  const int64_t planes = buf.batch * buf.channels;
  const int64_t in_plane = static_cast<int64_t>(p.in_h) * p.in_w;
  const int64_t out_plane = static_cast<int64_t>(p.out_h) * p.out_w;

  for (int64_t plane = blockIdx.x; plane < planes; plane += gridDim.x) {
    const uint32_t sample = static_cast<uint32_t>(plane / buf.channels);
    const int64_t channel = plane % buf.channels;
    const int32_t channel_in_frame = static_cast<int32_t>(channel % p.frame_channels);
    if (threadIdx.x == 0) {
      draw_pipeline(p, sample, static_cast<uint32_t>(channel / p.frame_channels), draws);
    }
    __syncthreads();
    if (layout.traces_bytes > 0) {
      for (int i = threadIdx.x; i < p.out_h + p.out_w; i += blockDim.x) {
        rows[i] = i < p.out_h ? trace_axis(p, draws, 0, i) : trace_axis(p, draws, 1, i - p.out_h);
      }
    }
    const In* in = input_plane(p, buf, plane);
    if (layout.stage_bytes > 0) {
      stage_plane(in, staged, in_plane);
      in = staged;
    }
    __syncthreads();

    Out* out = buf.out + plane * out_plane;
    const bool aligned = (reinterpret_cast<uintptr_t>(out) % 16) == 0;
    for (int64_t first = static_cast<int64_t>(threadIdx.x) * kPerThread; first < out_plane;
         first += static_cast<int64_t>(blockDim.x) * kPerThread) {
      union {
        uint4 vector;
        Out scalars[kPerThread];
      } values;
      const int count =
          out_plane - first < kPerThread ? static_cast<int>(out_plane - first) : kPerThread;
      int32_t y = static_cast<int32_t>(first / p.out_w);
      int32_t x = static_cast<int32_t>(first % p.out_w);
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) {
        if (j >= count) break;
        In v;
        if (layout.traces_bytes > 0) {
          v = eval_pixel(p, draws, rows[y], cols[x], in, buf.pool, channel_in_frame);
        } else {
          const AxisTrace row = trace_axis(p, draws, 0, y);
          const AxisTrace col = trace_axis(p, draws, 1, x);
          v = eval_pixel(p, draws, row, col, in, buf.pool, channel_in_frame);
        }
        // Same dtype without an affine: the value itself, as the CPU stores it
        // (v * 1 + 0 would turn -0.0 into +0.0).
        values.scalars[j] = direct ? static_cast<Out>(v)
                                   : to_output(v, buf.scale, buf.bias, static_cast<Out*>(nullptr));
        if (++x == p.out_w) {
          x = 0;
          ++y;
        }
      }
      if (aligned && count == kPerThread) {
        *reinterpret_cast<uint4*>(out + first) = values.vector;
      } else {
#pragma unroll
        for (int j = 0; j < kPerThread; ++j) {
          if (j < count) out[first + j] = values.scalars[j];
        }
      }
    }
    __syncthreads();  // the next plane reuses draws, traces and the staged plane
  }
}

}  // namespace
}  // namespace obsaug
