// Hostile inputs to the tensor op API: every call below must
// either throw a c10 error whose message names the problem, or return the
// exact result (the per-pixel reference, or the same call on .contiguous()).
// This binary runs under AddressSanitizer + UBSan (scripts/sanitize.sh), so
// an out-of-bounds read or write on these shapes shows up here.
//
// Nothing here allocates more than a few MB: shapes whose byte count would
// overflow 32 bits are zero-stride expand()ed views that the ops must refuse
// before they copy them.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <initializer_list>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/augment.h"
#include "kernels/frame_rows_cpu.h"
#include "kernels/pipeline.h"
#include "kernels/pipeline_spec.h"
#include "tests/kernels/reference.h"
#include "tests/test_util.h"

namespace obsaug {
namespace {

using at::indexing::None;
using at::indexing::Slice;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

at::Tensor random_u8(at::IntArrayRef shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  at::Tensor t = at::empty(shape, at::kByte);
  uint8_t* p = t.data_ptr<uint8_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<uint8_t>(rng() >> 56);
  return t;
}

at::Tensor random_f32(at::IntArrayRef shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(0.0f, 255.0f);
  at::Tensor t = at::empty(shape, at::kFloat);
  float* p = t.data_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

bool same(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes().equals(b.sizes()) &&
         at::equal(a.contiguous(), b.contiguous());
}

using testing::error_of;
using testing::expect_mentions;
using testing::reference;

const at::Tensor& obs_u8() {
  static const at::Tensor t = random_u8({2, 6, 12, 10}, 1);
  return t;
}
const at::Tensor& pool_u8() {
  static const at::Tensor t = random_u8({3, 3, 12, 10}, 2);
  return t;
}

// ---------------------------------------------------------------- alpha

TEST(HostileAlpha, NonFiniteAndOutOfRangeThroughEveryEntry) {
  const at::Tensor& obs = obs_u8();
  const at::Tensor& pool = pool_u8();
  for (double a : {kNaN, kInf, -kInf, -0.25, 1.5, -1e-300, 1.0 + 1e-15}) {
    SCOPED_TRACE("alpha " + std::to_string(a));
    expect_mentions(error_of<c10::ValueError>([&] { ops::overlay(obs, pool, 0, 0, a); }),
                    {"alpha"});
    expect_mentions(error_of<c10::ValueError>([&] {
                      ops::augment(obs, pool, {OpSpec::shift(2), OpSpec::overlay(a)}, 0, 0);
                    }),
                    {"op 1 (overlay)", "alpha must be in [0, 1]"});
    at::Tensor x = obs.clone();
    error_of<c10::ValueError>([&] { ops::augment_(x, pool, {OpSpec::overlay(a)}, 0, 0); });
    EXPECT_TRUE(same(x, obs)) << "a rejected in-place call wrote obs";
  }
  for (double hi : {kNaN, kInf, -kInf, -0.5, 0.1, 1.0000001}) {
    SCOPED_TRACE("alpha_max " + std::to_string(hi));
    expect_mentions(error_of<c10::ValueError>([&] { ops::overlay(obs, pool, 0, 0, 0.2, hi); }),
                    {"alpha_max", "[alpha, 1]"});
  }
  // The text form: non-numbers, NaN and overflowing literals.
  for (const char* text : {"op=overlay,alpha=nan", "op=overlay,alpha=inf", "op=overlay,alpha=1e999",
                           "op=overlay,alpha=-1e-320", "op=overlay,alpha=0.2,alpha_max=nan",
                           "op=overlay,alpha=0.2,alpha_max=-inf"}) {
    SCOPED_TRACE(text);
    expect_mentions(error_of<c10::ValueError>([&] { parse_pipeline(text); }), {"alpha"});
  }
  for (const char* text : {"op=overlay,alpha=", "op=overlay,alpha=0.5x", "op=overlay,alpha=0,5"}) {
    SCOPED_TRACE(text);
    error_of<c10::ValueError>([&] { parse_pipeline(text); });
  }
}

TEST(HostileAlpha, BoundaryValuesGiveTheFormula) {
  // alpha -0.0, 0 and 1 are valid: weights 0 and 256 (obs unchanged, pool copied).
  const at::Tensor& obs = obs_u8();
  const at::Tensor& pool = pool_u8();
  EXPECT_TRUE(same(ops::overlay(obs, pool, 0, 0, -0.0), obs));
  EXPECT_TRUE(same(ops::overlay(obs, pool, 0, 0, 0.0, 0.0), obs));
  const at::Tensor one = ops::overlay(obs, pool, 4, 9, 1.0, 1.0);
  EXPECT_TRUE(same(one, reference(obs, pool, {OpSpec::overlay(1.0, 1.0)}, 4, 9)));
  const at::Tensor f = random_f32({2, 6, 12, 10}, 3);
  EXPECT_TRUE(same(ops::overlay(f, pool, 4, 9, 0.0, 1.0),
                   reference(f, pool, {OpSpec::overlay(0.0, 1.0)}, 4, 9)));
}

// ---------------------------------------------------------------- geometry limits

TEST(HostileGeometry, ResolveRejectsImpossibleFrames) {
  const Pipeline shift = {OpSpec::shift(4)};
  for (int64_t h : {int64_t{0}, int64_t{-1}, (int64_t{1} << 30) + 1, int64_t{1} << 31,
                    int64_t{1} << 40, std::numeric_limits<int64_t>::min()}) {
    FrameGeometry g;
    g.height = h;
    g.width = 8;
    expect_mentions(error_of<c10::ValueError>([&] { resolve_pipeline(shift, g, 0, 0); }),
                    {"obs frames must be between 1x1"});
    std::swap(g.height, g.width);
    error_of<c10::ValueError>([&] { resolve_pipeline(shift, g, 0, 0); });
  }
  FrameGeometry g;
  g.height = 8;
  g.width = 8;
  for (int64_t s : {int64_t{0}, int64_t{-3}, std::numeric_limits<int64_t>::min()}) {
    expect_mentions(
        error_of<c10::ValueError>([&] { resolve_pipeline({OpSpec::crop(s, 4)}, g, 0, 0); }),
        {"size must be in 1..1073741824 per side"});
  }
  // Larger than the frame; sizes that would wrap when narrowed to int32 are
  // out of the schema's range before they meet the frame.
  expect_mentions(
      error_of<c10::ValueError>([&] { resolve_pipeline({OpSpec::crop(4, 9)}, g, 0, 0); }),
      {"larger than its input 8x8"});
  for (int64_t s : {int64_t{1} << 31, (int64_t{1} << 32) + 4, int64_t{1} << 62}) {
    expect_mentions(
        error_of<c10::ValueError>([&] { resolve_pipeline({OpSpec::crop(4, s)}, g, 0, 0); }),
        {"size must be in 1..1073741824 per side, got 4x"});
  }
  // A crop after a shrinking crop is checked against that crop's output.
  expect_mentions(error_of<c10::ValueError>([&] {
                    resolve_pipeline({OpSpec::crop(6, 6), OpSpec::crop(7, 5)}, g, 0, 0);
                  }),
                  {"op 1 (crop)", "larger than its input 6x6"});
  for (int64_t pad : {int64_t{-1}, (int64_t{1} << 20) + 1, int64_t{1} << 31,
                      std::numeric_limits<int64_t>::max()}) {
    expect_mentions(
        error_of<c10::ValueError>([&] { resolve_pipeline({OpSpec::shift(pad)}, g, 0, 0); }),
        {"pad must be in 0..1048576"});
  }
  expect_mentions(error_of<c10::ValueError>(
                      [&] { resolve_pipeline(Pipeline(kMaxOps + 1, OpSpec::shift(1)), g, 0, 0); }),
                  {"at most 8 ops"});
  for (int64_t k : {int64_t{-1}, int64_t{32768}, int64_t{1} << 40}) {
    expect_mentions(error_of<c10::ValueError>(
                        [&] { resolve_pipeline({OpSpec::shift(1).at_index(k)}, g, 0, 0); }),
                    {"index must be in 0..32767"});
  }
  // Text form: integers that do not fit int64.
  expect_mentions(
      error_of<c10::ValueError>([&] { parse_pipeline("op=shift,pad=99999999999999999999"); }),
      {"pad", "integer"});
  // A side beyond 2^30 (that would wrap in int32) is refused by the parser's
  // range check; one in range but larger than the frame, against the frame.
  expect_mentions(error_of<c10::ValueError>([&] { parse_pipeline("op=crop,size=4294967297x4"); }),
                  {"size must be in 1..1073741824 per side, got 4294967297x4"});
  const Pipeline too_large = parse_pipeline("op=crop,size=1073741824x4");
  expect_mentions(error_of<c10::ValueError>([&] { resolve_pipeline(too_large, g, 0, 0); }),
                  {"1073741824x4", "larger than its input 8x8"});
}

TEST(HostileGeometry, HugeExpandedObsIsRefusedBeforeAnyCopy) {
  // Zero-stride views standing for > 2^32 bytes: the op must refuse them on
  // their shape (before .contiguous() would try to materialise them).
  const at::Tensor one = at::zeros({1, 1, 1, 1}, at::kByte);
  const at::Tensor wide = one.expand({1, 1, 1, (int64_t{1} << 30) + 1});
  expect_mentions(error_of<c10::ValueError>([&] { ops::shift(wide, 0, 0); }),
                  {"1x1073741825", "2^30"});
  const at::Tensor tall = one.expand({4, 3, int64_t{1} << 31, 1});
  expect_mentions(error_of<c10::ValueError>([&] { ops::crop(tall, 0, 0, 1, 1); }),
                  {"2147483648x1"});
  expect_mentions(error_of<c10::ValueError>([&] {
                    ops::augment(one.expand({1, 1, int64_t{1} << 40, int64_t{1} << 20}),
                                 std::nullopt, {}, 0, 0);
                  }),
                  {"obs frames"});
  // In place on a 6.4 GB view of one byte: refused on its strides, no copy.
  at::Tensor big = one.expand({1, 3, 46341, 46341});
  expect_mentions(error_of<c10::ValueError>(
                      [&] { ops::augment_(big, std::nullopt, {OpSpec::shift(4)}, 0, 0); }),
                  {"in-place", "share memory"});
  EXPECT_EQ(one.item<uint8_t>(), 0);
  // gather_augment: a [1, 1, 2^31, 1] storage view is refused on its shape.
  const at::Tensor idx = at::zeros({2, 3}, at::kLong);
  expect_mentions(
      error_of<c10::ValueError>([&] {
        ops::gather_augment(one.expand({1, 1, int64_t{1} << 31, 1}), idx, std::nullopt, {}, 0, 0);
      }),
      {"2147483648x1"});
}

TEST(HostileGeometry, TinyFramesAndPadsLargerThanTheFrame) {
  // H or W of 1..9 exercise every fill path of the CPU loops (single pixels,
  // 8-byte and 32-byte edge stores); pads up to far beyond the frame.
  // (One pad per frame size and padding, cycling, keeps the call count low:
  // each call is cheap, but a loaded machine makes thread hand-offs slow.)
  uint64_t seed = 100;
  const int64_t pads[] = {1, 4, 40, 1 << 20};
  int cycle = 0;
  for (int64_t h : {1, 2, 3, 9}) {
    for (int64_t w : {1, 2, 5, 7, 8, 9, 33}) {
      {
        for (const char* padding : {"replicate", "zeros"}) {
          const int64_t pad = pads[cycle++ % 4];
          const Pipeline p = {OpSpec::shift(pad, padding), OpSpec::crop(h, 1),
                              OpSpec::shift(pad / 2 + 1, padding)};
          SCOPED_TRACE(std::to_string(h) + "x" + std::to_string(w) + " " + format_pipeline(p));
          for (const at::Tensor& obs :
               {random_u8({3, 2, h, w}, ++seed), random_f32({3, 2, h, w}, ++seed)}) {
            const at::Tensor want = reference(obs, std::nullopt, p, seed, 3);
            EXPECT_TRUE(same(ops::augment(obs, std::nullopt, p, seed, 3), want));
            const Pipeline keep = {OpSpec::shift(pad, padding), OpSpec::shift(2, padding)};
            const at::Tensor want_keep = reference(obs, std::nullopt, keep, seed, 4);
            at::Tensor x = obs.clone();
            ops::augment_(x, std::nullopt, keep, seed, 4);
            EXPECT_TRUE(same(x, want_keep)) << "in place";
          }
        }
      }
    }
  }
}

TEST(HostileGeometry, CropToTheWholeFrameAndToOnePixel) {
  const at::Tensor obs = random_u8({2, 3, 5, 7}, 9);
  EXPECT_TRUE(same(ops::crop(obs, 1, 2, 5, 7), obs));
  EXPECT_TRUE(
      same(ops::crop(obs, 1, 2, 1, 1), reference(obs, std::nullopt, {OpSpec::crop(1, 1)}, 1, 2)));
  EXPECT_TRUE(same(ops::crop(obs, 1, 2, 1, 1, true),
                   obs.index({at::indexing::Slice(), at::indexing::Slice(),
                              at::indexing::Slice(2, 3), at::indexing::Slice(3, 4)})));
}

// ---------------------------------------------------------------- empty tensors

TEST(HostileEmpty, ZeroBatchOrChannelsGiveEmptyResults) {
  const at::Tensor pool = pool_u8();
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{0, 6, 12, 10}, std::vector<int64_t>{2, 0, 12, 10},
        std::vector<int64_t>{0, 0, 12, 10}}) {
    for (at::ScalarType dtype : {at::kByte, at::kFloat}) {
      const at::Tensor obs = at::zeros(shape, dtype);
      SCOPED_TRACE(obs.sizes());
      EXPECT_EQ(ops::shift(obs, 0, 0).sizes(), obs.sizes());
      EXPECT_EQ(ops::crop(obs, 0, 0, 3, 4).sizes(), (at::IntArrayRef{shape[0], shape[1], 3, 4}));
      EXPECT_EQ(ops::overlay(obs, pool, 0, 0).sizes(), obs.sizes());
      const at::Tensor out = ops::augment(obs, pool, {OpSpec::shift(3), OpSpec::overlay(0.3)}, 0, 0,
                                          {at::kFloat, 0.5, 1.0});
      EXPECT_EQ(out.sizes(), obs.sizes());
      EXPECT_EQ(out.scalar_type(), at::kFloat);
      at::Tensor x = obs.clone();
      EXPECT_NO_THROW(ops::augment_(x, pool, {OpSpec::overlay(0.3)}, 0, 0));
      // Argument errors are still reported on an empty batch.
      error_of<c10::ValueError>([&] { ops::crop(obs, 0, 0, 13, 4); });
      error_of<c10::ValueError>([&] {
        ops::overlay(obs, at::zeros({0, 3, 12, 10}, at::kByte), 0, 0);
      });
      error_of<c10::ValueError>([&] { ops::overlay(obs, pool, 0, 0, kNaN); });
    }
  }
}

TEST(HostileEmpty, ZeroHeightOrWidthIsAClearError) {
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{2, 3, 0, 10}, std::vector<int64_t>{2, 3, 10, 0},
        std::vector<int64_t>{0, 3, 0, 0}}) {
    const at::Tensor obs = at::zeros(shape, at::kByte);
    SCOPED_TRACE(obs.sizes());
    expect_mentions(error_of<c10::ValueError>([&] { ops::shift(obs, 0, 0); }),
                    {"obs frames must be between 1x1"});
    error_of<c10::ValueError>([&] { ops::crop(obs, 0, 0, 1, 1); });
    error_of<c10::ValueError>([&] {
      ops::overlay(obs, at::zeros({2, 3, shape[2], shape[3]}, at::kByte), 0, 0);
    });
    at::Tensor x = obs.clone();
    error_of<c10::ValueError>([&] { ops::augment_(x, std::nullopt, {}, 0, 0); });
    error_of<c10::ValueError>([&] {
      ops::gather_augment(at::zeros({4, 3, shape[2], shape[3]}, at::kByte),
                          at::zeros({shape[0], 2}, at::kLong), std::nullopt, {}, 0, 0);
    });
  }
}

