// The CUDA kernel of the fused pipeline (kernels/augment_cuda_kernel.cuh) run
// under the CPU emulation of the CUDA execution model, against the CPU backend
// (augment_cpu), bit for bit, under several block and thread orders: dtypes,
// in place and out of place, float output with scale and bias, both sides of
// the shared-memory edges, odd sizes and unaligned pointers, batch sizes,
// every op, pipelines of one to four ops, and the gather path.
#include "tests/cuda_emulation/cuda_emulation.h"
// The kernel header after the emulation.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/augment_cpu.h"
#include "kernels/augment_cuda_kernel.cuh"
#include "kernels/pipeline_spec.h"

namespace obsaug {
namespace {

CUDA_EMU_DYNAMIC_SHARED(dynamic_shared);

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;  // fewer and smaller cases (scripts/sanitize.sh)
#else
constexpr bool kSanitized = false;
#endif
constexpr uint64_t kOrders[] = {cuda_emu::kForward, cuda_emu::kReverse, 0x5eed};
constexpr uint64_t kSeed = (1ull << 63) + 12345;  // both key words
constexpr uint64_t kStep = (1ull << 40) + 7;      // both step words

enum class Types { kU8, kU8ToF32, kF32 };

struct Case {
  Pipeline pipeline;
  Types types = Types::kU8;
  int64_t batch = 2;
  int64_t stack = 2;           // S stacked frames
  int64_t frame_channels = 3;  // C
  int32_t height = 20;
  int32_t width = 24;
  bool in_place = false;
  float scale = 1.0f;
  float bias = 0.0f;
  int misalign = 0;           // elements by which in and out miss 16-byte alignment
  int out_misalign = -1;      // out's own, out of place (-1: misalign)
  int64_t gather_frames = 0;  // > 0: gather from a storage of this many frames
  int sm_count = 1;           // 64 blocks per SM: small values make blocks stride
};

// `count` elements starting `misalign` elements past a 16-byte boundary.
template <typename T>
struct Buffer {
  Buffer(size_t count, int misalign) : bytes((count + 4) * sizeof(T) + 32), count(count) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(bytes.data());
    data = reinterpret_cast<T*>((base + 15) / 16 * 16 + misalign * sizeof(T));
  }
  std::vector<unsigned char> bytes;
  size_t count;
  T* data;
};

// Frame size the pipeline's overlays (if any) see: the pool's image size.
std::pair<int64_t, int64_t> overlay_frame(const Pipeline& pipeline, int64_t h, int64_t w) {
  const std::vector<FrameSize> sizes = frame_sizes(pipeline, {h, w});  // input of op k at k
  for (size_t k = 0; k < pipeline.size(); ++k) {
    if (pipeline[k].kind() == OpKind::kOverlay) return {sizes[k].height, sizes[k].width};
  }
  return {sizes.back().height, sizes.back().width};
}

template <typename T>
void fill_random(T* data, size_t count, std::mt19937_64& rng) {
  for (size_t i = 0; i < count; ++i) {
    if constexpr (std::is_same<T, float>::value) {
      // Reals in 0..255 with fractions, and some -0.0 (kept as is without an affine).
      data[i] = i % 97 == 5 ? -0.0f : static_cast<float>(rng() % 25600) / 100.0f + 0.003f;
    } else {
      data[i] = static_cast<T>(rng() >> 56);
    }
  }
}

template <typename In, typename Out>
SharedLayout run_case(const Case& c) {
  std::mt19937_64 rng(static_cast<uint64_t>(c.height) * 7919 + c.width * 31 + c.batch);
  const int64_t channels = c.stack * c.frame_channels;
  const int64_t in_planes =
      c.gather_frames > 0 ? c.gather_frames * c.frame_channels : c.batch * channels;
  const size_t in_count = static_cast<size_t>(in_planes) * c.height * c.width;

  FrameGeometry geometry;
  geometry.height = c.height;
  geometry.width = c.width;
  geometry.frame_channels = c.frame_channels;
  std::vector<uint8_t> pool;
  if (has_overlay(c.pipeline)) {
    const auto [ph, pw] = overlay_frame(c.pipeline, c.height, c.width);
    geometry.pool_size = 7;
    geometry.pool_h = ph;
    geometry.pool_w = pw;
    pool.resize(static_cast<size_t>(7 * c.frame_channels * ph * pw));
    fill_random(pool.data(), pool.size(), rng);
  }
  const PipelineDesc desc = resolve_pipeline(c.pipeline, geometry, kSeed, kStep);
  const size_t out_count = static_cast<size_t>(c.batch * channels) * desc.out_h * desc.out_w;

  std::vector<int64_t> frame_index;
  if (c.gather_frames > 0) {
    // Repeated and unordered: the first two samples take the same frames backwards.
    for (int64_t i = 0; i < c.batch * c.stack; ++i) {
      frame_index.push_back(i < 2 * c.stack ? c.gather_frames - 1 - i % c.stack
                                            : static_cast<int64_t>(rng() % c.gather_frames));
    }
  }
  const int64_t* index = frame_index.empty() ? nullptr : frame_index.data();

  std::vector<In> input(in_count);
  fill_random(input.data(), in_count, rng);
  std::vector<Out> expected(out_count);
  augment_cpu(desc, AugmentBuffers<In, Out>{input.data(), expected.data(),
                                            pool.empty() ? nullptr : pool.data(), c.batch, channels,
                                            c.scale, c.bias, index});

  SharedLayout layout{};
  for (uint64_t order : kOrders) {
    Buffer<In> in(in_count, c.misalign);
    std::memcpy(in.data, input.data(), in_count * sizeof(In));
    Buffer<Out> separate(out_count, c.out_misalign >= 0 ? c.out_misalign : c.misalign);
    std::memset(separate.data, 0xCD, out_count * sizeof(Out));  // unwritten output shows
    Out* out = separate.data;
    if constexpr (std::is_same<In, Out>::value) {
      if (c.in_place) out = in.data;
    }
    const AugmentBuffers<In, Out> buf{in.data, out,      pool.empty() ? nullptr : pool.data(),
                                      c.batch, channels, c.scale,
                                      c.bias,  index};
    const AugmentLaunch launch = augment_launch(desc, buf, c.sm_count);
    layout = launch.layout;
    if (desc.n_segments > 0) {  // the per-frame kernel, with its scratch in "global memory"
      const FrameLaunch frames =
          frame_launch(desc, c.batch * c.stack, c.in_place, c.sm_count, sizeof(In));
      std::vector<In> scratch(static_cast<size_t>(frames.scratch_elems()));
      if (frames.blocks > 0) {
        cuda_emu::launch({dim3(frames.blocks), dim3(kThreads), 0, order},
                         augment_frames_kernel<In, Out>, desc, buf, scratch.data(), frames);
      }
    } else if (launch.blocks > 0) {
      cuda_emu::launch(
          {dim3(launch.blocks), dim3(kThreads), static_cast<size_t>(launch.layout.total()), order},
          augment_kernel<In, Out>, desc, buf, launch.layout);
    }
    if (std::memcmp(out, expected.data(), out_count * sizeof(Out)) != 0) {
      size_t i = 0;
      while (std::memcmp(out + i, expected.data() + i, sizeof(Out)) == 0) ++i;
      size_t differ = 0;
      for (size_t j = 0; j < out_count; ++j) {
        differ += std::memcmp(out + j, expected.data() + j, sizeof(Out)) != 0;
      }
      ADD_FAILURE() << "order " << order << ": " << differ << " of " << out_count
                    << " outputs differ from the CPU backend; first at " << i << " (plane "
                    << i / (static_cast<size_t>(desc.out_h) * desc.out_w) << "): emulated "
                    << +out[i] << ", cpu " << +expected[i] << " (layout: traces "
                    << layout.traces_bytes << " B, staged " << layout.stage_bytes << " B, "
                    << layout.tiles << " tiles of " << layout.tile_elems << ", blocks "
                    << launch.blocks << ")";
      break;
    }
  }
  return layout;
}

SharedLayout run(const Case& c) {
  switch (c.types) {
    case Types::kU8:
      return run_case<uint8_t, uint8_t>(c);
    case Types::kU8ToF32:
      return run_case<uint8_t, float>(c);
    case Types::kF32:
    default:
      return run_case<float, float>(c);
  }
}

Case make(Pipeline pipeline, Types types = Types::kU8) {
  Case c;
  c.pipeline = std::move(pipeline);
  c.types = types;
  return c;
}

const char* name_of(Types t) {
  return t == Types::kU8 ? "uint8" : (t == Types::kF32 ? "float32" : "uint8->float32");
}

TEST(AugmentKernelEmulated, Uint8AndFloat32Input) {
  for (Types t : {Types::kU8, Types::kF32}) {
    SCOPED_TRACE(name_of(t));
    Case c = make({OpSpec::shift(4), OpSpec::overlay(0.3, 0.8)}, t);
    c.height = 33;
    c.width = 47;
    run(c);
  }
}

TEST(AugmentKernelEmulated, InPlaceAndOutOfPlace) {
  for (Types t : {Types::kU8, Types::kF32}) {
    for (bool in_place : {false, true}) {
      SCOPED_TRACE(std::string(name_of(t)) + (in_place ? " in place" : " out of place"));
      Case c = make({OpSpec::overlay(0.25, 1.0, true), OpSpec::shift(6, "zeros")}, t);
      c.height = kSanitized ? 44 : 84;
      c.width = kSanitized ? 40 : 84;
      c.stack = kSanitized ? 1 : 3;
      c.in_place = in_place;
      run(c);
    }
  }
}

TEST(AugmentKernelEmulated, FloatOutputWithScaleAndBias) {
  Case c = make({OpSpec::shift(4), OpSpec::overlay(0.5)}, Types::kU8ToF32);
  c.scale = 1.0f / 255.0f;
  c.bias = -0.5f;
  run(c);
  c = make({OpSpec::crop(13, 17)}, Types::kU8ToF32);
  c.scale = 2.0f;
  c.bias = 0.25f;
  run(c);
  c = make({OpSpec::overlay(0.7), OpSpec::shift(3)}, Types::kF32);
  c.scale = 0.5f;
  c.bias = -3.0f;
  run(c);
}

// kCudaSharedBytes (48128) is the dynamic shared memory a block takes. In
// place the plane is staged first (one row more than fits: no launch in
// place); then the trace table (16 bytes per trace with two ops), the staged
// plane out of place, and a tile of the whole output plane, else two tiles of
// 4096 bytes, else none (stored one by one); last, with the trace table, the
// pool plane of a pipeline's only overlay.
TEST(AugmentKernelEmulated, SharedMemoryLayouts) {
  ASSERT_EQ(kCudaSharedBytes, 48128);
  Case c = make({OpSpec::shift(5), OpSpec::overlay(0.4)});
  c.batch = 1;
  c.stack = 2;
  c.frame_channels = 1;
  c.height = 84;  // traces 16 * (84 + 84 + 32) + plane 7056 + tile 7056 + 15 rounded up
  c.width = 84;
  SharedLayout layout = run(c);
  EXPECT_EQ(layout.traces_bytes, 3200);
  EXPECT_EQ(layout.stage_bytes, 7056);
  EXPECT_EQ(layout.tiles, 1);
  EXPECT_EQ(layout.tile_bytes, 7072);
  EXPECT_EQ(layout.pool_bytes, 7056);  // 17328 + 7056 B
  EXPECT_EQ(layout.pool_op, 1);
  c.height = 256;  // traces 6656 + plane 32768: two tiles of 4096, no room for the pool plane
  c.width = 128;
  layout = run(c);
  EXPECT_EQ(layout.traces_bytes, 6656);
  EXPECT_EQ(layout.stage_bytes, 32768);
  EXPECT_EQ(layout.tiles, 2);
  EXPECT_EQ(layout.tile_elems, 4096);
  EXPECT_EQ(layout.pool_bytes, 0);
  c.types = Types::kF32;  // float32 84 x 84: plane 28224 B, two tiles of 1024 floats
  c.height = 84;
  c.width = 84;
  layout = run(c);
  EXPECT_EQ(layout.stage_bytes, 28224);
  EXPECT_EQ(layout.tiles, 2);
  EXPECT_EQ(layout.tile_elems, 1024);
  EXPECT_EQ(layout.pool_bytes, 7056);  // 39616 + 7056 B
  // Two overlays: each reads its own pool plane from global memory.
  c.types = Types::kU8;
  c.pipeline = {OpSpec::overlay(0.3), OpSpec::shift(5), OpSpec::overlay(0.6)};
  layout = run(c);
  EXPECT_GT(layout.traces_bytes, 0);
  EXPECT_EQ(layout.pool_bytes, 0);
  c.pipeline = {OpSpec::shift(5), OpSpec::overlay(0.4)};

  c.types = Types::kU8;
  c.in_place = true;  // plane 160 x 256 = 40960 B + traces 16 * 448 = 48128 B, no tile
  c.height = 160;
  c.width = 256;
  layout = run(c);
  EXPECT_EQ(layout.stage_bytes, 40960);
  EXPECT_EQ(layout.traces_bytes, 7168);
  EXPECT_EQ(layout.tiles, 0);
  c.height = 161;  // one row more: the plane only, each thread traces its own pixels
  layout = run(c);
  EXPECT_EQ(layout.stage_bytes, 41216);
  EXPECT_EQ(layout.traces_bytes, 0);
  EXPECT_EQ(layout.tiles, 0);
  c.height = 188;  // in place the plane alone: 188 x 256 = 48128 B
  layout = run(c);
  EXPECT_EQ(layout.traces_bytes, 0);
  EXPECT_EQ(layout.stage_bytes, 48128);
  c.types = Types::kF32;  // float32: 94 x 128 x 4 = 48128 B
  c.height = 94;
  c.width = 128;
  layout = run(c);
  EXPECT_EQ(layout.stage_bytes, 48128);
  // One row more cannot be staged: the tensor layer augments from a copy
  // instead of launching in place (cuda_can_stage is false).
  EXPECT_EQ(shared_layout(PipelineDesc{}, 95 * 128 * 4, 4, /*in_place=*/true).stage_bytes, 0);
  EXPECT_EQ(shared_layout(PipelineDesc{}, 189 * 256, 1, /*in_place=*/true).stage_bytes, 0);
}

TEST(AugmentKernelEmulated, TracesInSharedMemoryAndPerPixel) {
  Case c = make({OpSpec::shift(2, "zeros"), OpSpec::overlay(0.6), OpSpec::crop(3, 2970)});
  c.batch = 1;
  c.height = 3;
  c.width = 3000;  // 20 * (3 + 2970 + 32) > 48128: every thread traces its own pixels
  c.frame_channels = 1;
  SharedLayout layout = run(c);
  EXPECT_EQ(layout.traces_bytes, 0);
  EXPECT_EQ(layout.stage_bytes, 9008);
  EXPECT_EQ(layout.tiles, 1);
  c.pipeline = {OpSpec::shift(2, "zeros"), OpSpec::overlay(0.6), OpSpec::crop(3, 2371)};
  layout = run(c);  // 20 * (3 + 2371 + 32) = 48120, rounded up to 16: the whole 48128
  EXPECT_EQ(layout.traces_bytes, 48128);
  EXPECT_EQ(layout.stage_bytes, 0);
  EXPECT_EQ(layout.tiles, 0);
  c.height = 40;
  c.width = 40;
  c.pipeline = {OpSpec::shift(2, "zeros"), OpSpec::overlay(0.6), OpSpec::crop(30, 31)};
  layout = run(c);
  EXPECT_EQ(layout.traces_bytes, 1872);  // 20 * (30 + 31 + 32) rounded up to 16
  EXPECT_EQ(layout.stage_bytes, 1600);
  EXPECT_EQ(layout.tiles, 1);
}

// The vector paths: rows of 83, 84, 85 and 88 (planes whose starts take every
// alignment phase), every element phase of the input and of the output,
// widths below a warp, with one tile, two tiles and none.
TEST(AugmentKernelEmulated, VectorPathsAtOddWidthsAndUnalignedStarts) {
  for (Types t : {Types::kU8, Types::kF32, Types::kU8ToF32}) {
    const int phases = t == Types::kU8 ? 16 : 4;
    for (int32_t width : {83, 84, 85, 88}) {
      for (int in_phase = 0; in_phase < phases; in_phase += kSanitized ? 5 : 1) {
        const int out_phase = (in_phase * 7 + 3) % phases;
        for (bool in_place : {false, true}) {
          if (in_place && t == Types::kU8ToF32) continue;
          std::ostringstream trace;
          trace << name_of(t) << " width " << width << " in phase " << in_phase << " out phase "
                << (in_place ? in_phase : out_phase) << (in_place ? " in place" : "");
          SCOPED_TRACE(trace.str());
          Case c = make({OpSpec::shift(4), OpSpec::overlay(0.3, 0.9)}, t);
          c.batch = 1;
          c.stack = kSanitized ? 1 : 2;
          c.frame_channels = 3;
          c.height = 17;
          c.width = width;
          c.misalign = in_phase;
          c.out_misalign = out_phase;
          c.in_place = in_place;
          if (t == Types::kU8ToF32) c.scale = 1.0f / 255.0f;
          run(c);
        }
      }
    }
  }
  // Rows narrower than a warp: a warp's elements span several rows.
  for (int32_t width : {1, 5, 31, 33}) {
    SCOPED_TRACE("width " + std::to_string(width));
    Case c = make({OpSpec::overlay(0.5), OpSpec::shift(2, "zeros")});
    c.height = 9;
    c.width = width;
    c.misalign = width % 16;
    run(c);
  }
  // Two tiles (chunks of 4096 bytes) and none, at odd sizes and phases.
  Case c = make({OpSpec::shift(3), OpSpec::overlay(0.7)}, Types::kF32);
  c.batch = 1;
  c.stack = 1;
  c.frame_channels = 1;
  c.height = 85;
  c.width = 83;
  c.misalign = 1;
  c.out_misalign = 3;
  EXPECT_EQ(run(c).tiles, 2);
  c.types = Types::kU8;
  c.height = 130;
  c.width = 253;
  c.misalign = 5;
  c.out_misalign = 11;
  EXPECT_EQ(run(c).tiles, 2);
  c.height = 161;  // in place: the plane and the traces, no tile
  c.in_place = true;
  c.misalign = 7;
  const SharedLayout layout = run(c);
  EXPECT_EQ(layout.tiles, 0);
  EXPECT_GT(layout.traces_bytes, 0);
}

// The claim at TraceTable: for every width and output phase, the active
// lanes of each warp read 32 consecutive column slots (one per bank), all
// below out_w + kWarp, as the kernel steps through the plane.
TEST(AugmentKernelEmulated, ColumnSlotsOfAWarpAreConsecutive) {
  for (int32_t w = 1; w <= 100; ++w) {
    for (int32_t phase = 0; phase < 16; ++phase) {
      const int64_t count = 7 * w + 3;
      const int64_t span = phase + count;
      const PlanePos stride = plane_pos(kThreads, w);
      for (int warp = 0; warp < kThreads / kWarp; ++warp) {
        PlanePos at[kWarp], first[kWarp];
        for (int lane = 0; lane < kWarp; ++lane) {
          at[lane] = plane_pos(static_cast<int64_t>(warp * kWarp + lane) - phase, w);
          first[lane] = plane_pos(static_cast<int64_t>(warp * kWarp) - phase, w);
        }
        for (int64_t base = warp * kWarp; base < span; base += kThreads) {
          int32_t previous = -1;
          for (int lane = 0; lane < kWarp; ++lane) {
            const int64_t v = base + lane;
            if (v >= phase && v < span) {
              ASSERT_EQ(at[lane].y * static_cast<int64_t>(w) + at[lane].x, v - phase);
              const int32_t slot = column_slot(at[lane], first[lane], w);
              ASSERT_EQ(slot % w, at[lane].x);
              ASSERT_LT(slot, w + kWarp);
              if (previous >= 0) {
                ASSERT_EQ(slot, previous + 1) << "w " << w << " phase " << phase;
              }
              previous = slot;
            }
            advance(&at[lane], stride, w);
            advance(&first[lane], stride, w);
          }
        }
      }
    }
  }
}

// stage_plane and store_tile alone (one warp, so that a thread handles
// several vectors): counts up to 70, every phase of the source and of the
// destination; nothing outside the range is written.
template <typename T>
__global__ void stage_then_copy(const T* src, T* dst, int64_t count) {
  extern __shared__ __align__(16) unsigned char dynamic_shared[];
  T* shared = reinterpret_cast<T*>(dynamic_shared);
  stage_plane(src, shared, count);
  __syncthreads();
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) dst[i] = shared[i];
}

