// The tensor-level ops (obsaug::ops::augment / augment_ / shift / crop /
// overlay) against
//  - a naive reference that evaluates every output pixel from scratch with
//    draw_pipeline + trace_axis + eval_pixel, exactly what the CUDA kernel
//    does per pixel, while the CPU backend runs a separate vectorized row
//    loop: bit-for-bit agreement here is what ties the two backends together;
//  - small hand-computed cases whose parameters are drawn straight from the
//    DESIGN.md section 3 formulas (draw_block + below);
//  - the ops applied one after another (a fused pass equals the sequence);
//  - the tensor API's argument errors;
//  - the CUDA backend, when a GPU is present.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/augment.h"
#include "kernels/augment_cpu.h"
#include "kernels/frame_eval.h"
#include "kernels/output_tensor.h"
#include "kernels/philox.h"
#include "kernels/pipeline.h"
#include "kernels/pipeline_spec.h"
#include "kernels/streaming_stores.h"
#include "tests/kernels/reference.h"
#include "tests/test_util.h"

namespace obsaug {
namespace {

using ops::OutputOptions;

// ---------------------------------------------------------------- helpers

at::Tensor random_u8(at::IntArrayRef shape, std::mt19937_64& rng) {
  at::Tensor t = at::empty(shape, at::kByte);
  uint8_t* p = t.data_ptr<uint8_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<uint8_t>(rng() >> 56);
  return t;
}

// Reals in [0, 255] (not only integers, so float blends round non-trivially).
at::Tensor random_f32(at::IntArrayRef shape, std::mt19937_64& rng) {
  at::Tensor t = at::empty(shape, at::kFloat);
  float* p = t.data_ptr<float>();
  std::uniform_real_distribution<float> dist(0.0f, 255.0f);
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

at::Tensor u8_from(at::IntArrayRef shape, std::initializer_list<int> values) {
  at::Tensor t = at::empty(shape, at::kByte);
  EXPECT_EQ(t.numel(), static_cast<int64_t>(values.size()));
  uint8_t* p = t.data_ptr<uint8_t>();
  for (int v : values) *p++ = static_cast<uint8_t>(v);
  return t;
}

std::vector<int> u8_values(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  EXPECT_EQ(c.scalar_type(), at::kByte);
  return std::vector<int>(c.data_ptr<uint8_t>(), c.data_ptr<uint8_t>() + c.numel());
}

// The same values in a non-contiguous layout (several kinds of strides).
at::Tensor non_contiguous(const at::Tensor& t, int mode) {
  const int64_t b = t.size(0), c = t.size(1), h = t.size(2), w = t.size(3);
  at::Tensor view;
  switch (mode % 3) {
    case 0:  // channels last
      view = at::empty({b, h, w, c}, t.options()).permute({0, 3, 1, 2});
      break;
    case 1:  // a window of a wider frame
      view = at::empty({b, c, h, w + 5}, t.options()).narrow(3, 2, w);
      break;
    default:  // every other sample of a larger batch
      view = at::empty({2 * b, c, h, w}, t.options()).slice(0, 1, 2 * b, 2);
      break;
  }
  view.copy_(t);
  return view;
}

// Bitwise equality of two tensors of the same dtype and shape; on mismatch,
// the first differing element.
::testing::AssertionResult same_bits(const at::Tensor& expected, const at::Tensor& got) {
  if (expected.scalar_type() != got.scalar_type()) {
    return ::testing::AssertionFailure()
           << "dtype " << got.scalar_type() << ", expected " << expected.scalar_type();
  }
  if (expected.sizes() != got.sizes()) {
    return ::testing::AssertionFailure()
           << "shape " << got.sizes() << ", expected " << expected.sizes();
  }
  const at::Tensor e = expected.contiguous();
  const at::Tensor g = got.contiguous();
  const size_t bytes = static_cast<size_t>(e.numel()) * e.element_size();
  if (bytes == 0 || std::memcmp(e.data_ptr(), g.data_ptr(), bytes) == 0) {
    return ::testing::AssertionSuccess();
  }
  const int64_t h = e.size(2), w = e.size(3), c = e.size(1);
  int64_t mismatches = 0, first = -1;
  for (int64_t i = 0; i < e.numel(); ++i) {
    const bool differ = std::memcmp(static_cast<const char*>(e.data_ptr()) + i * e.element_size(),
                                    static_cast<const char*>(g.data_ptr()) + i * e.element_size(),
                                    e.element_size()) != 0;
    if (differ && first < 0) first = i;
    mismatches += differ;
  }
  auto value = [&](const at::Tensor& t, int64_t i) {
    return t.scalar_type() == at::kByte ? static_cast<double>(t.data_ptr<uint8_t>()[i])
                                        : static_cast<double>(t.data_ptr<float>()[i]);
  };
  std::ostringstream where;
  where.precision(9);
  where << mismatches << " of " << e.numel()
        << " elements differ; first at [b=" << first / (c * h * w) << ", c=" << first / (h * w) % c
        << ", y=" << first / w % h << ", x=" << first % w << "]: got " << value(g, first)
        << ", expected " << value(e, first);
  return ::testing::AssertionFailure() << where.str();
}

// ---------------------------------------------------------------- reference

using testing::geometry_of;
using testing::reference;

// ---------------------------------------------------------------- random cases

struct Case {
  int64_t batch = 1, stack = 1, channels = 3, height = 1, width = 1;
  Pipeline pipeline;
  int64_t pool_images = 0;  // P; 0 when the pipeline has no overlay
  int64_t pool_h = 0, pool_w = 0;
  uint64_t seed = 0, step = 0;
  bool keeps_size = true;

  std::string describe() const {
    std::ostringstream out;
    out << "obs [" << batch << ", " << stack << "*" << channels << ", " << height << ", " << width
        << "], pool [" << pool_images << ", " << channels << ", " << pool_h << ", " << pool_w
        << "], seed " << seed << ", step " << step << ", ops " << format_pipeline(pipeline);
    return out.str();
  }
};

Case random_case(std::mt19937_64& rng) {
  static const int64_t kSizes[][2] = {{1, 1}, {2, 3},  {3, 2}, {83, 85}, {84, 84},
                                      {5, 7}, {16, 9}, {1, 6}, {7, 1},   {31, 33}};
  Case c;
  const auto pick = [&](int64_t lo, int64_t hi) {  // uniform in [lo, hi]
    return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
  };
  if (rng() % 3 == 0) {
    c.height = pick(1, 24);
    c.width = pick(1, 24);
  } else {
    const auto& s = kSizes[rng() % (sizeof(kSizes) / sizeof(kSizes[0]))];
    c.height = s[0];
    c.width = s[1];
  }
  const bool big = c.height * c.width > 1000;
  c.batch = pick(1, big ? 2 : 5);
  c.stack = pick(1, 3);
  c.channels = rng() % 2 ? 3 : 1;
  c.seed = rng() % 4 == 0 ? rng() : pick(0, 9);
  c.step = rng() % 4 == 0 ? rng() : pick(0, 9);

  int64_t h = c.height, w = c.width;
  const int n = static_cast<int>(pick(1, 5));
  for (int k = 0; k < n; ++k) {
    int kind = static_cast<int>(rng() % 3);
    if (kind == 2 && c.pool_images > 0 && (c.pool_h != h || c.pool_w != w)) kind = 0;
    OpSpec op;
    if (kind == 0) {
      int64_t pad = pick(0, 6);
      if (rng() % 8 == 0) pad = std::max(h, w) + pick(0, 4);  // shifts past the frame
      op = OpSpec::shift(pad, rng() % 2 ? "zeros" : "replicate");
    } else if (kind == 1) {
      const int64_t ch = rng() % 4 == 0 ? h : pick(1, h);
      const int64_t cw = rng() % 4 == 0 ? w : pick(1, w);
      op = OpSpec::crop(ch, cw, rng() % 4 == 0);
      h = ch;
      w = cw;
    } else {
      if (c.pool_images == 0) {
        c.pool_images = pick(1, 5);
        c.pool_h = h;
        c.pool_w = w;
      }
      static const double kAlphas[] = {0.0, 1.0, 0.5, 1.0 / 512.0, 0.3};
      std::uniform_real_distribution<double> unit(0.0, 1.0);
      const double alpha = rng() % 2 ? kAlphas[rng() % 5] : unit(rng);
      std::optional<double> alpha_max;
      if (rng() % 2) alpha_max = rng() % 4 == 0 ? 1.0 : alpha + (1.0 - alpha) * unit(rng);
      op = OpSpec::overlay(alpha, alpha_max, rng() % 2 == 0);
    }
    if (rng() % 5 == 0) op.at_index(pick(0, 32767));
    c.pipeline.push_back(op);
  }
  c.keeps_size = h == c.height && w == c.width;
  return c;
}

// The ops one after another, op k with the Philox index the fused pass gives it.
at::Tensor sequential(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
                      const Pipeline& pipeline, uint64_t seed, uint64_t step) {
  at::Tensor x = obs;
  for (size_t k = 0; k < pipeline.size(); ++k) {
    OpSpec op = pipeline[k];
    op.at_index(op.index().value_or(static_cast<int64_t>(k)));
    x = ops::augment(x, pool, {op}, seed, step);
  }
  return x;
}

// The streaming threshold (kernels/streaming_stores.h) for one test: set
// here, the default again when the test ends.
struct ScopedStreamThreshold {
  explicit ScopedStreamThreshold(int64_t bytes) { set(bytes); }
  void set(int64_t bytes) { set_stream_threshold_bytes(bytes); }
  ~ScopedStreamThreshold() { set_stream_threshold_bytes(-1); }
};

// The heart of the suite: the CPU backend (vectorized rows) equals the
// per-pixel path (what CUDA runs) bit for bit, in every dtype combination,
// in place and out of place, for contiguous and strided inputs.
TEST(AugmentReference, RandomPipelinesMatchPerPixelPath) {
  std::mt19937_64 rng(20240601);
  const auto start = std::chrono::steady_clock::now();
  int with_overlay = 0, with_crop = 0, with_zeros = 0, in_place = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const Case c = random_case(rng);
    SCOPED_TRACE("trial " + std::to_string(trial) + ": " + c.describe());
    std::optional<at::Tensor> pool;
    if (c.pool_images > 0) {
      pool = random_u8({c.pool_images, c.channels, c.pool_h, c.pool_w}, rng);
      if (rng() % 4 == 0) pool = non_contiguous(*pool, static_cast<int>(rng() % 3));
      ++with_overlay;
    }
    for (const OpSpec& op : c.pipeline) {
      with_crop += op.kind() == OpKind::kCrop;
      with_zeros += op.kind() == OpKind::kShift && op.get_choice("padding") == "zeros";
    }
    const std::vector<int64_t> shape = {c.batch, c.stack * c.channels, c.height, c.width};
    const at::Tensor obs_u8 = random_u8(shape, rng);
    const at::Tensor obs_f32 = random_f32(shape, rng);
    const int layout = static_cast<int>(rng() % 3);
    const double scale = rng() % 2 ? 1.0 / 255.0 : 2.5;
    const double bias = rng() % 2 ? -0.5 : 0.0;
    const OutputOptions affine{at::kFloat, scale, bias};

    for (const at::Tensor& obs : {obs_u8, obs_f32}) {
      SCOPED_TRACE(std::string("input ") + c10::toString(obs.scalar_type()));
      const at::Tensor expected = reference(obs, pool, c.pipeline, c.seed, c.step);
      EXPECT_TRUE(same_bits(expected, ops::augment(obs, pool, c.pipeline, c.seed, c.step)));
      // Float output with the fused affine.
      EXPECT_TRUE(same_bits(reference(obs, pool, c.pipeline, c.seed, c.step, affine),
                            ops::augment(obs, pool, c.pipeline, c.seed, c.step, affine)));
      // Non-contiguous input.
      const at::Tensor strided = non_contiguous(obs, layout);
      EXPECT_TRUE(same_bits(expected, ops::augment(strided, pool, c.pipeline, c.seed, c.step)))
          << "non-contiguous input, layout " << layout;
      // A fused pass equals the ops applied one after another.
      EXPECT_TRUE(same_bits(expected, sequential(obs, pool, c.pipeline, c.seed, c.step)))
          << "fused != sequential";
      if (c.keeps_size) {
        ++in_place;
        at::Tensor target = obs.clone();
        ops::augment_(target, pool, c.pipeline, c.seed, c.step);
        EXPECT_TRUE(same_bits(expected, target)) << "in place, contiguous";
        at::Tensor target_strided = non_contiguous(obs, layout + 1);
        const auto strides = target_strided.strides().vec();
        ops::augment_(target_strided, pool, c.pipeline, c.seed, c.step);
        EXPECT_TRUE(same_bits(expected, target_strided)) << "in place, non-contiguous";
        EXPECT_EQ(target_strided.strides().vec(), strides);
      }
    }
    if (HasFailure()) return;  // one failing case tells the story
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The generator must actually reach every feature.
  EXPECT_GT(with_overlay, 50);
  EXPECT_GT(with_crop, 50);
  EXPECT_GT(with_zeros, 50);
  EXPECT_GT(in_place, 50);
  RecordProperty("seconds", std::to_string(seconds));
}

// Every out-of-place output streamed, as one larger than the cache is
// (kernels/streaming_stores.h): the same bits as the per-pixel path, in
// every dtype combination and for strided inputs; a copy without ops (a
// replay buffer's sample) and a gather too. Frames of many widths put rows
// and planes at every alignment.
TEST(AugmentReference, StreamedOutputsMatchPerPixelPath) {
  ScopedStreamThreshold streamed(0);  // every output streamed
  std::mt19937_64 rng(20261201);
  for (int trial = 0; trial < 120; ++trial) {
    const Case c = random_case(rng);
    SCOPED_TRACE("trial " + std::to_string(trial) + ": " + c.describe());
    std::optional<at::Tensor> pool;
    if (c.pool_images > 0) pool = random_u8({c.pool_images, c.channels, c.pool_h, c.pool_w}, rng);
    const std::vector<int64_t> shape = {c.batch, c.stack * c.channels, c.height, c.width};
    const OutputOptions affine{at::kFloat, 1.0 / 255.0, -0.5};
    for (const at::Tensor& obs : {random_u8(shape, rng), random_f32(shape, rng)}) {
      SCOPED_TRACE(std::string("input ") + c10::toString(obs.scalar_type()));
      const at::Tensor expected = reference(obs, pool, c.pipeline, c.seed, c.step);
      EXPECT_TRUE(same_bits(expected, ops::augment(obs, pool, c.pipeline, c.seed, c.step)));
      EXPECT_TRUE(same_bits(reference(obs, pool, c.pipeline, c.seed, c.step, affine),
                            ops::augment(obs, pool, c.pipeline, c.seed, c.step, affine)));
      EXPECT_TRUE(same_bits(expected, ops::augment(non_contiguous(obs, trial % 3), pool, c.pipeline,
                                                   c.seed, c.step)));
      // no ops: each plane one streamed copy
      EXPECT_TRUE(same_bits(obs, ops::augment(obs, std::nullopt, {}, c.seed, c.step)));
      std::vector<int64_t> frames(6);
      for (int64_t& f : frames) f = static_cast<int64_t>(rng() % c.batch);
      const at::Tensor idx = at::tensor(frames, at::kLong).view({3, 2});
      const at::Tensor storage = obs.narrow(1, 0, c.channels).contiguous();
      EXPECT_TRUE(same_bits(
          storage.index_select(0, idx.flatten()).view({3, 2 * c.channels, c.height, c.width}),
          ops::gather_augment(storage, idx, std::nullopt, {}, 0, 0)));
    }
    if (HasFailure()) return;
  }
}

// A streamed float32 output with scale and bias is converted as it is
// stored, with 32-byte aligned streaming stores after a head of whole
// floats. An out= whose floats sit at any byte offset (a byte buffer viewed
// as float32 at an odd offset) still gets every value, unstreamed bits.
TEST(AugmentReference, StreamedFloatOutputAtEveryByteOffset) {
  ScopedStreamThreshold threshold(0);
  std::mt19937_64 rng(20261202);
  const Pipeline pipeline = parse_pipeline("op=shift,pad=3");
  for (const at::Tensor& obs : {random_u8({5, 6, 21, 21}, rng), random_f32({5, 6, 21, 21}, rng)}) {
    SCOPED_TRACE(std::string("input ") + c10::toString(obs.scalar_type()));
    const OutputOptions affine{at::kFloat, 1.0 / 255.0, -0.5};
    threshold.set(int64_t{1} << 62);
    const at::Tensor expected = ops::augment(obs, std::nullopt, pipeline, 9, 4, affine);
    threshold.set(0);
    for (int64_t offset = 0; offset < 8; ++offset) {
      const at::Tensor bytes = at::zeros({expected.numel() * 4 + 8}, at::kByte);
      OutputOptions o = affine;
      o.out = at::from_blob(bytes.data_ptr<uint8_t>() + offset, expected.sizes(), at::kFloat);
      ops::augment(obs, std::nullopt, pipeline, 9, 4, o);
      EXPECT_TRUE(same_bits(expected, o.out)) << "byte offset " << offset;
    }
  }
}

// Streamed float32 pipelines that only move pixels with replicated edges:
// planes whose columns are a shift are written straight from the input
// (stream_translated_plane), the others built in scratch. Both equal the
// same call unstreamed (and, for shift and crop, the per-pixel path, which
// covers those and overlay only), into a fresh output, an aligned out= and
// an out= 4 bytes off alignment (the scratch path), at widths that are and
// are not a multiple of 4.
TEST(AugmentReference, StreamedFloatMovesMatchUnstreamed) {
  ScopedStreamThreshold threshold(0);
  std::mt19937_64 rng(20261203);
  const std::vector<std::string> pipelines = {"op=shift,pad=4",
                                              "op=shift,pad=4|op=shift,pad=2",
                                              "op=flip,p=0.5,axis=vertical|op=shift,pad=3",
                                              "op=flip,p=0.5|op=shift,pad=4",
                                              "op=crop,size=16x18|op=shift,pad=2",
                                              "op=shift,pad=30",
                                              "op=rotate,p=0.5|op=shift,pad=1"};
  for (const std::string& text : pipelines) {
    const Pipeline pipeline = parse_pipeline(text);
    const bool per_pixel =
        text.find("rotate") == std::string::npos && text.find("flip") == std::string::npos;
    // 44 = eleven vectors: two groups of four and single vectors inside a row
    for (const std::vector<int64_t>& shape :
         {std::vector<int64_t>{12, 6, 20, 20}, std::vector<int64_t>{5, 3, 21, 21},
          std::vector<int64_t>{4, 3, 44, 44}}) {
      SCOPED_TRACE(text + ", " + std::to_string(shape[2]) + "x" + std::to_string(shape[3]));
      const at::Tensor obs = random_f32(shape, rng);
      for (uint64_t step = 0; step < 6; ++step) {
        threshold.set(int64_t{1} << 62);
        const at::Tensor expected = ops::augment(obs, std::nullopt, pipeline, 5, step);
        if (per_pixel) {
          EXPECT_TRUE(same_bits(reference(obs, std::nullopt, pipeline, 5, step), expected));
        }
        threshold.set(0);
        EXPECT_TRUE(same_bits(expected, ops::augment(obs, std::nullopt, pipeline, 5, step)));
        const at::Tensor flat = at::empty({expected.numel() + 4}, at::kFloat);
        const int64_t aligned = static_cast<int64_t>(
            ((16 - reinterpret_cast<uintptr_t>(flat.data_ptr()) % 16) % 16) / sizeof(float));
        for (int64_t offset : {aligned, aligned + 1}) {
          OutputOptions o;
          o.out = flat.narrow(0, offset, expected.numel()).view(expected.sizes());
          ops::augment(obs, std::nullopt, pipeline, 5, step, o);
          EXPECT_TRUE(same_bits(expected, o.out)) << "step " << step << ", offset " << offset;
        }
      }
      if (HasFailure()) return;
    }
  }
}

// Outputs at every small distance past their input modulo 4 KiB: for some
// shifts each plane's block copy then lies 1 to 31 bytes past its source,
// where copy_plane_bytes leaves memcpy for its vector loop
// (kernels/plane_copy.h); the copy-only path (no ops) at all of them.
TEST(AugmentReference, PlanesAtEveryPageDistanceMatchPerPixelPath) {
  std::mt19937_64 rng(20261202);
  const Pipeline shift = {OpSpec::shift(4)};
  const std::vector<int64_t> shape = {16, 3, 84, 84};
  for (const at::Tensor& obs : {random_f32(shape, rng), random_u8(shape, rng)}) {
    const int64_t elem = obs.element_size();
    const at::Tensor flat = at::empty({obs.numel() + 8192 / elem}, obs.options());
    const uintptr_t in = reinterpret_cast<uintptr_t>(obs.data_ptr());
    const uintptr_t base = reinterpret_cast<uintptr_t>(flat.data_ptr());
    for (int64_t distance = 0; distance < 4096; distance += distance < 64 ? elem : 1000) {
      SCOPED_TRACE(std::string(c10::toString(obs.scalar_type())) + ", out " +
                   std::to_string(distance) + " bytes past obs modulo 4 KiB");
      const int64_t offset = static_cast<int64_t>((in + distance - base) & 4095);
      ASSERT_EQ(offset % elem, 0);
      OutputOptions o;
      o.out = flat.narrow(0, offset / elem, obs.numel()).view(shape);
      ASSERT_EQ((reinterpret_cast<uintptr_t>(o.out.data_ptr()) - in) & 4095, distance);
      for (uint64_t step = 0; step < 4; ++step) {
        ops::augment(obs, std::nullopt, shift, 11, step, o);
        EXPECT_TRUE(same_bits(reference(obs, std::nullopt, shift, 11, step), o.out)) << step;
        ops::augment(obs, std::nullopt, {}, 11, step, o);
        EXPECT_TRUE(same_bits(obs, o.out)) << step;
      }
      if (HasFailure()) return;
    }
  }
}

// A few fixed shapes that stress the CPU loop's run compression: a wide frame
// (long copy runs), pads larger than the frame (only repeat runs), every
// column of a zero-padded frame blanked, a crop to a single column.
TEST(AugmentReference, EdgeGeometries) {
  std::mt19937_64 rng(7);
  const at::Tensor pool_wide = random_u8({3, 1, 2, 300}, rng);
  struct Fixed {
    std::vector<int64_t> shape;
    Pipeline pipeline;
    const at::Tensor* pool;
  };
  const std::vector<Fixed> fixed = {
      {{2, 2, 2, 300},
       {OpSpec::shift(40), OpSpec::overlay(0.4, 0.9, true), OpSpec::shift(3, "zeros")},
       &pool_wide},
      {{3, 1, 4, 4}, {OpSpec::shift(50, "zeros"), OpSpec::shift(50)}, nullptr},
      {{3, 1, 4, 4},
       {OpSpec::shift(50), OpSpec::shift(50, "zeros"), OpSpec::shift(1, "zeros")},
       nullptr},
      {{2, 3, 9, 11}, {OpSpec::crop(9, 1), OpSpec::shift(2)}, nullptr},
      {{2, 3, 9, 11}, {OpSpec::crop(1, 11), OpSpec::shift(2, "zeros")}, nullptr},
      {{1, 1, 1, 1}, {OpSpec::shift(1), OpSpec::crop(1, 1), OpSpec::shift(3, "zeros")}, nullptr},
      {{2, 1, 5, 5}, Pipeline(8, OpSpec::shift(1, "zeros")), nullptr},
      {{2, 1, 5, 5}, Pipeline(8, OpSpec::shift(2)), nullptr},
  };
  for (size_t i = 0; i < fixed.size(); ++i) {
    const Fixed& f = fixed[i];
    SCOPED_TRACE("fixed case " + std::to_string(i) + ": " + format_pipeline(f.pipeline));
    std::optional<at::Tensor> pool;
    if (f.pool) pool = *f.pool;
    for (uint64_t step = 0; step < 8; ++step) {
      for (const at::Tensor& obs : {random_u8(f.shape, rng), random_f32(f.shape, rng)}) {
        EXPECT_TRUE(same_bits(reference(obs, pool, f.pipeline, 3, step),
                              ops::augment(obs, pool, f.pipeline, 3, step)))
            << "step " << step << " " << obs.scalar_type();
      }
    }
  }
}

// ---------------------------------------------------------------- hand-computed cases

// First seed whose draw of `block(seed)` satisfies `want`.
uint64_t find_seed(const std::function<bool(uint64_t)>& want) {
  for (uint64_t seed = 0; seed < 100000; ++seed)
    if (want(seed)) return seed;
  ADD_FAILURE() << "no seed below 100000 gives the wanted draw";
  return 0;
}

constexpr uint64_t kStep = 5;

// DESIGN.md section 3, straight from the formulas: dx = below(r0, 2p+1) - p,
// dy = below(r1, 2p+1) - p, for sample 0 and op index 0.
uint64_t seed_for_shift(int pad, int dx, int dy) {
  return find_seed([&](uint64_t seed) {
    const Philox4 r = draw_block(seed, kStep, 0, 0, 0);
    const uint32_t n = 2u * pad + 1u;
    return static_cast<int>(below(r.v[0], n)) - pad == dx &&
           static_cast<int>(below(r.v[1], n)) - pad == dy;
  });
}

TEST(AugmentByHand, ShiftReplicateAndZeros) {
  const at::Tensor img = u8_from({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  {
    // dx = 1, dy = -1: out[y][x] = in[y - 1][x + 1].
    const uint64_t seed = seed_for_shift(1, 1, -1);
    const PipelineDesc p =
        resolve_pipeline({OpSpec::shift(1)}, geometry_of(img, nullptr), seed, kStep);
    const OpDraw d = draw_op(p, p.ops[0], 0, 0);
    EXPECT_EQ(d.offset_x, 1);
    EXPECT_EQ(d.offset_y, -1);
    EXPECT_EQ(u8_values(ops::shift(img, seed, kStep, 1, "replicate")),
              (std::vector<int>{2, 3, 3, 2, 3, 3, 5, 6, 6}));
    EXPECT_EQ(u8_values(ops::shift(img, seed, kStep, 1, "zeros")),
              (std::vector<int>{0, 0, 0, 2, 3, 0, 5, 6, 0}));
    const at::Tensor f = ops::shift(img.to(at::kFloat), seed, kStep, 1, "zeros");
    EXPECT_EQ(f.scalar_type(), at::kFloat);
    EXPECT_TRUE(
        at::equal(f, at::tensor({0, 0, 0, 2, 3, 0, 5, 6, 0}, at::kFloat).view({1, 1, 3, 3})));
  }
  {
    // dx = -1, dy = 0: out[y][x] = in[y][x - 1].
    const uint64_t seed = seed_for_shift(1, -1, 0);
    EXPECT_EQ(u8_values(ops::shift(img, seed, kStep, 1, "replicate")),
              (std::vector<int>{1, 1, 2, 4, 4, 5, 7, 7, 8}));
    EXPECT_EQ(u8_values(ops::shift(img, seed, kStep, 1, "zeros")),
              (std::vector<int>{0, 1, 2, 0, 4, 5, 0, 7, 8}));
  }
  {
    // pad 2, dx = 2, dy = 2: replicate saturates at the bottom-right pixel.
    const uint64_t seed = seed_for_shift(2, 2, 2);
    EXPECT_EQ(u8_values(ops::shift(img, seed, kStep, 2, "replicate")),
              (std::vector<int>{9, 9, 9, 9, 9, 9, 9, 9, 9}));
    EXPECT_EQ(u8_values(ops::shift(img, seed, kStep, 2, "zeros")),
              (std::vector<int>{9, 0, 0, 0, 0, 0, 0, 0, 0}));
  }
  // pad 0 is the identity.
  EXPECT_TRUE(at::equal(ops::shift(img, 1, 2, 0, "zeros"), img));
}

TEST(AugmentByHand, ShiftDrawsPerSampleAndOpIndex) {
  // Sample b uses counter word b; op_index k uses counter word k.
  const at::Tensor img = u8_from({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  const at::Tensor batch = img.expand({40, 1, 3, 3}).contiguous();
  for (int64_t op_index : {0, 3}) {
    const at::Tensor out = ops::shift(batch, 77, 9, 1, "zeros", op_index);
    for (int64_t b = 0; b < 40; ++b) {
      const Philox4 r =
          draw_block(77, 9, static_cast<uint32_t>(b), static_cast<uint32_t>(op_index), 0);
      const int dx = static_cast<int>(below(r.v[0], 3)) - 1;
      const int dy = static_cast<int>(below(r.v[1], 3)) - 1;
      std::vector<int> expected;
      for (int y = 0; y < 3; ++y)
        for (int x = 0; x < 3; ++x) {
          const int sy = y + dy, sx = x + dx;
          expected.push_back(sy < 0 || sy > 2 || sx < 0 || sx > 2 ? 0 : 1 + sy * 3 + sx);
        }
      EXPECT_EQ(u8_values(out[b]), expected) << "sample " << b << " op_index " << op_index;
    }
  }
}

TEST(AugmentByHand, Crop) {
  // 3x4 image 1..12; crop 2x2 has offsets ox in 0..2, oy in 0..1.
  const at::Tensor img = u8_from({1, 1, 3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  const uint64_t seed = find_seed([](uint64_t s) {
    const Philox4 r = draw_block(s, kStep, 0, 0, 0);
    return below(r.v[0], 3) == 2 && below(r.v[1], 2) == 1;
  });
  const at::Tensor out = ops::crop(img, seed, kStep, 2, 2);
  EXPECT_EQ(out.sizes(), (at::IntArrayRef{1, 1, 2, 2}));
  EXPECT_EQ(u8_values(out), (std::vector<int>{7, 8, 11, 12}));
  // Centre: floor((4 - 2) / 2) = 1, floor((3 - 2) / 2) = 0, whatever the seed.
  for (uint64_t s : {0ull, 1ull, 99ull})
    EXPECT_EQ(u8_values(ops::crop(img, s, kStep, 2, 2, true)), (std::vector<int>{2, 3, 6, 7}));
  // Full size is the identity; a 3x1 column picks column ox.
  EXPECT_TRUE(at::equal(ops::crop(img, seed, kStep, 3, 4), img));
  const uint64_t seed_col =
      find_seed([](uint64_t s) { return below(draw_block(s, kStep, 0, 0, 0).v[0], 4) == 3; });
  EXPECT_EQ(u8_values(ops::crop(img, seed_col, kStep, 3, 1)), (std::vector<int>{4, 8, 12}));
}

TEST(AugmentByHand, CropReachesEveryOffset) {
  // All (Wi-Wo+1) x (Hi-Ho+1) offsets occur, including the last ones.
  const at::Tensor img = u8_from({1, 1, 3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  const at::Tensor batch = img.expand({200, 1, 3, 4}).contiguous();
  const at::Tensor out = ops::crop(batch, 1, 2, 2, 2);
  std::set<int> corners;  // top-left pixel value = 1 + oy * 4 + ox
  for (int64_t b = 0; b < 200; ++b) corners.insert(out[b][0][0][0].item<uint8_t>());
  EXPECT_EQ(corners, (std::set<int>{1, 2, 3, 5, 6, 7}));
}

// Overlay weight and index for sample b, frame s (DESIGN.md section 3).
struct OverlayDraw {
  uint32_t index;
  uint32_t weight;
};
OverlayDraw overlay_draw(uint64_t seed, uint64_t step, uint32_t b, uint32_t k, uint32_t s,
                         uint32_t pool, uint32_t w_lo, uint32_t w_hi) {
  const Philox4 r = draw_block(seed, step, b, k, s);
  return {below(r.v[0], pool), w_lo + below(r.v[1], w_hi - w_lo + 1)};
}

TEST(AugmentByHand, OverlayUint8Formula) {
  // obs [1, 3, 2, 2], pool of 3 images; image 2 is the one drawn.
  const at::Tensor obs = u8_from({1, 3, 2, 2}, {0, 255, 100, 7, 0, 255, 100, 7, 200, 37, 255, 0});
  at::Tensor pool = at::full({3, 3, 2, 2}, 1, at::kByte);
  pool[2].copy_(u8_from({3, 2, 2}, {255, 0, 51, 8, 255, 0, 51, 8, 10, 250, 0, 255}));
  const uint64_t seed =
      find_seed([](uint64_t s) { return overlay_draw(s, kStep, 0, 0, 0, 3, 0, 0).index == 2; });
  // w = 128: (x * 128 + d * 128 + 128) >> 8.
  EXPECT_EQ(u8_values(ops::overlay(obs, pool, seed, kStep, 0.5)),
            (std::vector<int>{128, 128, 76, 8, 128, 128, 76, 8, 105, 144, 128, 128}));
  // w = round(0.3 * 256) = 77: (x * 179 + d * 77 + 128) >> 8.
  EXPECT_EQ(u8_values(ops::overlay(obs, pool, seed, kStep, 0.3)),
            (std::vector<int>{77, 178, 85, 7, 77, 178, 85, 7, 143, 101, 178, 77}));
  // w = 1 (alpha 1/512 rounds up): (x * 255 + d + 128) >> 8.
  EXPECT_EQ(u8_values(ops::overlay(obs, pool, seed, kStep, 1.0 / 512.0)),
            (std::vector<int>{1, 254, 100, 7, 1, 254, 100, 7, 199, 38, 254, 1}));
}

TEST(AugmentByHand, OverlayAlphaZeroAndOne) {
  std::mt19937_64 rng(3);
  const at::Tensor pool = random_u8({5, 3, 9, 7}, rng);
  for (const at::Tensor& obs : {random_u8({4, 6, 9, 7}, rng), random_f32({4, 6, 9, 7}, rng)}) {
    SCOPED_TRACE(c10::toString(obs.scalar_type()));
    // alpha 0: identity, bit for bit.
    EXPECT_TRUE(same_bits(obs, ops::overlay(obs, pool, 8, 1, 0.0)));
    // alpha 1: exactly the drawn distractor, in every frame of the sample.
    const at::Tensor out = ops::overlay(obs, pool, 8, 1, 1.0);
    for (int64_t b = 0; b < 4; ++b) {
      const uint32_t idx = overlay_draw(8, 1, static_cast<uint32_t>(b), 0, 0, 5, 256, 256).index;
      for (int64_t s = 0; s < 2; ++s) {
        EXPECT_TRUE(same_bits(pool[idx].to(obs.scalar_type()), out[b].slice(0, 3 * s, 3 * s + 3)))
            << "sample " << b << " frame " << s;
      }
    }
  }
}

TEST(AugmentByHand, OverlayFloatWithinTolerance) {
  std::mt19937_64 rng(4);
  const at::Tensor pool = random_u8({3, 1, 5, 6}, rng);
  const at::Tensor obs = random_f32({3, 2, 5, 6}, rng);
  const at::Tensor out = ops::overlay(obs, pool, 2, 3, 0.3);
  const double w = 77.0 / 256.0;
  for (int64_t b = 0; b < 3; ++b) {
    const uint32_t idx = overlay_draw(2, 3, static_cast<uint32_t>(b), 0, 0, 3, 77, 77).index;
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t y = 0; y < 5; ++y)
        for (int64_t x = 0; x < 6; ++x) {
          const double expected =
              (1 - w) * obs[b][c][y][x].item<float>() + w * pool[idx][0][y][x].item<uint8_t>();
          EXPECT_NEAR(out[b][c][y][x].item<float>(), expected, 1e-4);
        }
  }
}

TEST(AugmentByHand, OverlayAlphaRange) {
  // Black frames, white distractors: out = (255 * w + 128) >> 8, w in 64..192.
  const int64_t batch = 400;
  const at::Tensor obs = at::zeros({batch, 1, 1, 2}, at::kByte);
  const at::Tensor pool = at::full({2, 1, 1, 2}, 255, at::kByte);
  const at::Tensor out = ops::overlay(obs, pool, 12, 34, 0.25, 0.75);
  std::set<uint32_t> weights;
  for (int64_t b = 0; b < batch; ++b) {
    const uint32_t w = overlay_draw(12, 34, static_cast<uint32_t>(b), 0, 0, 2, 64, 192).weight;
    ASSERT_GE(w, 64u);
    ASSERT_LE(w, 192u);
    weights.insert(w);
    const int expected = static_cast<int>((255 * w + 128) >> 8);
    EXPECT_EQ(u8_values(out[b]), (std::vector<int>{expected, expected})) << "sample " << b;
  }
  EXPECT_GT(weights.size(), 80u);  // the range is actually drawn from
}

TEST(AugmentByHand, OverlayPerFrame) {
  // obs [1, 3 frames * 1 channel, 2, 2] of zeros; pool image i is constant 50 * i.
  const int64_t P = 5;
  at::Tensor pool = at::empty({P, 1, 2, 2}, at::kByte);
  for (int64_t i = 0; i < P; ++i) pool[i].fill_(50 * i);
  const at::Tensor obs = at::zeros({1, 3, 2, 2}, at::kByte);
  // A seed whose three frames draw three different images.
  const uint64_t seed = find_seed([&](uint64_t s) {
    std::set<uint32_t> seen;
    for (uint32_t f = 0; f < 3; ++f)
      seen.insert(overlay_draw(s, kStep, 0, 0, f, P, 256, 256).index);
    return seen.size() == 3;
  });
  const at::Tensor per_frame = ops::overlay(obs, pool, seed, kStep, 1.0, std::nullopt, true);
  const at::Tensor shared = ops::overlay(obs, pool, seed, kStep, 1.0, std::nullopt, false);
  const uint32_t idx0 = overlay_draw(seed, kStep, 0, 0, 0, P, 256, 256).index;
  for (int64_t f = 0; f < 3; ++f) {
    const uint32_t idx =
        overlay_draw(seed, kStep, 0, 0, static_cast<uint32_t>(f), P, 256, 256).index;
    const int v = static_cast<int>(50 * idx);
    EXPECT_EQ(u8_values(per_frame[0][f]), (std::vector<int>{v, v, v, v})) << "frame " << f;
    const int v0 = static_cast<int>(50 * idx0);
    EXPECT_EQ(u8_values(shared[0][f]), (std::vector<int>{v0, v0, v0, v0})) << "frame " << f;
  }
}

TEST(AugmentByHand, OverlayDistinctDrawsWithoutReplacementInBlocksOfThePool) {
  // Pool image i is the 1x2 frame (i % 256, i / 256); alpha 1 shows which image a
  // sample (frame) got.
  for (const int64_t P : {1, 2, 5, 16, 17, 300}) {
    SCOPED_TRACE("P = " + std::to_string(P));
    at::Tensor pool = at::empty({P, 1, 1, 2}, at::kByte);
    for (int64_t i = 0; i < P; ++i) {
      pool[i][0][0][0].fill_(i % 256);
      pool[i][0][0][1].fill_(i / 256);
    }
    const int64_t B = 2 * P + 3;  // two whole blocks and part of a third
    const at::Tensor obs = at::zeros({B, 2, 1, 2}, at::kByte);  // 2 frames of 1 channel
    for (bool per_frame : {false, true}) {
      const at::Tensor out =
          ops::overlay(obs, pool, 11, kStep, 1.0, std::nullopt, per_frame, 0, {}, true)
              .to(at::kLong);
      const at::Tensor image = out.select(3, 0) + 256 * out.select(3, 1);  // [B, 2, 1]
      for (int64_t frame = 0; frame < 2; ++frame) {
        if (!per_frame) EXPECT_TRUE(image.select(1, frame).equal(image.select(1, 0)));
        for (int64_t block = 0; block * P < B; ++block) {
          std::set<int64_t> seen;
          const int64_t end = std::min(B, (block + 1) * P);
          for (int64_t b = block * P; b < end; ++b) seen.insert(image[b][frame][0].item<int64_t>());
          EXPECT_EQ(static_cast<int64_t>(seen.size()), end - block * P)
              << "block " << block << " frame " << frame << (per_frame ? " per frame" : "");
          EXPECT_GE(*seen.begin(), 0);
          EXPECT_LT(*seen.rbegin(), P);
        }
      }
    }
  }
  // Not the identity: the first block's order differs from 0..P-1, and between steps.
  at::Tensor pool = at::arange(64, at::kByte).view({64, 1, 1, 1});
  const at::Tensor obs = at::zeros({64, 1, 1, 1}, at::kByte);
  const at::Tensor a = ops::overlay(obs, pool, 3, 1, 1.0, std::nullopt, false, 0, {}, true);
  const at::Tensor b = ops::overlay(obs, pool, 3, 2, 1.0, std::nullopt, false, 0, {}, true);
  EXPECT_FALSE(a.flatten().equal(pool.flatten()));
  EXPECT_FALSE(a.equal(b));
  EXPECT_TRUE(std::get<0>(a.flatten().sort()).equal(pool.flatten()));
}

TEST(AugmentByHand, OverlayAfterShiftReadsThePoolAtItsStage) {
  // shift then overlay with alpha 1: the distractor is not shifted; overlay
  // then shift: the distractor moves with the frame.
  const at::Tensor img = u8_from({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  const at::Tensor pool = u8_from({1, 1, 3, 3}, {11, 12, 13, 14, 15, 16, 17, 18, 19});
  const uint64_t seed = seed_for_shift(1, 1, -1);
  EXPECT_EQ(
      u8_values(ops::augment(img, pool, {OpSpec::shift(1), OpSpec::overlay(1.0)}, seed, kStep)),
      (std::vector<int>{11, 12, 13, 14, 15, 16, 17, 18, 19}));
  EXPECT_EQ(
      u8_values(ops::augment(
          img, pool, {OpSpec::overlay(1.0), OpSpec::shift(1, "zeros").at_index(0)}, seed, kStep)),
      (std::vector<int>{0, 0, 0, 12, 13, 0, 15, 16, 0}));
  // A zero-padded shift after the overlay blanks the distractor too; the
  // next overlay blends over that zero: (0 * 128 + 11..19 * 128 + 128) >> 8.
  const Pipeline p = {OpSpec::overlay(1.0), OpSpec::shift(1, "zeros").at_index(0),
                      OpSpec::overlay(0.5).at_index(1)};
  EXPECT_EQ(u8_values(ops::augment(img, pool, p, seed, kStep)),
            (std::vector<int>{6, 6, 7, 13, 14, 8, 16, 17, 10}));
}

// ---------------------------------------------------------------- API behaviour

TEST(AugmentApi, InPlaceEqualsOutOfPlace) {
  std::mt19937_64 rng(5);
  const at::Tensor pool = random_u8({4, 3, 20, 18}, rng);
  const Pipeline p = {OpSpec::shift(4), OpSpec::overlay(0.5, 0.8, true), OpSpec::shift(2, "zeros")};
  for (const at::Tensor& obs : {random_u8({6, 9, 20, 18}, rng), random_f32({6, 9, 20, 18}, rng)}) {
    const at::Tensor expected = ops::augment(obs, pool, p, 1, 2);
    at::Tensor target = obs.clone();
    const void* data = target.data_ptr();
    ops::augment_(target, pool, p, 1, 2);
    EXPECT_EQ(target.data_ptr(), data);
    EXPECT_TRUE(same_bits(expected, target));
    // A view into a larger tensor: only the view changes.
    at::Tensor base = at::zeros({6, 9, 20, 25}, obs.options());
    at::Tensor view = base.narrow(3, 3, 18);
    view.copy_(obs);
    ops::augment_(view, pool, p, 1, 2);
    EXPECT_TRUE(same_bits(expected, view));
    EXPECT_EQ(base.narrow(3, 0, 3).count_nonzero().item<int64_t>(), 0);
    EXPECT_EQ(base.narrow(3, 21, 4).count_nonzero().item<int64_t>(), 0);
  }
}

TEST(AugmentApi, FloatOutputIsUint8ResultTimesScalePlusBias) {
  std::mt19937_64 rng(6);
  const at::Tensor pool = random_u8({4, 3, 12, 12}, rng);
  const at::Tensor obs = random_u8({3, 6, 12, 12}, rng);
  const Pipeline p = {OpSpec::overlay(0.5), OpSpec::shift(2)};
  OutputOptions drq;
  drq.dtype = at::kFloat;
  drq.scale = 1.0 / 255.0;
  drq.bias = -0.5;
  const at::Tensor u8 = ops::augment(obs, pool, p, 4, 4);
  const at::Tensor f32 = ops::augment(obs, pool, p, 4, 4, drq);
  ASSERT_EQ(f32.scalar_type(), at::kFloat);
  const uint8_t* v = u8.data_ptr<uint8_t>();
  const float* out = f32.data_ptr<float>();
  const float scale = static_cast<float>(1.0 / 255.0);
  for (int64_t i = 0; i < u8.numel(); ++i) {
    const float expected = static_cast<float>(v[i]) * scale + -0.5f;
    ASSERT_EQ(out[i], expected) << "element " << i;
  }
  // The default output dtype is the input's.
  EXPECT_EQ(ops::augment(obs.to(at::kFloat), pool, p, 4, 4).scalar_type(), at::kFloat);
  EXPECT_EQ(u8.scalar_type(), at::kByte);
}

TEST(AugmentApi, SingleOpWrappersEqualAugment) {
  std::mt19937_64 rng(8);
  const at::Tensor pool = random_u8({3, 3, 10, 12}, rng);
  const at::Tensor obs = random_u8({5, 6, 10, 12}, rng);
  EXPECT_TRUE(
      same_bits(ops::augment(obs, std::nullopt, {OpSpec::shift(3, "zeros").at_index(2)}, 1, 2),
                ops::shift(obs, 1, 2, 3, "zeros", 2)));
  EXPECT_TRUE(same_bits(ops::augment(obs, std::nullopt, {OpSpec::crop(7, 9).at_index(4)}, 1, 2),
                        ops::crop(obs, 1, 2, 7, 9, false, 4)));
  EXPECT_TRUE(
      same_bits(ops::augment(obs, pool, {OpSpec::overlay(0.2, 0.6, true).at_index(1)}, 1, 2),
                ops::overlay(obs, pool, 1, 2, 0.2, 0.6, true, 1)));
}

TEST(AugmentApi, DrawsDependOnSeedAndStepOnly) {
  std::mt19937_64 rng(9);
  const at::Tensor obs = random_u8({16, 3, 16, 16}, rng);
  const Pipeline p = {OpSpec::shift(4)};
  EXPECT_TRUE(at::equal(ops::augment(obs, std::nullopt, p, 1, 2),
                        ops::augment(obs, std::nullopt, p, 1, 2)));
  EXPECT_FALSE(at::equal(ops::augment(obs, std::nullopt, p, 1, 2),
                         ops::augment(obs, std::nullopt, p, 1, 3)));
  EXPECT_FALSE(at::equal(ops::augment(obs, std::nullopt, p, 1, 2),
                         ops::augment(obs, std::nullopt, p, 2, 2)));
}

TEST(AugmentApi, OutputShapeAndEmptyBatch) {
  const at::Tensor obs = at::zeros({0, 9, 84, 84}, at::kByte);
  const Pipeline p = {OpSpec::shift(4), OpSpec::crop(80, 70), OpSpec::crop(64, 64)};
  EXPECT_EQ(ops::output_shape(obs, p), (std::vector<int64_t>{0, 9, 64, 64}));
  const at::Tensor out = ops::augment(obs, std::nullopt, p, 0, 0);
  EXPECT_EQ(out.sizes(), (at::IntArrayRef{0, 9, 64, 64}));
  at::Tensor empty = at::zeros({0, 9, 84, 84}, at::kFloat);
  EXPECT_NO_THROW(ops::augment_(empty, std::nullopt, {OpSpec::shift(4)}, 0, 0));
}

// The call checks run on tensors without data (meta here, FakeTensors in
// the fake kernels) and refuse what the calls refuse, with their messages.
TEST(AugmentApi, CallChecksNeedNoDataAndMatchTheCalls) {
  const auto meta = [](at::IntArrayRef shape, at::ScalarType dtype = at::kByte) {
    return at::empty(shape, at::TensorOptions().dtype(dtype).device(at::kMeta));
  };
  const ops::Devices any = ops::Devices::kOrMeta;
  const Pipeline crop = {OpSpec::shift(4), OpSpec::crop(64, 64)};
  EXPECT_EQ(ops::check_augment_call(meta({2, 9, 84, 84}), std::nullopt, crop, {}, any),
            (std::vector<int64_t>{2, 9, 64, 64}));
  const at::Tensor indices = meta({2, 3}, at::kLong);
  EXPECT_EQ(ops::check_gather_call(meta({10, 3, 84, 84}), indices, std::nullopt, crop, {},
                                   std::nullopt, any),
            (std::vector<int64_t>{2, 9, 64, 64}));
  // The same inputs on the CPU: the call and its check refuse alike.
  const auto same_refusal = [](const std::function<void()>& call,
                               const std::function<void()>& check) {
    std::string called;
    try {
      call();
    } catch (const c10::Error& e) {
      called = e.what_without_backtrace();
    }
    EXPECT_FALSE(called.empty());
    try {
      check();
      ADD_FAILURE() << "the check passed what the call refused: " << called;
    } catch (const c10::Error& e) {
      EXPECT_EQ(e.what_without_backtrace(), called);
    }
  };
  const at::Tensor obs = at::zeros({2, 8, 16, 16}, at::kByte);
  const Pipeline gray = {OpSpec(OpKind::kGrayscale)};
  same_refusal([&] { ops::augment(obs, std::nullopt, gray, 0, 0); },
               [&] { ops::check_augment_call(obs, std::nullopt, gray, {}); });
  const ops::OutputOptions into_obs{std::nullopt, 1.0, 0.0, obs};
  same_refusal([&] { ops::augment(obs, std::nullopt, {OpSpec::shift(4)}, 0, 0, into_obs); },
               [&] { ops::check_augment_call(obs, std::nullopt, {OpSpec::shift(4)}, into_obs); });
  same_refusal([&] { ops::augment_(obs, std::nullopt, crop, 0, 0); },
               [&] { ops::check_augment_inplace_call(obs, std::nullopt, crop); });
  const at::Tensor storage = at::zeros({5, 1, 16, 16}, at::kByte);
  const at::Tensor pool = at::zeros({3, 3, 16, 16}, at::kByte);
  const Pipeline overlay = {OpSpec::overlay(0.5)};
  const at::Tensor rows = at::zeros({2, 3}, at::kLong);
  same_refusal([&] { ops::gather_augment(storage, rows, pool, overlay, 0, 0); },
               [&] { ops::check_gather_call(storage, rows, pool, overlay, {}); });
}

TEST(AugmentApi, PoolIsIgnoredWithoutOverlay) {
  // A pool of any size may be passed when no op overlays.
  std::mt19937_64 rng(10);
  const at::Tensor obs = random_u8({2, 6, 8, 8}, rng);
  const at::Tensor pool = random_u8({3, 3, 5, 5}, rng);
  EXPECT_TRUE(same_bits(ops::augment(obs, std::nullopt, {OpSpec::shift(2)}, 0, 0),
                        ops::augment(obs, pool, {OpSpec::shift(2)}, 0, 0)));
}

// ---------------------------------------------------------------- errors

using testing::error_of;
using testing::expect_mentions;

TEST(AugmentErrors, WrongObsDtype) {
  const at::Tensor obs = at::zeros({2, 3, 8, 8}, at::kLong);
  expect_mentions(error_of<c10::TypeError>([&] { ops::shift(obs, 0, 0); }),
                  {"obs", "uint8", "float32", "got int64 [2, 3, 8, 8] on cpu"});
  expect_mentions(error_of<c10::TypeError>([&] { ops::shift(obs.to(at::kDouble), 0, 0); }),
                  {"uint8 or float32", "got float64"});
}

TEST(AugmentErrors, WrongObsDims) {
  const at::Tensor obs = at::zeros({3, 8, 8}, at::kByte);
  expect_mentions(error_of<c10::ValueError>([&] { ops::shift(obs, 0, 0); }),
                  {"4 dims", "[B, S*C, H, W]", "[3, 8, 8]"});
  at::Tensor obs5 = at::zeros({1, 2, 3, 8, 8}, at::kByte);
  expect_mentions(error_of<c10::ValueError>(
                      [&] { ops::augment_(obs5, std::nullopt, {OpSpec::shift(1)}, 0, 0); }),
                  {"4 dims"});
}

TEST(AugmentErrors, ChannelsNotAMultipleOfPoolChannels) {
  const at::Tensor obs = at::zeros({2, 4, 8, 8}, at::kByte);
  const at::Tensor pool = at::zeros({5, 3, 8, 8}, at::kByte);
  expect_mentions(error_of<c10::ValueError>([&] { ops::overlay(obs, pool, 0, 0); }),
                  {"obs channels (4)", "multiple", "C = 3"});
}

TEST(AugmentErrors, PoolOfTheWrongSize) {
  const at::Tensor obs = at::zeros({2, 3, 10, 12}, at::kByte);
  const at::Tensor pool = at::zeros({5, 3, 8, 8}, at::kByte);
  expect_mentions(error_of<c10::ValueError>([&] { ops::overlay(obs, pool, 0, 0); }),
                  {"overlay", "8x8", "10x12", "resize"});
  // After a crop the overlay sees the crop's size.
  expect_mentions(error_of<c10::ValueError>([&] {
                    ops::augment(obs, pool, {OpSpec::crop(9, 9), OpSpec::overlay(0.5)}, 0, 0);
                  }),
                  {"op 1", "8x8", "9x9"});
}

TEST(AugmentErrors, BadPool) {
  const at::Tensor obs = at::zeros({2, 3, 8, 8}, at::kByte);
  expect_mentions(error_of<c10::TypeError>([&] {
                    ops::overlay(obs, at::zeros({5, 3, 8, 8}, at::kFloat), 0, 0);
                  }),
                  {"pool", "uint8", "got float32"});
  expect_mentions(error_of<c10::ValueError>([&] {
                    ops::overlay(obs, at::zeros({3, 8, 8}, at::kByte), 0, 0);
                  }),
                  {"pool", "[P, C, H, W]"});
  // A pool with P = 0 images was passed: the message must not claim there is no pool.
  const std::string empty = error_of<c10::ValueError>([&] {
    ops::overlay(obs, at::zeros({0, 3, 8, 8}, at::kByte), 0, 0);
  });
  expect_mentions(empty, {"pool", "P >= 1", "empty"});
  EXPECT_EQ(empty.find("no pool"), std::string::npos) << empty;
}

TEST(AugmentErrors, OverlayWithoutPool) {
  const at::Tensor obs = at::zeros({2, 3, 8, 8}, at::kByte);
  expect_mentions(error_of<c10::ValueError>([&] {
                    ops::augment(obs, std::nullopt, {OpSpec::shift(1), OpSpec::overlay(0.5)}, 0, 0);
                  }),
                  {"overlay", "pool", "None"});
  expect_mentions(error_of<c10::ValueError>(
                      [&] { ops::augment(obs, at::Tensor(), {OpSpec::overlay(0.5)}, 0, 0); }),
                  {"pool"});
}

TEST(AugmentErrors, InPlaceShrinkingCrop) {
  at::Tensor obs = at::zeros({2, 3, 8, 8}, at::kByte);
  expect_mentions(error_of<c10::ValueError>([&] {
                    ops::augment_(obs, std::nullopt, {OpSpec::shift(1), OpSpec::crop(6, 7)}, 0, 0);
                  }),
                  {"in-place", "8x8", "6x7", "out-of-place"});
  // A full-size crop keeps the size and is allowed.
  EXPECT_NO_THROW(ops::augment_(obs, std::nullopt, {OpSpec::crop(8, 8)}, 0, 0));
}

TEST(AugmentErrors, BadOutputOptions) {
  const at::Tensor obs = at::zeros({2, 3, 8, 8}, at::kByte);
  OutputOptions o;
  o.dtype = at::kLong;
  expect_mentions(error_of<c10::TypeError>([&] { ops::augment(obs, std::nullopt, {}, 0, 0, o); }),
                  {"out_dtype", "uint8 or float32", "Long"});
  o.dtype = at::kByte;
  expect_mentions(error_of<c10::TypeError>(
                      [&] { ops::augment(obs.to(at::kFloat), std::nullopt, {}, 0, 0, o); }),
                  {"out_dtype uint8", "float32"});
  o.scale = 2.0;
  expect_mentions(error_of<c10::ValueError>([&] { ops::augment(obs, std::nullopt, {}, 0, 0, o); }),
                  {"scale", "float32"});
  o.dtype = at::kFloat;
  o.scale = std::nan("");
  expect_mentions(error_of<c10::ValueError>([&] { ops::augment(obs, std::nullopt, {}, 0, 0, o); }),
                  {"scale", "finite"});
}

// out=: the result lands in the caller's tensor, equal to the fresh result.
TEST(AugmentOut, WritesTheSameResultIntoTheCallersTensor) {
  std::mt19937_64 rng(41);
  const at::Tensor obs = random_u8({3, 6, 10, 12}, rng);
  const at::Tensor pool = random_u8({4, 3, 10, 12}, rng);
  const Pipeline p = {OpSpec::shift(2), OpSpec::overlay(0.5), OpSpec::crop(8, 9)};
  OutputOptions o;
  o.out = at::full({3, 6, 8, 9}, 7, at::kByte);
  const at::Tensor got = ops::augment(obs, pool, p, 5, 6, o);
  EXPECT_EQ(got.data_ptr(), o.out.data_ptr());
  EXPECT_TRUE(at::equal(got, ops::augment(obs, pool, p, 5, 6)));
  // float32 output with scale and bias
  OutputOptions f{at::kFloat, 1.0 / 255, -0.5, at::empty({3, 6, 8, 9}, at::kFloat)};
  ops::augment(obs, pool, p, 5, 6, f);
  EXPECT_TRUE(at::equal(f.out, ops::augment(obs, pool, p, 5, 6, {at::kFloat, 1.0 / 255, -0.5})));
  // gather_augment and the single ops
  const at::Tensor storage = random_u8({7, 3, 10, 12}, rng);
  const at::Tensor idx = at::tensor(std::vector<int64_t>{0, 6, 2, 2, 5, 1}, at::kLong).view({3, 2});
  OutputOptions g;
  g.out = at::empty({3, 6, 8, 9}, at::kByte);
  ops::gather_augment(storage, idx, pool, p, 5, 6, g);
  EXPECT_TRUE(at::equal(g.out, ops::gather_augment(storage, idx, pool, p, 5, 6)));
  const at::Tensor shifted = at::empty_like(obs);
  EXPECT_EQ(ops::shift(obs, 1, 2, 3, "zeros", 1, shifted).data_ptr(), shifted.data_ptr());
  EXPECT_TRUE(at::equal(shifted, ops::shift(obs, 1, 2, 3, "zeros", 1)));
}

TEST(AugmentOut, RefusesAnOutThatDoesNotFitBeforeWriting) {
  std::mt19937_64 rng(42);
  const at::Tensor obs = random_u8({2, 6, 8, 8}, rng);
  const at::Tensor pool = random_u8({3, 3, 8, 8}, rng);
  const Pipeline p = {OpSpec::shift(1), OpSpec::overlay(0.5)};
  const auto run = [&](const at::Tensor& out) {
    OutputOptions o;
    o.out = out;
    ops::augment(obs, pool, p, 0, 0, o);
  };
  const at::Tensor untouched = at::full({2, 6, 8, 8}, 9.0f, at::kFloat);
  expect_mentions(error_of<c10::TypeError>([&] { run(untouched); }),
                  {"out must be uint8 [2, 6, 8, 8] on cpu", "dtype", "got float32"});
  EXPECT_TRUE(at::equal(untouched, at::full({2, 6, 8, 8}, 9.0f, at::kFloat)));
  expect_mentions(error_of<c10::ValueError>([&] {
                    run(at::empty({2, 6, 8, 7}, at::kByte));
                  }),
                  {"out must be uint8 [2, 6, 8, 8]", "shape", "got uint8 [2, 6, 8, 7]"});
  expect_mentions(
      error_of<c10::ValueError>([&] {
        run(at::empty({2, 6, 8, 8}, at::TensorOptions().dtype(at::kByte).device(at::kMeta)));
      }),
      {"out must be uint8 [2, 6, 8, 8] on cpu", "device", "on meta"});
  expect_mentions(error_of<c10::ValueError>([&] {
                    run(at::empty({2, 6, 8, 16}, at::kByte).slice(3, 0, 8));
                  }),
                  {"contiguous", "strides"});
  expect_mentions(error_of<c10::ValueError>([&] { run(obs); }),
                  {"shares memory with obs", "in-place", "augment_"});
  const at::Tensor storage = random_u8({4, 3, 8, 8}, rng);
  const at::Tensor idx = at::zeros({2, 2}, at::kLong);
  OutputOptions g;
  g.out = storage.view({2, 6, 8, 8});
  expect_mentions(
      error_of<c10::ValueError>([&] { ops::gather_augment(storage, idx, pool, p, 0, 0, g); }),
      {"shares memory with storage", "separate tensor"});
}

// OutputRecycler: a storage is handed out again only once its tensor is gone
// and nothing else (a view) refers to it; capacity and byte cap push the
// oldest out.
TEST(OutputRecycler, HandsOutOnlyReleasedStorage) {
  const at::TensorOptions f32 = at::TensorOptions().dtype(at::kFloat);
  ops::OutputRecycler r(2, 1 << 20);
  at::Tensor a = r.take({2, 3}, f32);
  EXPECT_TRUE(a.is_contiguous());
  EXPECT_EQ(a.sizes(), at::IntArrayRef({2, 3}));
  at::Tensor b = r.take({2, 3}, f32);
  EXPECT_NE(a.data_ptr(), b.data_ptr());  // a is held
  const void* a_ptr = a.data_ptr();
  const at::Tensor view = a.slice(0, 0, 1);
  a.reset();
  const size_t holders = view.storage().use_count();  // the view (and its base) and the recycler
  at::Tensor e = r.take({2, 3}, f32);
  EXPECT_NE(e.data_ptr(), a_ptr);                      // a view still holds a's storage
  EXPECT_EQ(view.storage().use_count(), holders - 1);  // the recycler let go: capacity 2
  const void* b_ptr = b.data_ptr();
  b.reset();
  at::Tensor c = r.take({3, 2}, f32);  // the same bytes, another shape: b's storage
  EXPECT_EQ(c.data_ptr(), b_ptr);
  EXPECT_EQ(c.sizes(), at::IntArrayRef({3, 2}));
  c.reset();
  const at::Tensor d = r.take({6}, at::TensorOptions().dtype(at::kInt));  // 24 bytes too
  EXPECT_EQ(d.data_ptr(), b_ptr);
  EXPECT_EQ(d.scalar_type(), at::kInt);
  // more than max_bytes in all: the oldest goes
  ops::OutputRecycler small(4, 64);
  const at::Tensor big1 = small.take({16}, f32);  // 64 bytes
  EXPECT_EQ(big1.storage().use_count(), 2);       // big1 and the recycler
  const at::Tensor big2 = small.take({16}, f32);
  EXPECT_EQ(big1.storage().use_count(), 1);
  EXPECT_EQ(big2.storage().use_count(), 2);
}

TEST(AugmentErrors, BadOpsThroughTheTensorApi) {
  const at::Tensor obs = at::zeros({2, 3, 8, 8}, at::kByte);
  expect_mentions(error_of<c10::ValueError>([&] { ops::crop(obs, 0, 0, 9, 8); }),
                  {"crop", "9x8", "8x8"});
  expect_mentions(error_of<c10::ValueError>([&] { ops::shift(obs, 0, 0, 4, "reflect"); }),
                  {"padding", "reflect"});
  expect_mentions(error_of<c10::ValueError>([&] { ops::shift(obs, 0, 0, -1); }), {"pad", "-1"});
  expect_mentions(error_of<c10::ValueError>([&] {
                    ops::overlay(obs, at::zeros({1, 3, 8, 8}, at::kByte), 0, 0, 1.5);
                  }),
                  {"alpha", "1.5"});
}

// ---------------------------------------------------------------- CUDA

// The CUDA kernel against the CPU backend, bit for bit, on random pipelines
// (including planes too large to stage in shared memory, which take the
// per-pixel trace path and the copy-based in-place path).
TEST(AugmentCuda, MatchesCpuBitForBit) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 120; ++trial) {
    Case c = random_case(rng);
    if (trial % 10 == 0 || trial % 10 == 5) {
      // trial % 10 == 0: planes too large to stage (traces in shared memory,
      // input from global memory, in place through a copy).
      // trial % 10 == 5: rows + columns too many to keep their traces in
      // shared memory (traced per pixel); the uint8 plane is still staged.
      const bool tall = trial % 10 == 0;
      c = Case{};
      c.batch = 3;
      c.stack = 2;
      c.channels = tall ? 3 : 1;
      c.height = tall ? 260 : 32;
      c.width = tall ? 250 : 1400;
      c.seed = static_cast<uint64_t>(trial);
      c.step = 1;
      c.pool_images = 4;
      c.pool_h = c.height;
      c.pool_w = c.width;
      c.pipeline = {OpSpec::shift(8, tall ? "replicate" : "zeros"), OpSpec::overlay(0.3, 0.7, true),
                    OpSpec::shift(3, tall ? "zeros" : "replicate")};
      c.keeps_size = true;
    }
    SCOPED_TRACE("trial " + std::to_string(trial) + ": " + c.describe());
    std::optional<at::Tensor> pool, pool_cuda;
    if (c.pool_images > 0) {
      pool = random_u8({c.pool_images, c.channels, c.pool_h, c.pool_w}, rng);
      pool_cuda = pool->to(at::kCUDA);
    }
    const std::vector<int64_t> shape = {c.batch, c.stack * c.channels, c.height, c.width};
    const OutputOptions affine{at::kFloat, 1.0 / 255.0, -0.5};
    for (const at::Tensor& obs : {random_u8(shape, rng), random_f32(shape, rng)}) {
      SCOPED_TRACE(c10::toString(obs.scalar_type()));
      const at::Tensor obs_cuda = obs.to(at::kCUDA);
      const at::Tensor cpu = ops::augment(obs, pool, c.pipeline, c.seed, c.step);
      EXPECT_TRUE(
          same_bits(cpu, ops::augment(obs_cuda, pool_cuda, c.pipeline, c.seed, c.step).cpu()));
      EXPECT_TRUE(
          same_bits(ops::augment(obs, pool, c.pipeline, c.seed, c.step, affine),
                    ops::augment(obs_cuda, pool_cuda, c.pipeline, c.seed, c.step, affine).cpu()));
      EXPECT_TRUE(same_bits(
          cpu, ops::augment(non_contiguous(obs_cuda, trial), pool_cuda, c.pipeline, c.seed, c.step)
                   .cpu()))
          << "non-contiguous";
      if (c.keeps_size) {
        at::Tensor target = obs_cuda.clone();
        ops::augment_(target, pool_cuda, c.pipeline, c.seed, c.step);
        EXPECT_TRUE(same_bits(cpu, target.cpu())) << "in place";
        at::Tensor strided = non_contiguous(obs_cuda, trial + 1);
        ops::augment_(strided, pool_cuda, c.pipeline, c.seed, c.step);
        EXPECT_TRUE(same_bits(cpu, strided.cpu())) << "in place, non-contiguous";
      }
    }
    if (HasFailure()) return;
  }
}

TEST(AugmentCuda, PoolOnAnotherDeviceIsAnError) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const at::Tensor obs = at::zeros({2, 3, 8, 8}, at::kByte).to(at::kCUDA);
  const at::Tensor pool = at::zeros({2, 3, 8, 8}, at::kByte);
  expect_mentions(error_of<c10::ValueError>([&] { ops::overlay(obs, pool, 0, 0); }),
                  {"pool", "cuda", "cpu"});
}

}  // namespace
}  // namespace obsaug

namespace obsaug {
namespace {

// The CPU traces a whole axis op by op; every field must equal the
// coordinate-by-coordinate trace_axis (what CUDA and the reference use), over
// random chains of every geometric op, quarter turns and zero padding included.
TEST(TraceAxisAll, EqualsTraceAxisForEveryCoordinate) {
  const std::vector<std::string> steps = {
      "op=shift,pad=3",          "op=shift,pad=5,padding=zeros", "op=crop,size=18",
      "op=flip,p=0.6",           "op=flip,p=0.6,axis=vertical",  "op=rotate,p=0.8",
      "op=translate,size=23x25", "op=cutout,min=2,max=9",        "op=overlay,alpha=0.5",
      "op=grayscale,p=0.5"};
  std::mt19937_64 rng(77);
  int zeroed = 0, swapped = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string text;
    const int n_ops = 1 + static_cast<int>(rng() % kMaxOps);
    bool resized = false;  // rotate needs a square frame: no rotate after crop or translate
    for (int k = 0; k < n_ops; ++k) {
      std::string step = steps[rng() % steps.size()];
      const bool changes_size =
          step.find("crop") != std::string::npos || step.find("translate") != std::string::npos;
      if ((resized && (changes_size || step.find("rotate") != std::string::npos)) ||
          step.find("overlay") != std::string::npos)
        step = "op=shift,pad=2,padding=zeros";
      resized = resized || changes_size;
      text += (k ? "|" : "") + step;
    }
    SCOPED_TRACE(text);
    const PipelineDesc p =
        resolve_pipeline(parse_pipeline(text), FrameGeometry{20, 20, 3, 0, 0, 0}, rng(), rng());
    for (uint32_t sample = 0; sample < 8; ++sample) {
      OpDraw draws[kMaxOps];
      draw_pipeline(p, sample, 0, draws);
      for (int axis = 0; axis < 2; ++axis) {
        const int32_t n = axis == 0 ? p.out_h : p.out_w;
        std::vector<AxisTrace> all(n);
        trace_axis_all(p, draws, axis, n, all.data());
        for (int32_t i = 0; i < n; ++i) {
          const AxisTrace one = trace_axis(p, draws, axis, i);
          ASSERT_EQ(all[i].source, one.source) << "axis " << axis << " coordinate " << i;
          ASSERT_EQ(all[i].zero_op, one.zero_op) << "axis " << axis << " coordinate " << i;
          ASSERT_EQ(all[i].swapped, one.swapped) << "axis " << axis << " coordinate " << i;
          ASSERT_EQ(all[i].source_swapped, one.source_swapped)
              << "axis " << axis << " coordinate " << i;
          for (int k = 0; k < p.n_ops; ++k)
            ASSERT_EQ(all[i].at_op[k], one.at_op[k]) << "axis " << axis << " op " << k;
          zeroed += one.zero_op >= 0;
          swapped += one.source_swapped;
        }
      }
    }
  }
  EXPECT_GT(zeroed, 1000);
  EXPECT_GT(swapped, 1000);
}

// The vectorized uint8 blends (AVX2, AVX-512; pavgb at w = 128) are
// algebraic rewrites of blend(); check each set the CPU has on every
// (x, d, w), with the destination at byte (7w + w / 64) % 64 of a cache line
// (where the AVX-512 loop's masked head ends; w = 0, 128 and 256 included),
// and at lengths 65536 + extra, extra = w % 48 and 31 (AVX2: the 32-byte
// body, the 16-byte step and the scalar tail; AVX-512: masked tails of every
// length), w % 64 and 63 (AVX-512: planes that are only a masked head). The
// bytes around both spans hold other values, so a write past n changes them,
// and the distractor's span ends its allocation (a read past n is ASan's).
// The set is an argument, not the setting: one run (not baseline_loops.*'s
// too) covers every set.
TEST(BlendBytes, MatchesBlendForEveryInput) {
  const char* setting = std::getenv("OBSAUG_CPU_LOOPS");
  if (setting != nullptr && setting[0] != '\0')
    GTEST_SKIP() << "the run without the setting covers it";
  constexpr int64_t kPairs = 65536;
  constexpr uint8_t kAround = 0xA5;  // the destination's bytes outside its span
  std::vector<uint8_t> x(kPairs + 64), d(kPairs + 64), v, dd;
  for (int64_t i = 0; i < kPairs + 64; ++i) {
    x[i] = static_cast<uint8_t>(i & 255);
    d[i] = static_cast<uint8_t>((i >> 8) & 255);
  }
  for (const CpuLoops loops : {CpuLoops::kBaseline, CpuLoops::kAvx2, CpuLoops::kAvx512}) {
    if (loops > widest_cpu_loops()) {
      uint8_t byte = 0;
      EXPECT_THROW(blend_bytes(&byte, &byte, 1, 0, loops), c10::Error) << cpu_loops_name(loops);
      continue;
    }
    for (uint32_t w = 0; w <= kWeightOne; ++w) {
      for (const int64_t n : {kPairs + w % 48, kPairs + 31, int64_t{w % 64}, int64_t{63}}) {
        v.assign(x.size() + 128, kAround);
        const int64_t offset =
            (64 - reinterpret_cast<uintptr_t>(v.data()) % 64 + w * 7 + w / 64) % 64;
        std::copy(x.begin(), x.begin() + n, v.begin() + offset);
        // the distractor's span: the last n bytes of its allocation, after other values
        const int64_t d_offset = (offset + w) % 64;
        dd.assign(d_offset, static_cast<uint8_t>(~kAround));
        dd.insert(dd.end(), d.begin(), d.begin() + n);
        dd.shrink_to_fit();
        blend_bytes(v.data() + offset, dd.data() + d_offset, n, w, loops);
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(v[offset + i], blend(x[i], d[i], w))
              << cpu_loops_name(loops) << " x=" << int(x[i]) << " d=" << int(d[i]) << " w=" << w
              << " n=" << n;
        }
        for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i) {
          if (i >= offset && i < offset + n) continue;
          ASSERT_EQ(v[i], kAround)
              << cpu_loops_name(loops) << " wrote outside its " << n << " bytes, w=" << w;
        }
      }
    }
  }
}

// The vectorized uint8 grayscale (AVX2 where the CPU has it, two pmaddwd
// per pixel) against grayscale_value() on every (r, g, b), at every offset
// mod 32 so both the vector body and the scalar tail run.
TEST(GrayBytes, MatchesGrayscaleValueForEveryInput) {
  std::vector<uint8_t> r(65536 + 31), g(65536 + 31), b(65536 + 31);
  for (int blue = 0; blue < 256; ++blue) {
    const int64_t offset = blue % 32;
    for (int i = 0; i < 65536; ++i) {
      r[offset + i] = static_cast<uint8_t>(i & 255);
      g[offset + i] = static_cast<uint8_t>(i >> 8);
      b[offset + i] = static_cast<uint8_t>(blue);
    }
    gray_bytes(r.data() + offset, g.data() + offset, b.data() + offset, 65536);
    for (int i = 0; i < 65536; ++i) {
      const uint8_t want = grayscale_value(
          static_cast<uint8_t>(i & 255), static_cast<uint8_t>(i >> 8), static_cast<uint8_t>(blue));
      ASSERT_EQ(r[offset + i], want) << "r=" << (i & 255) << " g=" << (i >> 8) << " b=" << blue;
      ASSERT_EQ(g[offset + i], want);
      ASSERT_EQ(b[offset + i], want);
    }
  }
}

// ctest runs this binary twice: as it is, and as baseline_loops.* with
// OBSAUG_CPU_LOOPS=baseline (cmake/gtest.cmake). The second run is worth
// having only if the CPU ops then take their baseline loops; this says they
// do, and that without the setting they take the widest the CPU has.
TEST(CpuLoops, FollowTheSettingAndTheCpu) {
  ASSERT_EQ(cpu_loops_setting_problem(), "");
  const char* setting = std::getenv("OBSAUG_CPU_LOOPS");
  CpuLoops cap = CpuLoops::kAvx512;
  if (setting != nullptr && setting[0] != '\0') {
    const std::string name = setting;
    ASSERT_TRUE(name == "baseline" || name == "avx2" || name == "avx512") << name;
    cap = name == "baseline" ? CpuLoops::kBaseline
          : name == "avx2"   ? CpuLoops::kAvx2
                             : CpuLoops::kAvx512;
  }
  EXPECT_EQ(cpu_loops(), std::min(cap, widest_cpu_loops())) << cpu_loops_name(cpu_loops());
  // What the CPU has, read from /proc/cpuinfo rather than as the library reads
  // it (under valgrind, whose CPU has no AVX-512, the two disagree).
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line) && line.rfind("flags", 0) != 0) {
  }
  ASSERT_EQ(line.rfind("flags", 0), 0u) << "no flags line in /proc/cpuinfo";
  const auto has = [&](const std::string& flag) {
    return (line + " ").find(" " + flag + " ") != std::string::npos;
  };
  const CpuLoops widest = has("avx512f") && has("avx512bw") ? CpuLoops::kAvx512
                          : has("avx2")                     ? CpuLoops::kAvx2
                                                            : CpuLoops::kBaseline;
  EXPECT_EQ(widest_cpu_loops(), widest) << cpu_loops_name(widest_cpu_loops());
}

}  // namespace
}  // namespace obsaug