TEST(HostileEmpty, GatherWithNoSamplesOrNoFrames) {
  const at::Tensor storage = random_u8({5, 3, 6, 6}, 4);
  const Pipeline p = {OpSpec::shift(2), OpSpec::overlay(0.5)};
  const at::Tensor pool = random_u8({2, 3, 6, 6}, 5);
  for (int64_t s : {0, 1, 3}) {
    const at::Tensor out =
        ops::gather_augment(storage, at::zeros({0, s}, at::kLong), pool, p, 0, 0);
    EXPECT_EQ(out.sizes(), (at::IntArrayRef{0, 3 * s, 6, 6}));
  }
  // An empty storage with an empty batch: empty result; with samples: IndexError.
  const at::Tensor none = at::zeros({0, 3, 6, 6}, at::kByte);
  EXPECT_EQ(ops::gather_augment(none, at::zeros({0, 2}, at::kLong), pool, p, 0, 0).sizes(),
            (at::IntArrayRef{0, 6, 6, 6}));
  expect_mentions(error_of<c10::IndexError>([&] {
                    ops::gather_augment(none, at::zeros({2, 2}, at::kLong), pool, p, 0, 0);
                  }),
                  {"[0, 0)"});
  // Samples without frames cannot be stacked.
  expect_mentions(error_of<c10::ValueError>([&] {
                    ops::gather_augment(storage, at::zeros({2, 0}, at::kLong), pool, p, 0, 0);
                  }),
                  {"S >= 1"});
  expect_mentions(error_of<c10::ValueError>([&] {
                    ops::gather_augment(at::zeros({5, 0, 6, 6}, at::kByte),
                                        at::zeros({2, 2}, at::kLong), std::nullopt, {}, 0, 0);
                  }),
                  {"at least one channel"});
}