template <typename T>
__global__ void fill_then_store_tile(const T* src, T* dst, int64_t count) {
  extern __shared__ __align__(16) unsigned char dynamic_shared[];
  T* tile = reinterpret_cast<T*>(dynamic_shared);
  const int32_t phase = vector_phase(dst);
  for (int64_t v = threadIdx.x; v < phase + count; v += blockDim.x)
    if (v >= phase) tile[v] = src[v - phase];
  __syncthreads();
  store_tile(tile, dst, phase, 0, phase + count, count);
}

template <typename T>
void check_vector_copies() {
  constexpr int V = kPerVector<T>;
  std::mt19937_64 rng(V);
  for (int64_t count = 0; count <= 70; count += count < 40 ? 1 : 15) {
    for (int src_phase = 0; src_phase < V; src_phase += kSanitized ? 3 : 1) {
      for (int dst_phase = 0; dst_phase < V; dst_phase += kSanitized ? 5 : 1) {
        Buffer<T> src(count, src_phase);
        fill_random(src.data, count, rng);
        for (auto kernel : {stage_then_copy<T>, fill_then_store_tile<T>}) {
          Buffer<T> dst(count + 2 * V, dst_phase);
          std::memset(dst.bytes.data(), 0xCD, dst.bytes.size());
          std::vector<unsigned char> before = dst.bytes;
          T* at = dst.data + V;  // the same phase, with V guard elements on each side
          cuda_emu::launch({dim3(1), dim3(kWarp), 1024, cuda_emu::kReverse}, kernel,
                           static_cast<const T*>(src.data), at, count);
          ASSERT_EQ(std::memcmp(at, src.data, count * sizeof(T)), 0)
              << count << " elements, phases " << src_phase << " -> " << dst_phase;
          std::memcpy(dst.bytes.data() + (reinterpret_cast<unsigned char*>(at) - dst.bytes.data()),
                      before.data() + (reinterpret_cast<unsigned char*>(at) - dst.bytes.data()),
                      count * sizeof(T));
          ASSERT_EQ(dst.bytes, before) << "written outside the range: " << count << " elements";
        }
      }
    }
  }
}

