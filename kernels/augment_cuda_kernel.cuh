// The CUDA kernel of the fused pipeline and its launch shape, in a header that
// both nvcc (kernels/augment_cuda.cu, the real launch) and the host compiler
// (the CPU emulation of the CUDA execution model in tests/cuda_emulation/,
// DESIGN.md section 8) compile. Everything here has internal linkage, so each
// includer gets its own copy. The host compiler needs the CUDA built-ins
// (threadIdx, __syncthreads, __shared__, uint4, ...) before this header:
// include tests/cuda_emulation/cuda_emulation.h first.
//
// Pipelines of shift, crop and overlay (augment_kernel):
// one block per channel plane (grid-stride over planes). Per plane, thread k
// draws op k while the block stages the input plane in shared memory when it
// fits (required for in place); the block traces the output rows and columns
// into a table in shared memory, evaluates the plane with eval_pixel from
// kernels/pipeline.h (a warp's lanes on consecutive elements) into an output
// tile, and writes the tile out in 16-byte stores (augment_kernel below).
//
// Pipelines with an op of the second family (augment_frames_kernel): one
// block per stacked frame (grid-stride), each thread evaluating pixels with
// eval_frame_pixel from kernels/frame_eval.h; the frames a barrier needs are
// staged in the block's slots of a scratch buffer in global memory (a frame
// per slot, kFrameScratchBudget in all or one block: see frame_launch),
// allocated by the caller through PyTorch's allocator.
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
constexpr int kWarp = 32;             // threads of a warp, and banks of shared memory
constexpr int64_t kVectorBytes = 16;  // one uint4: the widest load and store of a thread
static_assert(kThreads % kWarp == 0 && kThreads >= kMaxOps, "op k is drawn by thread k");

inline int64_t align16(int64_t bytes) { return (bytes + 15) / 16 * 16; }

// The traces of one plane in shared memory, as a structure of arrays of 32-bit
// words: `count` = out_h + out_w + kWarp traces, row y at i = y, column slot
// xe (0 <= xe < out_w + kWarp) at i = out_h + xe holding column xe % out_w.
// Field f of trace i is words[f * count + i]: f = 0 source, 1 zero_op,
// 2 + k at_op[k] (k < n_ops). AxisTrace::swapped is not kept (the per-plane
// path has no quarter turns).
// Access pattern, free of bank conflicts: augment_kernel gives the lanes of a
// warp 32 consecutive output elements of a plane, and every lane reads the
// same field. Their rows are one row or consecutive rows (the same word, a
// broadcast, or consecutive words). Their columns are read at slot
// xe = e - y_first * out_w (column_slot), with y_first the row of the warp's
// first element: 32 consecutive slots, one word in each bank, also where the
// elements wrap to the next row (slot out_w + x repeats column x). (An array
// of 40-byte AxisTraces read by lanes 16 elements apart put every lane in the
// same bank: 16 * 40 bytes is a multiple of the 128 bytes of a bank row.)
struct TraceTable {
  int32_t* words;
  int32_t count;

  __device__ void store(int32_t i, const AxisTrace& t, int32_t n_ops) const {
    words[i] = t.source;
    words[count + i] = t.zero_op;
    for (int k = 0; k < n_ops; ++k) words[(2 + k) * count + i] = t.at_op[k];
  }
  // What eval_pixel reads: source, zero_op, and at_op of the overlays.
  __device__ AxisTrace load(int32_t i, const PipelineDesc& p) const {
    AxisTrace t{};
    t.source = words[i];
    t.zero_op = static_cast<int16_t>(words[count + i]);
    for (int k = 0; k < p.n_ops; ++k)
      if (p.ops[k].kind == OpKind::kOverlay) t.at_op[k] = words[(2 + k) * count + i];
    return t;
  }
};

OBSAUG_HD int64_t trace_count(const PipelineDesc& p) {
  return static_cast<int64_t>(p.out_h) + p.out_w + kWarp;
}
inline int64_t trace_table_bytes(const PipelineDesc& p) {
  return align16(static_cast<int64_t>(sizeof(int32_t)) * (2 + p.n_ops) * trace_count(p));
}