// ---------------------------------------------------------------- layouts

std::vector<std::pair<std::string, at::Tensor>> strided_views(at::ScalarType dtype) {
  // Each view is [2, 6, 12, 10].
  const at::Tensor big =
      dtype == at::kByte ? random_u8({4, 12, 24, 20}, 11) : random_f32({4, 12, 24, 20}, 11);
  const at::Tensor hw =
      dtype == at::kByte ? random_u8({2, 6, 10, 12}, 12) : random_f32({2, 6, 10, 12}, 12);
  const at::Tensor small =
      dtype == at::kByte ? random_u8({1, 6, 12, 10}, 13) : random_f32({1, 6, 12, 10}, 13);
  const at::Tensor frame = dtype == at::kByte ? random_u8({12, 10}, 14) : random_f32({12, 10}, 14);
  return {
      {"stepped", big.index({Slice(None, None, 2), Slice(None, None, 2), Slice(1, None, 2),
                             Slice(None, None, 2)})},
      {"transposed", hw.transpose(2, 3)},
      {"channels_last", small.expand({2, 6, 12, 10}).contiguous(at::MemoryFormat::ChannelsLast)},
      {"batch expanded", small.expand({2, 6, 12, 10})},
      {"frame expanded", frame.expand({2, 6, 12, 10})},
      {"narrowed", big.narrow(0, 1, 2).narrow(1, 3, 6).narrow(2, 5, 12).narrow(3, 2, 10)},
  };
}