TEST(AugmentKernelEmulated, StagedPlanesAndTilesAtEveryPhase) {
  check_vector_copies<uint8_t>();
  check_vector_copies<float>();
}

TEST(AugmentKernelEmulated, OddSizesAndUnalignedPointers) {
  const int32_t sizes[][2] = {{1, 1}, {1, 257}, {255, 3}, {96, 96}};
  for (const auto& size : sizes) {
    for (int misalign : {1, 0}) {
      if (kSanitized && misalign == 0) continue;
      for (Types t : {Types::kU8, Types::kF32, Types::kU8ToF32}) {
        for (bool in_place : {false, true}) {
          if (in_place && t == Types::kU8ToF32) continue;
          std::ostringstream trace;
          trace << size[0] << "x" << size[1] << " misaligned by " << misalign << " " << name_of(t)
                << (in_place ? " in place" : "");
          SCOPED_TRACE(trace.str());
          Case c = make({OpSpec::shift(2), OpSpec::overlay(0.4, 0.9)}, t);
          c.height = size[0];
          c.width = size[1];
          c.batch = 1;
          c.stack = 1;
          c.frame_channels = kSanitized ? 1 : 3;
          c.misalign = misalign;
          c.in_place = in_place;
          if (t == Types::kU8ToF32) c.scale = 1.0f / 255.0f;
          run(c);
        }
      }
    }
  }
}