// Dynamic shared memory of one augment_kernel block, in this order (each part
// a multiple of 16 bytes): the trace table, the staged input plane, the
// output tiles, the staged pool plane.
struct SharedLayout {
  int64_t traces_bytes;  // TraceTable, or 0 when each thread traces its own pixels
  int64_t stage_bytes;   // input plane, or 0 when read from global memory
  int64_t tile_bytes;    // tiles * tile_elems output elements, or 0: stored one by one
  int64_t tile_elems;    // elements of one tile
  int tiles;  // 1: one tile holds the plane and its alignment phase; 2: chunks of kThreads * 16
              // bytes
  int64_t pool_bytes;  // the pool plane overlay pool_op reads, or 0: read from global memory
  int pool_op;         // the pipeline's only overlay, when pool_bytes > 0
  int64_t total() const { return traces_bytes + stage_bytes + tile_bytes + pool_bytes; }
};

// The pipeline's overlay when it has exactly one, else -1.
OBSAUG_HD int only_overlay(const PipelineDesc& p) {
  int found = -1;
  for (int k = 0; k < p.n_ops; ++k) {
    if (p.ops[k].kind != OpKind::kOverlay) continue;
    if (found >= 0) return -1;
    found = k;
  }
  return found;
}

// In place, the input plane must be staged (every input byte of a plane is
// read before any output byte is written), or nothing is launched in place
// (cuda_can_stage). Then, while they fit in kCudaSharedBytes: the traces, the
// staged plane (out of place), and an output tile of the whole plane, else
// two tiles of kThreads * 16 bytes.
inline SharedLayout shared_layout(const PipelineDesc& p, int64_t in_plane_bytes,
                                  int64_t out_element_bytes, bool in_place) {
  SharedLayout l{};
  const int64_t stage = align16(in_plane_bytes);
  if (in_place) {
    if (stage > kCudaSharedBytes) return l;
    l.stage_bytes = stage;
  }
  const int64_t traces = trace_table_bytes(p);
  if (l.total() + traces <= kCudaSharedBytes) l.traces_bytes = traces;
  if (!in_place && l.total() + stage <= kCudaSharedBytes) l.stage_bytes = stage;
  // The plane's first element lies up to 15 bytes past a 16-byte boundary.
  const int64_t whole =
      align16(static_cast<int64_t>(p.out_h) * p.out_w * out_element_bytes + kVectorBytes - 1);
  const int64_t chunk = kThreads * kVectorBytes;
  if (l.total() + whole <= kCudaSharedBytes) {
    l.tiles = 1;
    l.tile_bytes = whole;
  } else if (l.total() + 2 * chunk <= kCudaSharedBytes) {
    l.tiles = 2;
    l.tile_bytes = 2 * chunk;
  }
  if (l.tiles > 0) l.tile_elems = l.tile_bytes / l.tiles / out_element_bytes;
  // Last, with the trace table (the trace phase's barrier ends its staging):
  // the one overlay's pool plane, read with 16-byte loads instead of a byte
  // per pixel.
  const int overlay = only_overlay(p);
  if (l.traces_bytes > 0 && overlay >= 0) {
    const int64_t pool = align16(static_cast<int64_t>(p.ops[overlay].out_h) * p.ops[overlay].out_w);
    if (l.total() + pool <= kCudaSharedBytes) {
      l.pool_bytes = pool;
      l.pool_op = overlay;
    }
  }
  return l;
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
      shared_layout(p, static_cast<int64_t>(p.in_h) * p.in_w * sizeof(In), sizeof(Out), in_place);
  const int64_t max_blocks = static_cast<int64_t>(sm_count > 0 ? sm_count : 1) * 64;
  return {static_cast<unsigned>(planes < max_blocks ? planes : max_blocks), layout};
}

// Elements of a 16-byte vector, and the elements `at` lies past a 16-byte
// boundary (its alignment phase; element pointers are aligned to their size).
template <typename T>
constexpr int kPerVector = static_cast<int>(kVectorBytes / sizeof(T));
template <typename T>
__device__ int32_t vector_phase(const T* at) {
  return static_cast<int32_t>(reinterpret_cast<uintptr_t>(at) % kVectorBytes / sizeof(T));
}

// Copies count elements from global memory at src (any alignment) to shared
// memory at dst (16-byte aligned), by all threads of the block. Global reads
// are 16-byte vectors over the aligned interior of [src, src + count):
// vector i covers elements i * V - phase .. + V - 1 (V = kPerVector<T>,
// phase = vector_phase(src)), read whole when all of them lie in the range,
// element by element at the two ends (no byte outside the range is read).
// With phase 0 the shared stores are vectors too, else element by element.
// Plain loads, not __ldg: in place, this memory is written later in the launch.
template <typename T>
__device__ void stage_plane(const T* src, T* __restrict__ dst, int64_t count) {
  constexpr int V = kPerVector<T>;
  const int32_t phase = vector_phase(src);
  const int64_t vectors = (phase + count + V - 1) / V;
  for (int64_t i = threadIdx.x; i < vectors; i += blockDim.x) {
    const int64_t first = i * V - phase;
    if (first >= 0 && first + V <= count) {
      union {
        uint4 vector;
        T elements[V];
      } values;
      values.vector = *reinterpret_cast<const uint4*>(src + first);
      if (phase == 0) {
        *reinterpret_cast<uint4*>(dst + first) = values.vector;
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j) dst[first + j] = values.elements[j];
      }
    } else {
      for (int j = 0; j < V; ++j)
        if (first + j >= 0 && first + j < count) dst[first + j] = src[first + j];
    }
  }
}