TEST(HostileLayout, NonContiguousInputEqualsContiguous) {
  const at::Tensor pool = pool_u8();
  const Pipeline full = {OpSpec::shift(3), OpSpec::overlay(0.3, 0.8, true), OpSpec::crop(9, 7),
                         OpSpec::shift(1, "zeros")};
  for (at::ScalarType dtype : {at::kByte, at::kFloat}) {
    for (const auto& [name, view] : strided_views(dtype)) {
      SCOPED_TRACE(name + " " + std::string(c10::toString(dtype)));
      const at::Tensor dense = view.contiguous();
      EXPECT_TRUE(
          same(ops::augment(view, pool, full, 7, 1), ops::augment(dense, pool, full, 7, 1)));
      EXPECT_TRUE(same(ops::shift(view, 7, 1), ops::shift(dense, 7, 1)));
      EXPECT_TRUE(same(ops::crop(view, 7, 1, 5, 5), ops::crop(dense, 7, 1, 5, 5)));
      EXPECT_TRUE(same(ops::overlay(view, pool, 7, 1, 0.6), ops::overlay(dense, pool, 7, 1, 0.6)));
      EXPECT_TRUE(same(ops::augment(view, pool, full, 7, 1, {at::kFloat, 1.0 / 255, -0.5}),
                       ops::augment(dense, pool, full, 7, 1, {at::kFloat, 1.0 / 255, -0.5})));
      // Non-contiguous pool too.
      const at::Tensor pool_t = pool.transpose(2, 3).contiguous().transpose(2, 3);
      ASSERT_FALSE(pool_t.is_contiguous());
      EXPECT_TRUE(
          same(ops::overlay(view, pool_t, 7, 1, 0.6), ops::overlay(dense, pool, 7, 1, 0.6)));
    }
  }
}