TEST(AugmentKernelEmulated, BatchSizesFromOneTo300) {
  for (int64_t batch : {1, 2, 7, kSanitized ? 70 : 300}) {
    SCOPED_TRACE("B = " + std::to_string(batch));
    Case c = make({OpSpec::shift(1), OpSpec::overlay(0.5, 0.75, true)});
    c.batch = batch;
    c.stack = 1;
    c.frame_channels = 1;
    c.height = 6;
    c.width = 9;
    c.sm_count = batch == 7 ? 132 : 1;  // one block per plane, or blocks striding over planes
    run(c);
  }
}

// overlay with distinct (blocks of P = 7 samples see every image once, the
// keyed permutation of kernels/pipeline.h): per sample and per frame, first
// and second family, across several blocks.
TEST(AugmentKernelEmulated, OverlayWithDistinctImages) {
  for (bool per_frame : {false, true}) {
    SCOPED_TRACE(per_frame ? "per frame" : "per sample");
    Case c = make({OpSpec::shift(1), OpSpec::overlay(0.5, 0.75, per_frame, true)});
    c.batch = kSanitized ? 9 : 23;
    c.height = 6;
    c.width = 9;
    run(c);
    c.pipeline.push_back(OpSpec(OpKind::kGrayscale));
    run(c);
  }
}