// Writes tile elements 0 .. end - first - 1, the plane's elements
// first - phase .. end - 1 - phase, to `out` (the plane, count elements):
// 16-byte vectors where a whole vector lies in the plane, element by element
// at its two ends. Aligned: `first` is a multiple of the vector, the tile is
// 16-byte aligned and out - phase lies on a 16-byte boundary.
template <typename Out>
__device__ void store_tile(const Out* tile, Out* out, int32_t phase, int64_t first, int64_t end,
                           int64_t count) {
  constexpr int V = kPerVector<Out>;
  for (int64_t i = threadIdx.x; i * V < end - first; i += blockDim.x) {
    const int64_t e = first + i * V - phase;
    if (e >= 0 && e + V <= count) {
      *reinterpret_cast<uint4*>(out + e) = *reinterpret_cast<const uint4*>(tile + i * V);
    } else {
      for (int j = 0; j < V; ++j)
        if (e + j >= 0 && e + j < count) out[e + j] = tile[i * V + j];
    }
  }
}

// Row and column of element n of a plane w wide (n may be negative: the row is
// the floor), and a step of it by a fixed number of elements.
struct PlanePos {
  int32_t y, x;
};
__device__ PlanePos plane_pos(int64_t n, int32_t w) {
  int64_t y = n / w;
  int64_t x = n % w;
  if (x < 0) {
    x += w;
    --y;
  }
  return {static_cast<int32_t>(y), static_cast<int32_t>(x)};
}
__device__ void advance(PlanePos* at, PlanePos by, int32_t w) {
  at->y += by.y;
  at->x += by.x;
  if (at->x >= w) {
    at->x -= w;
    ++at->y;
  }
}

// The TraceTable slot of column at.x for an element of a warp whose first
// element is at warp_first: the element's distance from it, plus that
// element's column. The first element may lie before the plane (row -1, the
// floor): the slots stay in 0 .. out_w + kWarp - 1, since the distance is
// below kWarp and the column below out_w.
__device__ int32_t column_slot(PlanePos at, PlanePos warp_first, int32_t w) {
  return at.x + (at.y - warp_first.y) * w;
}