TEST(HostileLayout, InPlaceOnNonContiguousUpdatesTheOriginal) {
  const at::Tensor pool = pool_u8();
  const Pipeline keep = {OpSpec::shift(3), OpSpec::overlay(0.3, 0.8), OpSpec::shift(1, "zeros")};
  for (at::ScalarType dtype : {at::kByte, at::kFloat}) {
    const at::Tensor big =
        dtype == at::kByte ? random_u8({4, 12, 24, 20}, 21) : random_f32({4, 12, 24, 20}, 21);
    // stepped view
    {
      at::Tensor base = big.clone();
      at::Tensor view = base.index(
          {Slice(None, None, 2), Slice(None, None, 2), Slice(1, None, 2), Slice(None, None, 2)});
      const at::Tensor want = ops::augment(view.contiguous(), pool, keep, 5, 6);
      at::Tensor expected_base = base.clone();
      expected_base.index_put_(
          {Slice(None, None, 2), Slice(None, None, 2), Slice(1, None, 2), Slice(None, None, 2)},
          want);
      ops::augment_(view, pool, keep, 5, 6);
      EXPECT_TRUE(same(view, want));
      EXPECT_TRUE(same(base, expected_base)) << "elements outside the view were touched";
    }
    // transposed and channels_last
    {
      at::Tensor base =
          (dtype == at::kByte ? random_u8({2, 6, 10, 12}, 22) : random_f32({2, 6, 10, 12}, 22));
      at::Tensor view = base.transpose(2, 3);
      const at::Tensor want = ops::augment(view.contiguous(), pool, keep, 5, 6);
      ops::augment_(view, pool, keep, 5, 6);
      EXPECT_TRUE(same(base.transpose(2, 3), want));
      at::Tensor cl =
          (dtype == at::kByte ? random_u8({2, 6, 12, 10}, 23) : random_f32({2, 6, 12, 10}, 23))
              .contiguous(at::MemoryFormat::ChannelsLast);
      const at::Tensor want_cl = ops::augment(cl.contiguous(), pool, keep, 5, 6);
      ops::augment_(cl, pool, keep, 5, 6);
      EXPECT_TRUE(same(cl, want_cl));
      EXPECT_TRUE(cl.is_contiguous(at::MemoryFormat::ChannelsLast));
    }
  }
}

TEST(HostileLayout, InPlaceOnExpandedObsIsRefusedAndLeavesItAlone) {
  const at::Tensor small = random_u8({1, 6, 12, 10}, 31);
  at::Tensor view = small.expand({3, 6, 12, 10});
  const at::Tensor before = small.clone();
  expect_mentions(error_of<c10::ValueError>(
                      [&] { ops::augment_(view, std::nullopt, {OpSpec::shift(2)}, 0, 0); }),
                  {"in-place", "share memory", "clone()"});
  EXPECT_TRUE(same(small, before));
  // Out of place, the expanded batch is fine.
  EXPECT_TRUE(same(ops::shift(view, 0, 0), ops::shift(view.contiguous(), 0, 0)));
}