OpSpec op(OpKind kind, std::vector<std::pair<std::string, KeyValue>> values = {}) {
  OpSpec spec(kind);
  for (auto& [key, value] : values) spec.set(key, value);
  return spec;
}

// The per-frame kernel (second family): every op, the barriers, mixed with
// the first family, in every dtype, in place, gathered, and with blocks
// striding over frames.
TEST(AugmentKernelEmulated, SecondFamilyPipelines) {
  const OpSpec conv = op(OpKind::kRandomConv);
  const OpSpec conv_rad =
      op(OpKind::kRandomConv, {{"init", "xavier"}, {"padding", "zeros"}, {"activation", "none"}});
  const OpSpec jitter = op(OpKind::kColorJitter, {{"p", 0.7}});
  const OpSpec brightness_only =
      op(OpKind::kColorJitter, {{"contrast", 0.0}, {"saturation", 0.0}, {"hue", 0.0}});
  const Pipeline pipelines[] = {
      {op(OpKind::kFlip)},
      {op(OpKind::kFlip, {{"axis", "vertical"}, {"p", 0.9}})},
      {op(OpKind::kRotate, {{"p", 0.8}})},
      {op(OpKind::kTranslate, {{"size", FrameSize{26, 27}}})},
      {op(OpKind::kCutout, {{"min", int64_t{2}}, {"max", int64_t{9}}, {"fill", "color"}})},
      {op(OpKind::kGrayscale, {{"p", 0.6}})},
      {jitter},
      {brightness_only},
      {conv},
      {conv_rad},
      {OpSpec::shift(3), op(OpKind::kRotate, {{"p", 1.0}}), OpSpec::overlay(0.4, 0.9),
       op(OpKind::kCutout, {{"min", int64_t{3}}, {"max", int64_t{30}}})},
      {OpSpec::crop(18, 18), conv, op(OpKind::kFlip), jitter},
      {jitter, OpSpec::shift(2, "zeros"), conv_rad, op(OpKind::kGrayscale)},
      {op(OpKind::kTranslate, {{"size", FrameSize{24, 24}}}), op(OpKind::kRotate),
       OpSpec::overlay(0.5), jitter, OpSpec::crop(20, 19)},
  };
  const Types types[] = {Types::kU8, Types::kF32, Types::kU8ToF32};
  for (size_t i = 0; i < std::size(pipelines); ++i) {
    for (Types t : types) {
      for (bool in_place : {false, true}) {
        const std::vector<FrameSize> sizes = frame_sizes(pipelines[i], {20, 20});
        if (in_place && (t == Types::kU8ToF32 || sizes.back() != FrameSize{20, 20})) continue;
        SCOPED_TRACE(format_pipeline(pipelines[i]) + " " + name_of(t) +
                     (in_place ? " in place" : ""));
        Case c = make(pipelines[i], t);
        c.height = 20;
        c.width = 20;
        c.batch = kSanitized ? 2 : 5;
        c.stack = 2;
        c.in_place = in_place;
        c.misalign = i % 2;
        if (t == Types::kU8ToF32) c.scale = 1.0f / 255.0f;
        run(c);
      }
    }
  }
}