// One block per channel plane (grid-stride over planes). Per plane:
//  1. thread k < n_ops draws op k (draw_op: a pure function of the seed, the
//     step, the sample's counter word, the op and the frame, so the order of
//     the draws is free) while every thread stages the input plane
//     (stage_plane); barrier;
//  2. the block traces out_h + out_w + kWarp rows and columns into the
//     TraceTable and, when the layout has room (pool_bytes), stages the pool
//     plane of the pipeline's only overlay in 16-byte loads; barrier (skipped
//     when each thread traces its own pixels);
//  3. the block evaluates the plane with eval_pixel from kernels/pipeline.h,
//     element v + threadIdx.x for v = 0, blockDim.x, ... of the virtual range
//     that starts at the 16-byte boundary at or before the output plane (the
//     plane's element e is v - phase), so a warp's lanes take consecutive
//     elements; the values go to a tile in shared memory; barrier; the block
//     writes the tile out in 16-byte vectors (store_tile). With two tiles,
//     chunk c fills tile c % 2: one barrier per chunk, no barrier between a
//     chunk's stores and the next chunk's evaluation. Without a tile, each
//     value is stored where it is computed and a barrier ends the plane.
// The last barrier of a plane follows its last read of the draws, the traces
// and the staged plane, so the next plane may overwrite them.
template <typename In, typename Out>
__global__ void __launch_bounds__(kThreads)
    augment_kernel(PipelineDesc p, AugmentBuffers<In, Out> buf, SharedLayout layout) {
  extern __shared__ __align__(16) unsigned char dynamic_shared[];
  __shared__ OpDraw draws[kMaxOps];
  // Used only when it fits in shared memory, so its count fits int32.
  const TraceTable traces{reinterpret_cast<int32_t*>(dynamic_shared),
                          static_cast<int32_t>(trace_count(p))};
  In* staged = reinterpret_cast<In*>(dynamic_shared + layout.traces_bytes);
  Out* tiles = reinterpret_cast<Out*>(dynamic_shared + layout.traces_bytes + layout.stage_bytes);
  uint8_t* staged_pool = layout.pool_bytes > 0 ? dynamic_shared + layout.traces_bytes +
                                                     layout.stage_bytes + layout.tile_bytes
                                               : nullptr;
  const int staged_op = layout.pool_bytes > 0 ? layout.pool_op : -1;

  const bool direct = std::is_same<In, Out>::value && buf.scale == 1.0f && buf.bias == 0.0f;
  const int64_t planes = buf.batch * buf.channels;
  const int64_t in_plane = static_cast<int64_t>(p.in_h) * p.in_w;
  const int64_t out_plane = static_cast<int64_t>(p.out_h) * p.out_w;
  const int32_t lane = static_cast<int32_t>(threadIdx.x % kWarp);
  const PlanePos stride = plane_pos(blockDim.x, p.out_w);

  for (int64_t plane = blockIdx.x; plane < planes; plane += gridDim.x) {
    const uint32_t sample = static_cast<uint32_t>(plane / buf.channels);
    const int64_t channel = plane % buf.channels;
    const int32_t channel_in_frame = static_cast<int32_t>(channel % p.frame_channels);
    if (threadIdx.x < static_cast<unsigned>(p.n_ops)) {
      draws[threadIdx.x] = draw_op(p, p.ops[threadIdx.x], counter_sample(buf, sample),
                                   static_cast<uint32_t>(channel / p.frame_channels));
    }
    const In* in = input_plane(p, buf, plane);
    if (layout.stage_bytes > 0) {
      stage_plane(in, staged, in_plane);
      in = staged;
    }
    __syncthreads();
    if (layout.traces_bytes > 0) {
      for (int32_t i = threadIdx.x; i < traces.count; i += blockDim.x) {
        traces.store(i,
                     i < p.out_h ? trace_axis(p, draws, 0, i)
                                 : trace_axis(p, draws, 1, (i - p.out_h) % p.out_w),
                     p.n_ops);
      }
      if (staged_op >= 0) {
        const OpDesc& op = p.ops[staged_op];
        stage_plane(buf.pool + pool_offset(p, op, draws[staged_op].image, channel_in_frame, 0, 0),
                    staged_pool, static_cast<int64_t>(op.out_h) * op.out_w);
      }
      __syncthreads();
    }

    Out* out = buf.out + plane * out_plane;
    const int32_t phase = vector_phase(out);
    const int64_t span = phase + out_plane;
    const int64_t chunk = layout.tiles == 2 ? layout.tile_elems : span;
    PlanePos at = plane_pos(static_cast<int64_t>(threadIdx.x) - phase, p.out_w);
    PlanePos warp_first = plane_pos(static_cast<int64_t>(threadIdx.x) - lane - phase, p.out_w);
    for (int64_t first = 0; first < span; first += chunk) {
      Out* tile = tiles + (first / chunk % 2) * layout.tile_elems;
      const int64_t end = span - first < chunk ? span : first + chunk;
      for (int64_t v = first + threadIdx.x; v < end;
           v += blockDim.x, advance(&at, stride, p.out_w), advance(&warp_first, stride, p.out_w)) {
        if (v < phase) continue;  // before the plane
        AxisTrace row, col;
        if (layout.traces_bytes > 0) {
          row = traces.load(at.y, p);
          col = traces.load(p.out_h + column_slot(at, warp_first, p.out_w), p);
        } else {
          row = trace_axis(p, draws, 0, at.y);
          col = trace_axis(p, draws, 1, at.x);
        }
        const In value =
            eval_pixel(p, draws, row, col, in, buf.pool, channel_in_frame, staged_pool, staged_op);
        // Same dtype without an affine: the value itself, as the CPU stores it
        // (v * 1 + 0 would turn -0.0 into +0.0).
        const Out stored = direct
                               ? static_cast<Out>(value)
                               : to_output(value, buf.scale, buf.bias, static_cast<Out*>(nullptr));
        if (layout.tiles > 0) {
          tile[v - first] = stored;
        } else {
          out[v - phase] = stored;
        }
      }
      if (layout.tiles > 0) {
        __syncthreads();
        store_tile(tile, out, phase, first, end, out_plane);
      }
    }
    if (layout.tiles == 0) __syncthreads();
  }
}

