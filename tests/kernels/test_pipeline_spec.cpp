// The pipeline's text form (parse_pipeline / format_pipeline), its checks,
// blend_weight's rounding and resolve_pipeline (DESIGN.md section 3).
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>

#include "kernels/pipeline_spec.h"
#include "tests/test_util.h"

namespace obsaug {
namespace {

using testing::error_of;
using testing::expect_mentions;

std::string parse_error(const std::string& text) {
  return error_of<c10::ValueError>([&] { parse_pipeline(text); });
}

// Every key of every op compared (OpSpec's ==), with the text forms for the trace.
void expect_same_pipeline(const Pipeline& a, const Pipeline& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k)
    EXPECT_EQ(a[k], b[k]) << "op " << k << ": " << format_op(a[k], OpStyle::kText) << " vs "
                          << format_op(b[k], OpStyle::kText);
}

// ---------------------------------------------------------------- parsing

TEST(PipelineSpec, ParsesTheDocumentedForm) {
  const Pipeline p = parse_pipeline("op=shift,pad=4,padding=replicate|op=overlay,alpha=0.5");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].kind(), OpKind::kShift);
  EXPECT_EQ(p[0].get_int("pad"), 4);
  EXPECT_EQ(p[0].get_choice("padding"), "replicate");
  EXPECT_FALSE(p[0].index().has_value());
  EXPECT_EQ(p[1].kind(), OpKind::kOverlay);
  EXPECT_EQ(p[1].get_float("alpha"), 0.5);
  EXPECT_FALSE(p[1].get_optional_float("alpha_max").has_value());
  EXPECT_FALSE(p[1].get_bool("per_frame"));
}

TEST(PipelineSpec, ParsesEveryKey) {
  const Pipeline p = parse_pipeline(
      "op=shift,pad=7,padding=zeros,index=3|op=crop,size=84x80,center=true|"
      "op=crop,size=60|op=overlay,alpha=0.25,alpha_max=0.75,per_frame=true,index=32767|"
      "op=overlay,alpha=0.1,alpha_max=None,per_frame=False");
  ASSERT_EQ(p.size(), 5u);
  EXPECT_EQ(p[0].kind(), OpKind::kShift);
  EXPECT_EQ(p[0].get_int("pad"), 7);
  EXPECT_EQ(p[0].get_choice("padding"), "zeros");
  EXPECT_EQ(p[0].index(), 3);
  EXPECT_EQ(p[1].kind(), OpKind::kCrop);
  EXPECT_EQ(p[1].get_size("size"), (FrameSize{84, 80}));
  EXPECT_TRUE(p[1].get_bool("center"));
  EXPECT_EQ(p[2].get_size("size"), (FrameSize{60, 60}));
  EXPECT_FALSE(p[2].get_bool("center"));
  EXPECT_EQ(p[3].kind(), OpKind::kOverlay);
  EXPECT_EQ(p[3].get_float("alpha"), 0.25);
  EXPECT_EQ(p[3].get_optional_float("alpha_max"), 0.75);
  EXPECT_TRUE(p[3].get_bool("per_frame"));
  EXPECT_EQ(p[3].index(), 32767);
  EXPECT_EQ(p[4].get_float("alpha"), 0.1);
  EXPECT_FALSE(p[4].get_optional_float("alpha_max").has_value());
  EXPECT_FALSE(p[4].get_bool("per_frame"));
}

TEST(PipelineSpec, DefaultsMatchTheHeader) {
  const Pipeline p = parse_pipeline("op=shift|op=overlay|op=crop,size=8");
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].get_int("pad"), 4);
  EXPECT_EQ(p[0].get_choice("padding"), "replicate");
  EXPECT_EQ(p[1].get_float("alpha"), 0.5);
  EXPECT_FALSE(p[1].get_optional_float("alpha_max").has_value());
  EXPECT_FALSE(p[2].get_bool("center"));
  for (const OpSpec& op : p) EXPECT_FALSE(op.index().has_value());
}