TEST(AugmentKernelEmulated, SecondFamilyStridingGatherAndOneChannel) {
  Case c = make({op(OpKind::kFlip, {{"p", 0.5}}), op(OpKind::kColorJitter), OpSpec::shift(2)});
  c.batch = kSanitized ? 9 : 40;
  c.stack = 3;
  c.height = 11;
  c.width = 13;
  c.sm_count = 1;  // 8 blocks striding over the frames
  run(c);
  c.gather_frames = 7;
  run(c);
  c.types = Types::kF32;
  run(c);
  // C = 1 (Atari): the ops that do not mix channels, one channel at a time.
  c = make({op(OpKind::kCutout, {{"fill", "color"}}), op(OpKind::kRotate), OpSpec::crop(12, 10)});
  c.frame_channels = 1;
  c.stack = 4;
  c.height = 14;
  c.width = 14;
  run(c);
  // C = 4 (RGBD, frame_channels=4 of the ops): the kernel's colour per channel
  // equals the CPU's (whose c % 3 rule tests/python checks against the reference).
  c.frame_channels = 4;
  c.stack = 3;
  run(c);
  c.gather_frames = 5;
  run(c);
}

// Frames whose byte size is no multiple of 16 (83 x 83), in place with one
// segment: the frame is staged into the block's scratch slot with 16-byte
// vector stores wherever the input's phase allows, so each slot must start
// on a 16-byte boundary; 8 blocks (sm_count 1) stride over 12 frames, at an
// unaligned input. (Under UBSan a misaligned uint4 store fails the test.)
TEST(AugmentKernelEmulated, SecondFamilyInPlaceOddFrames) {
  for (Types t : {Types::kU8, Types::kF32}) {
    for (int misalign : {0, 1, 3}) {
      SCOPED_TRACE(std::string(name_of(t)) + " misalign " + std::to_string(misalign));
      Case c = make({op(OpKind::kFlip, {{"p", 0.5}})}, t);
      c.height = 83;
      c.width = 83;
      c.batch = kSanitized ? 5 : 6;
      c.stack = 2;
      c.in_place = true;
      c.misalign = misalign;
      c.sm_count = 1;
      run(c);
    }
  }
}