// Scratch of the per-frame kernel: `slots` staged frames per block, each
// C planes of the largest stage (kernels/augment_cpu.h largest_stage_plane),
// rounded up to a multiple of 16 elements (of 16 bytes or more) so that every
// slot of every block starts on a 16-byte boundary of the (aligned) scratch:
// stage_plane stores 16-byte vectors there.
struct FrameLaunch {
  unsigned blocks;
  int slots;           // segment i's output is slot i % 2; in place with one segment, slot 0
  int64_t slot_elems;  // elements of one slot, a multiple of 16
  int64_t scratch_elems() const { return static_cast<int64_t>(blocks) * slots * slot_elems; }
};

// The scratch of one launch stays under this many bytes (fewer blocks, each
// striding over more frames) unless one block's slots alone exceed it (then
// one block): at 3 x 1024 x 1024 float32 eight blocks per SM would otherwise
// ask for gigabytes.
constexpr int64_t kFrameScratchBudget = int64_t{256} << 20;

inline FrameLaunch frame_launch(const PipelineDesc& p, int64_t units, bool in_place, int sm_count,
                                int64_t element_bytes) {
  const int between = p.n_segments - 1 < 2 ? p.n_segments - 1 : 2;
  const int slots = between > 0 ? between : (in_place ? 1 : 0);
  const int64_t frame_elems = static_cast<int64_t>(p.frame_channels) * largest_stage_plane(p);
  const int64_t slot_elems = (frame_elems + kVectorBytes - 1) / kVectorBytes * kVectorBytes;
  // A few blocks per SM keep every SM busy; more would only grow the scratch.
  int64_t max_blocks = static_cast<int64_t>(sm_count > 0 ? sm_count : 1) * 8;
  const int64_t block_bytes = slots * slot_elems * element_bytes;
  if (block_bytes > 0 && max_blocks * block_bytes > kFrameScratchBudget) {
    max_blocks = kFrameScratchBudget / block_bytes > 1 ? kFrameScratchBudget / block_bytes : 1;
  }
  return {static_cast<unsigned>(units < max_blocks ? units : max_blocks), slots, slot_elems};
}

template <typename In, typename Out>
__global__ void __launch_bounds__(kThreads)
    augment_frames_kernel(PipelineDesc p, AugmentBuffers<In, Out> buf, In* scratch,
                          FrameLaunch launch) {
  __shared__ OpDraw draws[kMaxOps];
  __shared__ float conv_weights[kMaxOps * kConvWeights];
  __shared__ unsigned long long partial_sums[kThreads];  // gray_fixed sums, modulo 2^64
  __shared__ float frame_mean;

  const FrameBatch work = frame_batch(p, buf);
  In* slots = scratch + static_cast<int64_t>(blockIdx.x) * launch.slots * launch.slot_elems;

  for (int64_t unit = blockIdx.x; unit < work.units; unit += gridDim.x) {
    const uint32_t sample = static_cast<uint32_t>(unit / work.stack);
    const uint32_t frame = static_cast<uint32_t>(unit % work.stack);
    const int64_t first_plane = static_cast<int64_t>(sample) * buf.channels +
                                static_cast<int64_t>(frame) * work.frame_channels;
    // Task t: op t % n_ops's draw (t < n_ops), or its random_conv weight block
    // t / n_ops - 1; pure functions of their indices, drawn in parallel.
    const uint32_t sample_word = counter_sample(buf, sample);
    for (int t = threadIdx.x; t < p.n_ops * (1 + static_cast<int>(kConvWeightBlocks));
         t += blockDim.x) {
      const int k = t % p.n_ops;
      if (t < p.n_ops) {
        draws[k] = draw_op(p, p.ops[k], sample_word, frame);
      } else if (p.ops[k].kind == OpKind::kRandomConv) {
        draw_conv_weight_block(p, p.ops[k], sample_word, static_cast<uint32_t>(t / p.n_ops - 1),
                               conv_weights + k * kConvWeights);
      }
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
        unsigned long long sum = 0;  // an integer sum: any order gives the same mean
        for (int64_t j = threadIdx.x; j < static_cast<int64_t>(src.h) * src.w; j += blockDim.x)
          sum += static_cast<unsigned long long>(gray_fixed_at(src, j));
        partial_sums[threadIdx.x] = sum;
        __syncthreads();
        if (threadIdx.x == 0) {
          unsigned long long total = 0;
          for (unsigned t = 0; t < blockDim.x; ++t) total += partial_sums[t];
          frame_mean = mean_of_sum(static_cast<int64_t>(total), src.h, src.w);
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
