// The CUDA kernel of the fused pipeline and its launch shape, in a header that
// both nvcc (kernels/augment_cuda.cu, the real launch) and the host compiler
// (the CPU emulation of the CUDA execution model in tests/cuda_emulation/,
// DESIGN.md section 8) compile. Everything here has internal linkage, so each
// includer gets its own copy. The host compiler needs the CUDA built-ins
// (threadIdx, __syncthreads, __shared__, uint4, ...) before this header:
// include tests/cuda_emulation/cuda_emulation.h first.
//
// Pipelines of shift, crop and overlay (augment_kernel):
// one block per channel plane (grid-stride over planes). Per plane, the block
// draws the parameters, traces the output rows and columns into shared
// memory, stages the input plane in shared memory when it fits (required for
// in place), then each thread evaluates 16 bytes of output with eval_pixel
// from kernels/pipeline.h and writes them with one 16-byte store when aligned.
//
// Pipelines with an op of the second family (augment_frames_kernel): one
// block per stacked frame (grid-stride), each thread evaluating pixels with
// eval_frame_pixel from kernels/frame_eval.h; the frames a barrier needs are
// staged in the block's slots of a scratch buffer in global memory (L2-sized
// per block), allocated by the caller through PyTorch's allocator.
#pragma once

#if !defined(__CUDACC__) && !defined(CUDA_EMULATION)
#error "augment_cuda_kernel.cuh needs nvcc or tests/cuda_emulation/cuda_emulation.h"
#endif

#include <cstdint>
#include <type_traits>

#include "kernels/augment_cpu.h"
#include "kernels/augment_cuda.h"
#include "kernels/frame_eval.h"
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
      draw_pipeline(p, counter_sample(buf, sample),
                    static_cast<uint32_t>(channel / p.frame_channels), draws);
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

// Scratch of the per-frame kernel: `slots` staged frames per block, each
// C planes of the largest stage (kernels/augment_cpu.h largest_stage_plane).
struct FrameLaunch {
  unsigned blocks;
  int slots;           // segment i's output is slot i % 2; in place with one segment, slot 0
  int64_t slot_elems;  // elements of one slot
  int64_t scratch_elems() const { return static_cast<int64_t>(blocks) * slots * slot_elems; }
};

inline FrameLaunch frame_launch(const PipelineDesc& p, int64_t units, bool in_place, int sm_count) {
  const int between = p.n_segments - 1 < 2 ? p.n_segments - 1 : 2;
  const int slots = between > 0 ? between : (in_place ? 1 : 0);
  // A few blocks per SM keep every SM busy; more would only grow the scratch.
  const int64_t max_blocks = static_cast<int64_t>(sm_count > 0 ? sm_count : 1) * 8;
  return {static_cast<unsigned>(units < max_blocks ? units : max_blocks), slots,
          static_cast<int64_t>(p.frame_channels) * largest_stage_plane(p)};
}

template <typename In, typename Out>
__global__ void __launch_bounds__(kThreads)
    augment_frames_kernel(PipelineDesc p, AugmentBuffers<In, Out> buf, In* scratch,
                          FrameLaunch launch) {
  __shared__ OpDraw draws[kMaxOps];
  __shared__ float conv_weights[kMaxOps * kConvWeights];
  __shared__ long long partial_sums[kThreads];
  __shared__ float frame_mean;

  const FrameBatch work = frame_batch(p, buf);
  In* slots = scratch + static_cast<int64_t>(blockIdx.x) * launch.slots * launch.slot_elems;

  for (int64_t unit = blockIdx.x; unit < work.units; unit += gridDim.x) {
    const uint32_t sample = static_cast<uint32_t>(unit / work.stack);
    const uint32_t frame = static_cast<uint32_t>(unit % work.stack);
    const int64_t first_plane = static_cast<int64_t>(sample) * buf.channels +
                                static_cast<int64_t>(frame) * work.frame_channels;
    if (threadIdx.x == 0) {
      draw_pipeline(p, counter_sample(buf, sample), frame, draws);
      for (int k = 0; k < p.n_ops; ++k)
        if (p.ops[k].kind == OpKind::kRandomConv)
          draw_conv_weights(p, p.ops[k], counter_sample(buf, sample),
                            conv_weights + k * kConvWeights);
    }
    FrameView<In> src{input_plane(p, buf, first_plane), work.in_plane, p.in_h, p.in_w};
    if (work.in_place && p.n_segments == 1) {  // the only segment writes what it reads
      stage_plane(src.base, slots, work.frame_channels * work.in_plane);
      src.base = slots;
    }
    __syncthreads();
    for (int i = 0; i < p.n_segments; ++i) {
      const Segment s = segment_of(p, i);
      const OpDesc& first = p.ops[s.first];
      float mean0 = 0.0f;
      if (first.kind == OpKind::kColorJitter && first.jitter_on[kContrast] && draws[s.first].gate) {
        long long sum = 0;  // an integer sum: any order gives the same mean
        for (int64_t j = threadIdx.x; j < static_cast<int64_t>(src.h) * src.w; j += blockDim.x)
          sum += gray_fixed_at(src, j);
        partial_sums[threadIdx.x] = sum;
        __syncthreads();
        if (threadIdx.x == 0) {
          long long total = 0;
          for (unsigned t = 0; t < blockDim.x; ++t) total += partial_sums[t];
          frame_mean = mean_of_sum(total, src.h, src.w);
        }
        __syncthreads();
        mean0 = frame_mean;
      }
      const bool last = i + 1 == p.n_segments;
      In* stage = slots + (i % 2) * launch.slot_elems;
      const int64_t plane = static_cast<int64_t>(s.out_h) * s.out_w;
      const int32_t group = s.mixes ? kMaxMixedChannels : 1;
      const int64_t items = plane * (work.frame_channels / group);
      for (int64_t j = threadIdx.x; j < items; j += blockDim.x) {
        const int32_t c0 = static_cast<int32_t>(j / plane) * group;
        const int64_t at = j % plane;
        const int32_t y = static_cast<int32_t>(at / s.out_w);
        const int32_t x = static_cast<int32_t>(at % s.out_w);
        const AxisTrace row = trace_range(p, draws, 0, y, s.first, s.end);
        const AxisTrace col = trace_range(p, draws, 1, x, s.first, s.end);
        In v[kMaxMixedChannels];
        eval_frame_pixel(p, draws, s, row, col, src, conv_weights + s.first * kConvWeights, mean0,
                         buf.pool, c0, group, v);
        for (int c = 0; c < group; ++c) {
          if (!last) {
            stage[(c0 + c) * plane + at] = v[c];
          } else {
            buf.out[(first_plane + c0 + c) * work.out_plane + at] =
                work.direct ? static_cast<Out>(v[c])
                            : to_output(v[c], buf.scale, buf.bias, static_cast<Out*>(nullptr));
          }
        }
      }
      __syncthreads();  // the next segment reads the staged frame; the next unit reuses draws
      src = FrameView<In>{stage, plane, s.out_h, s.out_w};
    }
  }
}

}  // namespace
}  // namespace obsaug