TEST(HostileLayout, PoolAliasingObsInPlaceEqualsOutOfPlace) {
  // The pool is obs itself (or overlaps it): in place must not read pool
  // pixels it has already overwritten.
  for (at::ScalarType dtype : {at::kByte}) {
    (void)dtype;
    const at::Tensor obs = random_u8({4, 3, 12, 10}, 41);
    const Pipeline p = {OpSpec::shift(2), OpSpec::overlay(0.4, 0.9)};
    const at::Tensor want = ops::augment(obs, obs.clone(), p, 3, 3);
    at::Tensor x = obs.clone();
    ops::augment_(x, x, p, 3, 3);
    EXPECT_TRUE(same(x, want));
    // Partial overlap: pool = the last two samples of obs.
    const at::Tensor want2 = ops::augment(obs, obs.index({Slice(2, 4)}).clone(), p, 3, 4);
    at::Tensor y = obs.clone();
    ops::augment_(y, y.index({Slice(2, 4)}), p, 3, 4);
    EXPECT_TRUE(same(y, want2));
    // Single-op wrapper path of overlay_ uses the same code.
    at::Tensor z = obs.clone();
    ops::augment_(z, z, {OpSpec::overlay(1.0)}, 8, 8);
    EXPECT_TRUE(same(z, ops::overlay(obs, obs.clone(), 8, 8, 1.0)));
  }
}

// ---------------------------------------------------------------- devices and dtypes

TEST(HostileDevice, MetaTensorsAreRefused) {
  const at::Tensor meta =
      at::empty({2, 6, 12, 10}, at::TensorOptions().dtype(at::kByte).device(at::kMeta));
  expect_mentions(error_of<c10::ValueError>([&] { ops::shift(meta, 0, 0); }),
                  {"obs must be on cpu or cuda", "meta"});
  at::Tensor m = meta;
  error_of<c10::ValueError>([&] { ops::augment_(m, std::nullopt, {}, 0, 0); });
  // Pool on another device than obs.
  const at::Tensor pool_meta =
      at::empty({3, 3, 12, 10}, at::TensorOptions().dtype(at::kByte).device(at::kMeta));
  expect_mentions(error_of<c10::ValueError>([&] { ops::overlay(obs_u8(), pool_meta, 0, 0); }),
                  {"pool must be on obs's device", "meta"});
  at::Tensor x = obs_u8().clone();
  error_of<c10::ValueError>([&] { ops::augment_(x, pool_meta, {OpSpec::overlay(0.5)}, 0, 0); });
  EXPECT_TRUE(same(x, obs_u8()));
  // gather_augment: storage or indices on meta.
  const at::Tensor storage = random_u8({5, 3, 6, 6}, 4);
  expect_mentions(error_of<c10::ValueError>([&] {
                    ops::gather_augment(
                        storage,
                        at::zeros({2, 2}, at::TensorOptions().dtype(at::kLong).device(at::kMeta)),
                        std::nullopt, {}, 0, 0);
                  }),
                  {"indices must be on storage's device"});
  expect_mentions(
      error_of<c10::ValueError>([&] {
        ops::gather_augment(
            at::empty({5, 3, 6, 6}, at::TensorOptions().dtype(at::kByte).device(at::kMeta)),
            at::zeros({2, 2}, at::kLong), std::nullopt, {}, 0, 0);
      }),
      {"storage must be on cpu or cuda"});
}

TEST(HostileDtype, WrongDtypesAndRanks) {
  const at::Tensor pool = pool_u8();
  for (at::ScalarType dtype :
       {at::kShort, at::kDouble, at::kBool, at::kHalf, at::kChar, at::kLong}) {
    const at::Tensor obs = at::zeros({2, 6, 12, 10}, dtype);
    SCOPED_TRACE(c10::toString(dtype));
    expect_mentions(error_of<c10::TypeError>([&] { ops::shift(obs, 0, 0); }), {"obs", "uint8"});
    expect_mentions(error_of<c10::TypeError>([&] { ops::overlay(obs_u8(), pool.to(dtype), 0, 0); }),
                    {"pool must be uint8"});
    expect_mentions(error_of<c10::TypeError>([&] {
                      ops::gather_augment(at::zeros({5, 3, 6, 6}, dtype),
                                          at::zeros({2, 2}, at::kLong), std::nullopt, {}, 0, 0);
                    }),
                    {"storage must be uint8 or float32"});
    if (dtype != at::kLong) {
      expect_mentions(error_of<c10::TypeError>([&] {
                        ops::gather_augment(random_u8({5, 3, 6, 6}, 1), at::zeros({2, 2}, dtype),
                                            std::nullopt, {}, 0, 0);
                      }),
                      {"indices must be int64 [B, S]"});
    }
  }
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{6, 12, 10}, std::vector<int64_t>{1, 2, 6, 12, 10},
        std::vector<int64_t>{}, std::vector<int64_t>{12}}) {
    const at::Tensor obs = at::zeros(shape, at::kByte);
    expect_mentions(error_of<c10::ValueError>([&] { ops::crop(obs, 0, 0, 2, 2); }), {"4 dims"});
  }
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{3, 12, 10}, std::vector<int64_t>{1, 3, 3, 12, 10}}) {
    expect_mentions(error_of<c10::ValueError>(
                        [&] { ops::overlay(obs_u8(), at::zeros(shape, at::kByte), 0, 0); }),
                    {"pool must be uint8 [P, C, H, W]"});
  }
  const at::Tensor undefined;
  expect_mentions(error_of<c10::ValueError>([&] { ops::shift(undefined, 0, 0); }),
                  {"obs must be a tensor", "got None"});
  expect_mentions(error_of<c10::ValueError>(
                      [&] { ops::augment(obs_u8(), undefined, {OpSpec::overlay(0.5)}, 0, 0); }),
                  {"pool"});
  expect_mentions(
      error_of<c10::ValueError>([&] {
        ops::gather_augment(random_u8({5, 3, 6, 6}, 1), undefined, std::nullopt, {}, 0, 0);
      }),
      {"indices must be an int64 tensor [B, S], got None"});
}