// The per-frame kernel's scratch: the slots of every block begin on 16-byte
// boundaries at every frame size and element size, each holds a frame, and
// a launch's scratch stays within kFrameScratchBudget (fewer blocks for
// large frames, never none) unless one block's slots alone exceed it.
TEST(AugmentKernelEmulated, FrameScratchSlotsAlignedAndBounded) {
  const Pipeline pipelines[] = {
      {op(OpKind::kFlip)},  // one segment: a slot only in place
      // random_conv and contrast each begin a segment: three segments, two slots
      {op(OpKind::kFlip), op(OpKind::kRandomConv), op(OpKind::kColorJitter, {{"p", 1.0}})},
  };
  for (const Pipeline& pipeline : pipelines) {
    for (int32_t side : {11, 20, 83, 84, 1024}) {
      FrameGeometry geometry;
      geometry.height = side;
      geometry.width = side;
      geometry.frame_channels = 3;
      const PipelineDesc desc = resolve_pipeline(pipeline, geometry, kSeed, kStep);
      for (int64_t element_bytes : {int64_t{1}, int64_t{4}}) {
        for (bool in_place : {false, true}) {
          SCOPED_TRACE(format_pipeline(pipeline) + " " + std::to_string(side) + "x" +
                       std::to_string(side) + " element bytes " + std::to_string(element_bytes) +
                       (in_place ? " in place" : ""));
          const FrameLaunch launch = frame_launch(desc, 100000, in_place, 132, element_bytes);
          EXPECT_EQ(launch.slots, desc.n_segments > 1 ? 2 : (in_place ? 1 : 0));
          if (launch.slots == 0) continue;
          EXPECT_EQ(launch.slot_elems * element_bytes % kVectorBytes, 0);
          EXPECT_GE(launch.slot_elems, int64_t{3} * side * side);
          EXPECT_GE(launch.blocks, 1u);
          EXPECT_LE(launch.blocks, 132u * 8);
          const int64_t block_bytes = launch.slots * launch.slot_elems * element_bytes;
          if (block_bytes <= kFrameScratchBudget) {
            EXPECT_LE(launch.scratch_elems() * element_bytes, kFrameScratchBudget);
          } else {
            EXPECT_EQ(launch.blocks, 1u);
          }
        }
      }
    }
  }
}