TEST(PipelineSpec, EmptyTextIsTheEmptyPipeline) {
  EXPECT_TRUE(parse_pipeline("").empty());
  EXPECT_EQ(format_pipeline({}), "");
}

TEST(PipelineSpec, FormatThenParseRoundTrips) {
  const Pipeline p = {
      OpSpec::shift(4),
      OpSpec::shift(0, "zeros").at_index(9),
      OpSpec::crop(84, 80),
      OpSpec::crop(3, 3, true).at_index(0),
      OpSpec::overlay(0.5),
      OpSpec::overlay(0.1, 0.30000000000000004, true).at_index(32767),
      OpSpec::overlay(1.0 / 3.0, 2.0 / 3.0),
      OpSpec::overlay(0.0, 1.0),
  };
  const std::string text = format_pipeline(p);
  const Pipeline parsed = parse_pipeline(text);
  expect_same_pipeline(p, parsed);
  EXPECT_EQ(format_pipeline(parsed), text);
}

TEST(PipelineSpec, RandomPipelinesRoundTrip) {
  std::mt19937_64 rng(1234);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int trial = 0; trial < 500; ++trial) {
    Pipeline p;
    const int n = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < n; ++k) {
      OpSpec op;
      switch (rng() % 3) {
        case 0:
          op = OpSpec::shift(static_cast<int64_t>(rng() % 100), rng() % 2 ? "zeros" : "replicate");
          break;
        case 1:
          op = OpSpec::crop(1 + static_cast<int64_t>(rng() % 500),
                            1 + static_cast<int64_t>(rng() % 500), rng() % 2);
          break;
        default: {
          const double a = unit(rng);
          std::optional<double> hi;
          if (rng() % 2) hi = a + (1.0 - a) * unit(rng);
          op = OpSpec::overlay(a, hi, rng() % 2);
        }
      }
      if (rng() % 3 == 0) op.at_index(static_cast<int64_t>(rng() % 32768));
      p.push_back(op);
    }
    const std::string text = format_pipeline(p);
    SCOPED_TRACE(text);
    const Pipeline parsed = parse_pipeline(text);
    expect_same_pipeline(p, parsed);
    EXPECT_EQ(format_pipeline(parsed), text);
    if (HasFailure()) return;
  }
}

// ---------------------------------------------------------------- errors

TEST(PipelineSpecErrors, UnknownOp) {
  const std::string m = parse_error("op=shift|op=rotate90,pad=3");
  expect_mentions(m, {"op 1",
                      "op must be one of shift, crop, overlay, flip, rotate, translate, cutout, "
                      "grayscale, color_jitter, random_conv; got 'rotate90'"});
}

TEST(PipelineSpecErrors, MissingOp) {
  expect_mentions(parse_error("pad=4"), {"op 0", "missing 'op'", "shift", "crop", "overlay"});
  // A trailing '|' is an empty op, not silently dropped.
  expect_mentions(parse_error("op=shift|"), {"op 1", "missing 'op'"});
}

TEST(PipelineSpecErrors, NotKeyValue) {
  expect_mentions(parse_error("op=shift,pad"), {"op 0", "key=value", "'pad'"});
}

TEST(PipelineSpecErrors, UnknownKey) {
  // The message lists the keys of the op at hand, from the schema.
  const std::string m = parse_error("op=shift,pad=4|op=overlay,alpah=0.5");
  expect_mentions(m, {"op 1 (overlay)", "unknown key 'alpah'",
                      "overlay takes op, alpha, alpha_max, per_frame, distinct, index"});
}