// ---------------------------------------------------------------- pools

TEST(HostilePool, WrongSizesAreClearErrors) {
  const at::Tensor& obs = obs_u8();  // [2, 6, 12, 10]: S*C = 6
  expect_mentions(error_of<c10::ValueError>([&] {
                    ops::overlay(obs, at::zeros({0, 3, 12, 10}, at::kByte), 0, 0);
                  }),
                  {"P = 0"});
  expect_mentions(error_of<c10::ValueError>([&] {
                    ops::overlay(obs, at::zeros({2, 4, 12, 10}, at::kByte), 0, 0);
                  }),
                  {"multiple of the pool's channels C = 4"});
  expect_mentions(error_of<c10::ValueError>([&] {
                    ops::overlay(obs, at::zeros({2, 0, 12, 10}, at::kByte), 0, 0);
                  }),
                  {"C = 0"});
  expect_mentions(error_of<c10::ValueError>([&] {
                    ops::overlay(obs, at::zeros({2, 3, 12, 11}, at::kByte), 0, 0);
                  }),
                  {"12x11", "12x10"});
  expect_mentions(error_of<c10::ValueError>([&] {
                    ops::overlay(obs, at::zeros({2, 3, 0, 0}, at::kByte), 0, 0);
                  }),
                  {"0x0"});
  // At the overlay's stage (after a crop), the pool must match the cropped size.
  expect_mentions(error_of<c10::ValueError>([&] {
                    ops::augment(obs, pool_u8(), {OpSpec::crop(8, 8), OpSpec::overlay(0.5)}, 0, 0);
                  }),
                  {"op 1 (overlay)", "12x10", "8x8"});
  EXPECT_TRUE(same(ops::augment(obs, random_u8({2, 3, 8, 8}, 3),
                                {OpSpec::crop(8, 8), OpSpec::overlay(0.5)}, 0, 0),
                   reference(obs, random_u8({2, 3, 8, 8}, 3),
                             {OpSpec::crop(8, 8), OpSpec::overlay(0.5)}, 0, 0)));
  // Grayscale pool on RGB stacks: C = 1 divides 6, so each channel is a frame.
  const at::Tensor gray = random_u8({2, 1, 12, 10}, 6);
  EXPECT_TRUE(same(ops::overlay(obs, gray, 1, 1, 0.5, std::nullopt, true),
                   reference(obs, gray, {OpSpec::overlay(0.5, std::nullopt, true)}, 1, 1)));
  // A pool of one image.
  const at::Tensor single = random_u8({1, 3, 12, 10}, 7);
  EXPECT_TRUE(same(ops::overlay(obs, single, 1, 1, 0.5, 1.0),
                   reference(obs, single, {OpSpec::overlay(0.5, 1.0)}, 1, 1)));
}

// ---------------------------------------------------------------- gather indices

TEST(HostileGather, IndicesOutsideTheStorage) {
  const at::Tensor storage = random_u8({5, 3, 6, 6}, 51);
  for (int64_t bad : {int64_t{-1}, int64_t{5}, std::numeric_limits<int64_t>::min(),
                      std::numeric_limits<int64_t>::max()}) {
    at::Tensor idx = at::zeros({3, 2}, at::kLong);
    idx[1][1] = bad;
    expect_mentions(error_of<c10::IndexError>([&] {
                      ops::gather_augment(storage, idx, std::nullopt, {OpSpec::shift(1)}, 0, 0);
                    }),
                    {"[0, N) = [0, 5)", std::to_string(bad).c_str()});
    error_of<c10::IndexError>([&] { ops::check_gather_indices(storage, idx); });
  }
}