TEST(AugmentKernelEmulated, EveryOp) {
  const Pipeline ops[] = {
      {OpSpec::shift(4)},
      {OpSpec::shift(9, "zeros")},
      {OpSpec::crop(13, 17)},
      {OpSpec::crop(13, 17, /*center=*/true)},
      {OpSpec::overlay(0.5)},
      {OpSpec::overlay(0.3, 0.8)},
      {OpSpec::overlay(0.25, 1.0, /*per_frame=*/true)},
      {OpSpec::overlay(0.0), OpSpec::overlay(1.0)},
  };
  for (Types t : {Types::kU8, Types::kF32}) {
    for (const Pipeline& pipeline : ops) {
      SCOPED_TRACE(std::string(name_of(t)) + " " + format_pipeline(pipeline));
      Case c = make(pipeline, t);
      c.batch = 1;
      if (kSanitized) c.stack = 1;
      run(c);
    }
  }
}

TEST(AugmentKernelEmulated, PipelinesOfOneToFourOps) {
  const Pipeline pipelines[] = {
      {OpSpec::overlay(0.4)},
      {OpSpec::overlay(0.4), OpSpec::shift(4)},
      {OpSpec::shift(2, "zeros"), OpSpec::crop(15, 19),
       OpSpec::overlay(0.6, 0.9, /*per_frame=*/true)},
      {OpSpec::overlay(0.2, 0.5), OpSpec::shift(3, "zeros"), OpSpec::crop(16, 16),
       OpSpec::shift(5).at_index(9)},
  };
  for (Types t : {Types::kU8, Types::kF32, Types::kU8ToF32}) {
    for (const Pipeline& pipeline : pipelines) {
      SCOPED_TRACE(std::string(name_of(t)) + " " + format_pipeline(pipeline));
      Case c = make(pipeline, t);
      c.batch = 1;
      c.stack = kSanitized ? 1 : 3;
      run(c);
    }
  }
}

// Op k is drawn by thread k, and a random_conv's 21 weight blocks by 21
// threads: eight ops (kMaxOps; the overlays share the pool's frame size),
// and two random_convs in one pipeline.
TEST(AugmentKernelEmulated, DrawsByManyThreads) {
  const Pipeline eight = {OpSpec::shift(3),          OpSpec::overlay(0.2, 0.6),
                          OpSpec::shift(2, "zeros"), OpSpec::overlay(0.5, 1.0, true),
                          OpSpec::shift(1),          OpSpec::overlay(0.3),
                          OpSpec::crop(18, 19),      OpSpec::crop(15, 16)};
  ASSERT_EQ(eight.size(), static_cast<size_t>(kMaxOps));
  const OpSpec conv_rad =
      op(OpKind::kRandomConv, {{"init", "xavier"}, {"padding", "zeros"}, {"activation", "none"}});
  const Pipeline two_convs = {op(OpKind::kRandomConv), op(OpKind::kFlip), conv_rad,
                              op(OpKind::kColorJitter, {{"p", 0.8}})};
  for (const Pipeline& pipeline : {eight, two_convs}) {
    for (Types t : {Types::kU8, Types::kF32}) {
      SCOPED_TRACE(std::string(name_of(t)) + " " + format_pipeline(pipeline));
      Case c = make(pipeline, t);
      c.batch = kSanitized ? 2 : 6;
      run(c);
    }
  }
}

TEST(AugmentKernelEmulated, GatherWithRepeatedAndUnorderedIndices) {
  for (Types t : {Types::kU8, Types::kF32, Types::kU8ToF32}) {
    for (int64_t frame_channels : {1, 3}) {
      SCOPED_TRACE(std::string(name_of(t)) + " C = " + std::to_string(frame_channels));
      Case c = make({OpSpec::shift(3), OpSpec::overlay(0.3, 0.9, /*per_frame=*/true)}, t);
      c.batch = kSanitized ? 2 : 4;
      c.stack = 3;
      c.frame_channels = frame_channels;
      c.gather_frames = 5;
      run(c);
    }
  }
}

}  // namespace
}  // namespace obsaug