TEST(PipelineSpecErrors, KeyForTheWrongOp) {
  expect_mentions(parse_error("op=shift,size=84"), {"op 0", "shift", "'size'", "does not apply"});
  expect_mentions(parse_error("op=crop,size=84,pad=4"), {"op 0", "crop", "'pad'"});
  expect_mentions(parse_error("op=crop,size=84,alpha=0.5"), {"crop", "'alpha'"});
  expect_mentions(parse_error("op=overlay,center=true"), {"overlay", "'center'"});
  expect_mentions(parse_error("op=overlay,padding=zeros"), {"overlay", "'padding'"});
  expect_mentions(parse_error("op=shift,per_frame=true"), {"shift", "'per_frame'"});
  expect_mentions(parse_error("op=shift,alpha_max=1"), {"shift", "'alpha_max'"});
  // The op key may come last; the check still sees the kind.
  expect_mentions(parse_error("alpha=0.5,op=shift"), {"shift", "'alpha'"});
}

TEST(PipelineSpecErrors, BadInteger) {
  expect_mentions(parse_error("op=shift,pad=four"), {"op 0", "'pad'", "integer", "'four'"});
  expect_mentions(parse_error("op=shift,pad=4.5"), {"'pad'", "integer", "'4.5'"});
  expect_mentions(parse_error("op=shift,pad="), {"'pad'", "integer"});
  expect_mentions(parse_error("op=shift,pad=99999999999999999999999"), {"'pad'", "integer"});
  expect_mentions(parse_error("op=shift,index=x"), {"'index'", "integer", "'x'"});
  expect_mentions(parse_error("op=crop,size=84x"), {"'size'", "integer"});
  expect_mentions(parse_error("op=crop,size=ax84"), {"'size'", "integer", "'a'"});
  expect_mentions(parse_error("op=crop,size=8x8x8"), {"'size'", "integer", "'8x8'"});
}

TEST(PipelineSpecErrors, BadNumber) {
  expect_mentions(parse_error("op=overlay,alpha=half"), {"op 0", "'alpha'", "number", "'half'"});
  expect_mentions(parse_error("op=overlay,alpha=0.5x"), {"'alpha'", "number", "'0.5x'"});
  expect_mentions(parse_error("op=overlay,alpha="), {"'alpha'", "number"});
  expect_mentions(parse_error("op=overlay,alpha_max=big"), {"'alpha_max'", "number", "'big'"});
}

TEST(PipelineSpecErrors, BadBool) {
  expect_mentions(parse_error("op=crop,size=8,center=yes"),
                  {"op 0", "'center'", "true or false", "'yes'"});
  expect_mentions(parse_error("op=overlay,per_frame=2"), {"'per_frame'", "true or false", "'2'"});
}

TEST(PipelineSpecErrors, BadPadding) {
  expect_mentions(parse_error("op=shift,padding=reflect"),
                  {"op 0 (shift): padding must be one of replicate, zeros; got 'reflect'"});
  // Built in code, the same check runs when the op is resolved.
  expect_mentions(error_of<c10::ValueError>([] {
                    resolve_pipeline({OpSpec::shift(4, "reflect")}, FrameGeometry{8, 8}, 0, 0);
                  }),
                  {"op 0 (shift): padding must be one of replicate, zeros; got 'reflect'"});
}

TEST(PipelineSpecErrors, CropNeedsASize) {
  expect_mentions(parse_error("op=shift|op=crop,center=true"),
                  {"op 1 (crop): crop needs 'size' (N, or height and width)"});
  expect_mentions(parse_error("op=crop,size=0"),
                  {"op 0 (crop): size must be in 1..1073741824 per side, got 0x0"});
  expect_mentions(parse_error("op=crop,size=8x-1"),
                  {"size must be in 1..1073741824 per side, got 8x-1"});
}

TEST(PipelineSpecErrors, AlphaOutOfRange) {
  expect_mentions(parse_error("op=overlay,alpha=1.5"),
                  {"op 0", "overlay", "alpha", "[0, 1]", "1.5"});
  expect_mentions(parse_error("op=overlay,alpha=-0.25"), {"alpha", "[0, 1]", "-0.25"});
  expect_mentions(parse_error("op=overlay,alpha=nan"), {"alpha", "[0, 1]", "nan"});
  expect_mentions(parse_error("op=overlay,alpha=inf"), {"alpha", "[0, 1]", "inf"});
  expect_mentions(parse_error("op=overlay,alpha=0.5,alpha_max=nan"), {"alpha_max", "nan"});
  expect_mentions(parse_error("op=overlay,alpha=0.5,alpha_max=1.25"), {"alpha_max", "1.25"});
  // The bounds themselves are fine.
  EXPECT_NO_THROW(parse_pipeline("op=overlay,alpha=0|op=overlay,alpha=1,alpha_max=1"));
}