TEST(HostileGather, StridedIndicesAndStorageEqualContiguous) {
  const at::Tensor pool = random_u8({2, 3, 6, 6}, 52);
  const Pipeline p = {OpSpec::shift(2), OpSpec::overlay(0.25, 0.75, true)};
  const at::Tensor big_storage = random_u8({10, 6, 12, 6}, 53);
  const at::Tensor storage =
      big_storage.index({Slice(None, None, 2), Slice(1, None, 2), Slice(None, None, 2)});
  ASSERT_FALSE(storage.is_contiguous());
  const at::Tensor idx_t =
      at::tensor(std::vector<int64_t>{0, 4, 1, 3, 2, 2, 4, 0}, at::kLong).view({2, 4}).t();
  ASSERT_FALSE(idx_t.is_contiguous());
  const at::Tensor want =
      ops::gather_augment(storage.contiguous(), idx_t.contiguous(), pool, p, 3, 4);
  EXPECT_TRUE(same(ops::gather_augment(storage, idx_t, pool, p, 3, 4), want));
  // And it equals augment on the gathered batch.
  const at::Tensor gathered =
      storage.contiguous().index_select(0, idx_t.contiguous().view(-1)).view({4, 6, 6, 6});
  EXPECT_TRUE(same(want, ops::augment(gathered, pool, p, 3, 4)));
  // Expanded (zero-stride) indices and a channels_last storage.
  const at::Tensor idx_e =
      at::tensor(std::vector<int64_t>{3, 1}, at::kLong).view({1, 2}).expand({5, 2});
  const at::Tensor cl = storage.contiguous().contiguous(at::MemoryFormat::ChannelsLast);
  EXPECT_TRUE(same(ops::gather_augment(cl, idx_e, pool, p, 3, 4),
                   ops::gather_augment(storage.contiguous(), idx_e.contiguous(), pool, p, 3, 4)));
  // Float storage, unchecked indices that are valid.
  const at::Tensor fs = random_f32({5, 3, 6, 6}, 54);
  EXPECT_TRUE(same(ops::gather_augment(fs, idx_t, pool, p, 3, 4, {}, /*check_indices=*/false),
                   ops::augment(fs.index_select(0, idx_t.contiguous().view(-1)).view({4, 6, 6, 6}),
                                pool, p, 3, 4)));
}

TEST(HostileGather, PoolMismatchesForStorage) {
  const at::Tensor storage = random_u8({5, 3, 6, 6}, 55);
  const at::Tensor idx = at::zeros({2, 2}, at::kLong);
  const Pipeline p = {OpSpec::overlay(0.5)};
  expect_mentions(error_of<c10::ValueError>([&] {
                    ops::gather_augment(storage, idx, at::zeros({2, 1, 6, 6}, at::kByte), p, 0, 0);
                  }),
                  {"pool has 1 channels", "3"});
  expect_mentions(error_of<c10::ValueError>([&] {
                    ops::gather_augment(storage, idx, at::zeros({2, 3, 7, 6}, at::kByte), p, 0, 0);
                  }),
                  {"7x6", "6x6"});
  expect_mentions(error_of<c10::ValueError>([&] {
                    ops::gather_augment(storage, idx, at::zeros({0, 3, 6, 6}, at::kByte), p, 0, 0);
                  }),
                  {"P = 0"});
  expect_mentions(error_of<c10::ValueError>([&] {
                    ops::gather_augment(storage, idx, at::zeros({2, 3, 6}, at::kByte), p, 0, 0);
                  }),
                  {"pool must be uint8 [P, C, H, W]"});
  expect_mentions(
      error_of<c10::ValueError>([&] { ops::gather_augment(storage, idx, std::nullopt, p, 0, 0); }),
      {"pool is None"});
}

// Contrast's mean of float frames far beyond 0..255: every q is defined
// (saturated as CUDA converts, NaN 0) and the sum wraps modulo 2^64, so the
// host and the device agree however absurd the frame.
TEST(HostileFloat, ContrastMeanOfHugeFramesIsDefined) {
  const float huge = 2e14f;  // gray * 65536 = 1.3e19 > 2^63
  EXPECT_EQ(gray_fixed(huge, huge, huge), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(gray_fixed(-huge, -huge, -huge), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(gray_fixed(NAN, 0.0f, 0.0f), 0);
  EXPECT_EQ(gray_fixed(255.0f, 255.0f, 255.0f), int64_t{255} << 16);
  EXPECT_EQ(saturated_int64(-9223372036854775808.0f), std::numeric_limits<int64_t>::min());
  // Two saturated pixels: (2^63 - 1) * 2 wraps to -2, in every chunk layout.
  for (const int pixels : {2, 300, 600}) {
    std::vector<float> frame(3 * pixels, 0.0f);
    for (const int j : {0, pixels - 1}) {
      for (int c = 0; c < 3; ++c) frame[c * pixels + j] = huge;
    }
    const FrameView<float> view{frame.data(), pixels, 1, pixels};
    EXPECT_EQ(gray_fixed_sum(view), -2) << pixels;
  }
}

}  // namespace
}  // namespace obsaug