TEST(PipelineSpecErrors, AlphaMaxBelowAlpha) {
  const std::string m = parse_error("op=shift|op=overlay,alpha=0.5,alpha_max=0.25");
  expect_mentions(m, {"op 1", "overlay", "alpha_max", "[alpha, 1]", "0.5", "0.25"});
  EXPECT_NO_THROW(parse_pipeline("op=overlay,alpha=0.5,alpha_max=0.5"));
}

TEST(PipelineSpecErrors, IndexOutOfRange) {
  expect_mentions(parse_error("op=shift,index=32768"), {"op 0", "index", "0..32767", "32768"});
  expect_mentions(parse_error("op=overlay,index=-1"), {"overlay", "index", "0..32767", "-1"});
  EXPECT_NO_THROW(parse_pipeline("op=shift,index=0|op=shift,index=32767"));
}

TEST(PipelineSpecErrors, NegativePad) {
  expect_mentions(parse_error("op=shift,pad=-1"),
                  {"op 0 (shift): pad must be in 0..1048576, got -1"});
  EXPECT_NO_THROW(parse_pipeline("op=shift,pad=0"));
}

// ---------------------------------------------------------------- blend_weight

TEST(BlendWeight, RoundsHalfUp) {
  EXPECT_EQ(blend_weight(0.0), 0u);
  EXPECT_EQ(blend_weight(1.0), 256u);
  EXPECT_EQ(blend_weight(0.5), 128u);
  EXPECT_EQ(blend_weight(0.25), 64u);
  EXPECT_EQ(blend_weight(1.0 / 512.0), 1u);      // 0.5 rounds up
  EXPECT_EQ(blend_weight(3.0 / 512.0), 2u);      // 1.5 -> 2
  EXPECT_EQ(blend_weight(5.0 / 512.0), 3u);      // 2.5 -> 3 (half up, not to even)
  EXPECT_EQ(blend_weight(511.0 / 512.0), 256u);  // 255.5 -> 256
  // Just below a half rounds down. alpha * 256 is exact, so this is
  // 0.5 - 2^-54; floor(x + 0.5) gets it wrong because x + 0.5 rounds to 1.0.
  EXPECT_EQ(blend_weight(std::nextafter(1.0 / 512.0, 0.0)), 0u);
  EXPECT_EQ(blend_weight(std::nextafter(3.0 / 512.0, 0.0)), 1u);
  EXPECT_EQ(blend_weight(std::nextafter(255.0 / 512.0, 0.0)), 127u);
  EXPECT_EQ(blend_weight(0.3), 77u);   // 76.8
  EXPECT_EQ(blend_weight(0.7), 179u);  // 179.2
  for (uint32_t w = 0; w <= 256; ++w) EXPECT_EQ(blend_weight(w / 256.0), w);
}

// ---------------------------------------------------------------- resolve_pipeline

FrameGeometry frames(int64_t h, int64_t w, int64_t c = 3, int64_t pool = 0, int64_t ph = 0,
                     int64_t pw = 0) {
  return FrameGeometry{h, w, c, pool, ph, pw};
}

TEST(ResolvePipeline, SizesFlowThroughCrops) {
  const Pipeline p = {OpSpec::shift(4), OpSpec::crop(90, 80), OpSpec::overlay(0.3, 0.7, true),
                      OpSpec::crop(60, 50, true), OpSpec::shift(2, "zeros")};
  const PipelineDesc d = resolve_pipeline(p, frames(100, 96, 3, 7, 90, 80), 11, 22);
  EXPECT_EQ(d.n_ops, 5);
  EXPECT_EQ(d.in_h, 100);
  EXPECT_EQ(d.in_w, 96);
  EXPECT_EQ(d.out_h, 60);
  EXPECT_EQ(d.out_w, 50);
  EXPECT_EQ(d.frame_channels, 3);
  EXPECT_EQ(d.pool_size, 7);
  EXPECT_EQ(d.seed, 11u);
  EXPECT_EQ(d.step, 22u);
  const int32_t in_hw[5][2] = {{100, 96}, {100, 96}, {90, 80}, {90, 80}, {60, 50}};
  const int32_t out_hw[5][2] = {{100, 96}, {90, 80}, {90, 80}, {60, 50}, {60, 50}};
  for (int k = 0; k < 5; ++k) {
    SCOPED_TRACE("op " + std::to_string(k));
    EXPECT_EQ(d.ops[k].in_h, in_hw[k][0]);
    EXPECT_EQ(d.ops[k].in_w, in_hw[k][1]);
    EXPECT_EQ(d.ops[k].out_h, out_hw[k][0]);
    EXPECT_EQ(d.ops[k].out_w, out_hw[k][1]);
    EXPECT_EQ(d.ops[k].index, static_cast<uint32_t>(k));
  }
  EXPECT_EQ(d.ops[0].kind, OpKind::kShift);
  EXPECT_EQ(d.ops[0].pad, 4);
  EXPECT_FALSE(d.ops[0].zeros);
  EXPECT_EQ(d.ops[1].kind, OpKind::kCrop);
  EXPECT_FALSE(d.ops[1].center);
  EXPECT_EQ(d.ops[2].kind, OpKind::kOverlay);
  EXPECT_EQ(d.ops[2].weight_lo, 77u);
  EXPECT_EQ(d.ops[2].weight_hi, 179u);
  EXPECT_TRUE(d.ops[2].per_frame);
  EXPECT_TRUE(d.ops[3].center);
  EXPECT_EQ(d.ops[4].pad, 2);
  EXPECT_TRUE(d.ops[4].zeros);
}

TEST(ResolvePipeline, FixedAlphaHasOneWeight) {
  const PipelineDesc d =
      resolve_pipeline({OpSpec::overlay(0.5)}, frames(84, 84, 3, 1, 84, 84), 0, 0);
  EXPECT_EQ(d.ops[0].weight_lo, 128u);
  EXPECT_EQ(d.ops[0].weight_hi, 128u);
  EXPECT_FALSE(d.ops[0].per_frame);
}

TEST(ResolvePipeline, EmptyPipelineIsIdentityGeometry) {
  const PipelineDesc d = resolve_pipeline({}, frames(5, 7), 0, 0);
  EXPECT_EQ(d.n_ops, 0);
  EXPECT_EQ(d.out_h, 5);
  EXPECT_EQ(d.out_w, 7);
}

TEST(ResolvePipeline, IndexDefaultsToPositionAndExplicitIsKept) {
  const Pipeline p = {OpSpec::shift(1), OpSpec::shift(1).at_index(42), OpSpec::shift(1),
                      OpSpec::shift(1).at_index(0), OpSpec::shift(1).at_index(32767)};
  const PipelineDesc d = resolve_pipeline(p, frames(8, 8), 0, 0);
  EXPECT_EQ(d.ops[0].index, 0u);
  EXPECT_EQ(d.ops[1].index, 42u);
  EXPECT_EQ(d.ops[2].index, 2u);
  EXPECT_EQ(d.ops[3].index, 0u);
  EXPECT_EQ(d.ops[4].index, 32767u);
}

TEST(ResolvePipeline, PoolSizeMismatchNamesBothSizes) {
  // The overlay after the crop sees 60x50 frames; the pool holds 84x84 images.
  const std::string m = error_of<c10::ValueError>([] {
    resolve_pipeline({OpSpec::crop(60, 50), OpSpec::overlay(0.5)}, frames(84, 84, 3, 4, 84, 84), 0,
                     0);
  });
  expect_mentions(m, {"op 1", "overlay", "84x84", "60x50"});
  // Overlay before the crop is fine with the same pool.
  EXPECT_NO_THROW(resolve_pipeline({OpSpec::overlay(0.5), OpSpec::crop(60, 50)},
                                   frames(84, 84, 3, 4, 84, 84), 0, 0));
}

TEST(ResolvePipeline, OverlayNeedsAPool) {
  expect_mentions(error_of<c10::ValueError>(
                      [] { resolve_pipeline({OpSpec::overlay(0.5)}, frames(8, 8), 0, 0); }),
                  {"op 0", "overlay", "pool"});
}

TEST(ResolvePipeline, CropLargerThanFrame) {
  const std::string m = error_of<c10::ValueError>([] {
    resolve_pipeline({OpSpec::shift(4), OpSpec::crop(90, 80)}, frames(84, 84), 0, 0);
  });
  expect_mentions(
      m, {"op 1 (crop): crop 90x80 is larger than its input 84x84", "size must be at most 84x84"});
  // The second crop sees the first crop's output.
  const std::string m2 = error_of<c10::ValueError>([] {
    resolve_pipeline({OpSpec::crop(60, 60), OpSpec::crop(64, 32)}, frames(84, 84), 0, 0);
  });
  expect_mentions(m2, {"op 1", "64x32", "60x60"});
  EXPECT_NO_THROW(resolve_pipeline({OpSpec::crop(84, 84)}, frames(84, 84), 0, 0));
}

TEST(ResolvePipeline, AtMostEightOps) {
  const Pipeline eight(8, OpSpec::shift(1));
  EXPECT_NO_THROW(resolve_pipeline(eight, frames(8, 8), 0, 0));
  const Pipeline nine(9, OpSpec::shift(1));
  expect_mentions(error_of<c10::ValueError>([&] { resolve_pipeline(nine, frames(8, 8), 0, 0); }),
                  {"at most 8", "9"});
}

TEST(ResolvePipeline, ChecksOpsBuiltInCode) {
  // OpSpec built without the parser goes through the same checks.
  expect_mentions(
      error_of<c10::ValueError>([] { resolve_pipeline({OpSpec::shift(-2)}, frames(8, 8), 0, 0); }),
      {"op 0", "shift", "pad", "-2"});
  expect_mentions(error_of<c10::ValueError>([] {
                    resolve_pipeline({OpSpec::overlay(std::nan(""))}, frames(8, 8, 3, 1, 8, 8), 0,
                                     0);
                  }),
                  {"alpha", "[0, 1]"});
  expect_mentions(error_of<c10::ValueError>([] {
                    resolve_pipeline({OpSpec::overlay(0.6, 0.5)}, frames(8, 8, 3, 1, 8, 8), 0, 0);
                  }),
                  {"alpha_max", "0.5"});
  expect_mentions(
      error_of<c10::ValueError>([] {
        resolve_pipeline({OpSpec::shift(1), OpSpec::shift(1).at_index(70000)}, frames(8, 8), 0, 0);
      }),
      {"op 1", "index", "70000"});
  expect_mentions(
      error_of<c10::ValueError>([] { resolve_pipeline({OpSpec::crop(0, 3)}, frames(8, 8), 0, 0); }),
      {"crop", "size", "0x3"});
}

TEST(ResolvePipeline, EmptyFrameIsAnError) {
  expect_mentions(
      error_of<c10::ValueError>([] { resolve_pipeline({OpSpec::shift(1)}, frames(0, 8), 0, 0); }),
      {"0x8"});
}

TEST(PipelineSpec, HasOverlay) {
  EXPECT_FALSE(has_overlay({}));
  EXPECT_FALSE(has_overlay({OpSpec::shift(1), OpSpec::crop(2, 2)}));
  EXPECT_TRUE(has_overlay({OpSpec::shift(1), OpSpec::overlay(0.5)}));
}

}  // namespace
}  // namespace obsaug
