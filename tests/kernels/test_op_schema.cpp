// The op schema (kernels/op_schema.h) and what is derived from it: every op
// has its keys, every range is enforced with its range text, frame_sizes
// walks the frame size, the text and YAML forms round trip, and OpSpec's ==
// sees every key. The checks are generated over the table, so a new op is
// covered by adding it there.
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "kernels/op_schema.h"
#include "kernels/pipeline_spec.h"
#include "tests/test_util.h"

namespace obsaug {
namespace {

using testing::error_of;

std::vector<std::string> key_names(const OpSchema& op) {
  std::vector<std::string> names;
  for (const KeySpec& key : op.keys) names.push_back(key.name);
  return names;
}

// A valid value of `key` that differs from `value` (the op's other values
// at their defaults).
KeyValue another_value(const KeySpec& key, const KeyValue& value) {
  switch (key.type) {
    case KeyType::kInt: {
      const int64_t v = std::holds_alternative<int64_t>(value) ? std::get<int64_t>(value) : -1;
      return v == key.int_max ? key.int_min : key.int_max;
    }
    case KeyType::kFloat: {
      const double v = std::holds_alternative<double>(value) ? std::get<double>(value) : -1.0;
      return v == key.float_max ? std::nextafter(key.float_max, 0.0) : key.float_max;
    }
    case KeyType::kBool:
      return !std::get<bool>(value);
    case KeyType::kEnum:
      return std::get<std::string>(value) == key.choices.back() ? key.choices.front()
                                                                : key.choices.back();
    case KeyType::kSize: {
      const FrameSize v =
          std::holds_alternative<FrameSize>(value) ? std::get<FrameSize>(value) : FrameSize{0, 0};
      return v == FrameSize{2, 3} ? FrameSize{3, 2} : FrameSize{2, 3};
    }
  }
  return std::monostate{};
}

// Every key set to a value other than its default: what a round trip must keep.
OpSpec every_key_set(const OpSchema& schema) {
  OpSpec op(schema.kind);
  for (const KeySpec& key : schema.keys) op.set(key.name, another_value(key, op.value(key.name)));
  EXPECT_FALSE(check_op(op).has_value()) << format_op(op, OpStyle::kText);
  return op;
}

// ---------------------------------------------------------------- the table

TEST(OpSchema, TableIsInOpKindOrderAndFindsByName) {
  ASSERT_FALSE(op_schemas().empty());
  for (size_t i = 0; i < op_schemas().size(); ++i) {
    const OpSchema& op = op_schemas()[i];
    EXPECT_EQ(static_cast<size_t>(op.kind), i) << op.name;
    EXPECT_EQ(&op_schema(op.kind), &op);
    EXPECT_EQ(find_op_schema(op.name), &op);
  }
  EXPECT_EQ(find_op_schema("rotate90"), nullptr);
  EXPECT_EQ(op_name_list(),
            "shift, crop, overlay, flip, rotate, translate, cutout, grayscale, color_jitter, "
            "random_conv");
}

TEST(OpSchema, EveryOpHasItsDocumentedKeys) {
  // The key names are API (DESIGN.md section 7): spelled out here on purpose.
  EXPECT_EQ(key_names(op_schema(OpKind::kShift)),
            (std::vector<std::string>{"pad", "padding", "index"}));
  EXPECT_EQ(key_names(op_schema(OpKind::kCrop)),
            (std::vector<std::string>{"size", "center", "index"}));
  EXPECT_EQ(key_names(op_schema(OpKind::kOverlay)),
            (std::vector<std::string>{"alpha", "alpha_max", "per_frame", "distinct", "index"}));
  EXPECT_EQ(op_schema(OpKind::kOverlay).key_list(),
            "op, alpha, alpha_max, per_frame, distinct, index");
  EXPECT_EQ(key_names(op_schema(OpKind::kFlip)), (std::vector<std::string>{"p", "axis", "index"}));
  EXPECT_EQ(key_names(op_schema(OpKind::kRotate)), (std::vector<std::string>{"p", "index"}));
  EXPECT_EQ(key_names(op_schema(OpKind::kTranslate)), (std::vector<std::string>{"size", "index"}));
  EXPECT_EQ(key_names(op_schema(OpKind::kCutout)),
            (std::vector<std::string>{"min", "max", "fill", "p", "index"}));
  EXPECT_EQ(key_names(op_schema(OpKind::kGrayscale)), (std::vector<std::string>{"p", "index"}));
  EXPECT_EQ(
      key_names(op_schema(OpKind::kColorJitter)),
      (std::vector<std::string>{"brightness", "contrast", "saturation", "hue", "p", "index"}));
  EXPECT_EQ(key_names(op_schema(OpKind::kRandomConv)),
            (std::vector<std::string>{"init", "padding", "activation", "index"}));
  for (const OpSchema& op : op_schemas()) {
    SCOPED_TRACE(op.name);
    EXPECT_EQ(op.keys.back().name, "index");
    EXPECT_TRUE(op.keys.back().optional);
    EXPECT_FALSE(op.doc.empty());
    for (const KeySpec& key : op.keys) {
      SCOPED_TRACE(key.name);
      EXPECT_EQ(op.key_position(key.name), &key - op.keys.data());
      EXPECT_FALSE(key.doc.empty());
      // A default exactly when the key is neither optional nor required.
      EXPECT_EQ(std::holds_alternative<std::monostate>(key.default_value),
                key.optional || key.required);
      if (key.type == KeyType::kEnum) {
        EXPECT_GE(key.choices.size(), 2u);
      }
      if (!key.min_key.empty()) {
        EXPECT_GE(op.key_position(key.min_key), 0);
      }
    }
    // The defaults are in range.
    EXPECT_FALSE(check_op(every_key_set(op)).has_value());
    if (op.frame_effect != FrameEffect::kKeeps) {
      ASSERT_GE(op.key_position(op.size_key), 0);
      EXPECT_EQ(op.keys[op.key_position(op.size_key)].type, KeyType::kSize);
    }
  }
  EXPECT_EQ(op_schema(OpKind::kShift).key_position("alpha"), -1);
}

TEST(OpSchema, FrameEffectsAndNeeds) {
  EXPECT_EQ(op_schema(OpKind::kShift).frame_effect, FrameEffect::kKeeps);
  EXPECT_EQ(op_schema(OpKind::kCrop).frame_effect, FrameEffect::kCropsToSize);
  EXPECT_EQ(op_schema(OpKind::kCrop).size_key, "size");
  EXPECT_EQ(op_schema(OpKind::kOverlay).frame_effect, FrameEffect::kKeeps);
  for (const OpSchema& op : op_schemas()) {
    SCOPED_TRACE(op.name);
    const bool rgb = op.kind == OpKind::kGrayscale || op.kind == OpKind::kColorJitter ||
                     op.kind == OpKind::kRandomConv;
    EXPECT_EQ(op.needs.pool, op.kind == OpKind::kOverlay);
    EXPECT_EQ(op.needs.mixes_channels, rgb);
    EXPECT_EQ(op.needs.neighbourhood_3x3, op.kind == OpKind::kRandomConv);
    EXPECT_EQ(op.needs.frame_reduction, op.kind == OpKind::kColorJitter);
    EXPECT_EQ(op.needs_square, op.kind == OpKind::kRotate);
  }
  EXPECT_FALSE(has_overlay({OpSpec::shift(1), OpSpec::crop(2, 2)}));
  EXPECT_TRUE(has_overlay({OpSpec::crop(2, 2), OpSpec::overlay(0.5)}));
}

TEST(OpSchema, RangeAndDefaultTexts) {
  // op, key index, range_text(), default_text() (nullptr: not checked)
  struct Case {
    OpKind op;
    size_t key;
    const char* range;
    const char* fallback;
  };
  const Case cases[] = {{OpKind::kShift, 0, "0..1048576", "4"},
                        {OpKind::kShift, 1, "replicate, zeros", "replicate"},
                        {OpKind::kShift, 2, "0..32767", "none"},
                        {OpKind::kCrop, 0, "1..1073741824 per side", "required"},
                        {OpKind::kCrop, 1, "true, false", "false"},
                        {OpKind::kOverlay, 0, "[0, 1]", "0.5"},
                        {OpKind::kOverlay, 1, "[alpha, 1]", nullptr}};
  for (const Case& c : cases) {
    const KeySpec& key = op_schema(c.op).keys.at(c.key);
    SCOPED_TRACE(op_schema(c.op).name + "." + key.name);
    EXPECT_EQ(key.range_text(), c.range);
    if (c.fallback != nullptr) {
      EXPECT_EQ(key.default_text(), c.fallback);
    }
  }
}

// ---------------------------------------------------------------- ranges

// For every bounded key: the ends are accepted, one step outside is refused
// with "KEY must be in RANGE, got VALUE" through the parser and the resolver.
TEST(OpSchema, EveryRangeIsEnforcedWithItsText) {
  for (const OpSchema& schema : op_schemas()) {
    for (const KeySpec& key : schema.keys) {
      SCOPED_TRACE(schema.name + "." + key.name);
      std::vector<KeyValue> good;
      std::vector<KeyValue> bad;
      switch (key.type) {
        case KeyType::kInt: {
          const int64_t lo = key.min_key.empty() ? key.int_min : 10;
          good = {lo, key.int_max};
          bad = {lo - 1, key.int_max + 1};
          break;
        }
        case KeyType::kSize:
          good = {FrameSize{key.int_min, key.int_max}};
          bad = {FrameSize{key.int_min - 1, key.int_min}, FrameSize{key.int_min, key.int_max + 1}};
          break;
        case KeyType::kFloat: {
          const double lo = key.min_key.empty() ? key.float_min : 0.5;
          good = {lo, key.float_max};
          bad = {std::nextafter(lo, -1.0),
                 std::nextafter(key.float_max, std::numeric_limits<double>::infinity()),
                 std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()};
          break;
        }
        case KeyType::kEnum:
          good = {key.choices.front(), key.choices.back()};
          bad = {std::string("no_such_choice")};
          break;
        case KeyType::kBool:
          good = {true, false};
          break;
      }
      OpSpec op = every_key_set(schema);
      if (!key.min_key.empty())
        op.set(key.min_key, key.type == KeyType::kInt ? KeyValue{int64_t{10}} : KeyValue{0.5});
      for (const KeyValue& v : good) {
        op.set(key.name, v);
        EXPECT_FALSE(check_op(op).has_value()) << format_op(op, OpStyle::kText);
      }
      for (const KeyValue& v : bad) {
        op.set(key.name, v);
        const std::optional<KeyProblem> problem = check_op(op);
        ASSERT_TRUE(problem.has_value()) << format_op(op, OpStyle::kText);
        EXPECT_EQ(problem->key, key.name);
        const std::string range = key.type == KeyType::kEnum ? "must be one of " + key.range_text()
                                                             : "must be in " + key.range_text();
        EXPECT_EQ(problem->message.rfind(range, 0), 0u) << problem->message;
        // The parser and the resolver print it after "op 0 (name): key ".
        const std::string prefix = "op 0 (" + schema.name + "): " + key.name + " " + range;
        if (key.type != KeyType::kFloat || std::isfinite(std::get<double>(v))) {
          EXPECT_NE(error_of<c10::ValueError>([&] {
                      parse_pipeline(format_pipeline({op}));
                    }).find(prefix),
                    std::string::npos);
        }
        EXPECT_NE(error_of<c10::ValueError>([&] {
                    frame_sizes({op}, {1 << 30, 1 << 30});
                  }).find(prefix),
                  std::string::npos);
      }
    }
  }
}

TEST(OpSchema, RangeMessagesNameTheValue) {
  OpSpec overlay = OpSpec::overlay(0.5, 0.4);
  EXPECT_EQ(check_op(overlay)->message, "must be in [alpha, 1] = [0.5, 1], got 0.4");
  EXPECT_EQ(check_op(OpSpec::shift(-1))->message, "must be in 0..1048576, got -1");
  EXPECT_EQ(check_op(OpSpec::crop(0, 5))->message, "must be in 1..1073741824 per side, got 0x5");
  EXPECT_EQ(check_op(OpSpec::shift(1, "reflect"))->message,
            "must be one of replicate, zeros; got 'reflect'");
  const std::optional<KeyProblem> missing = check_op(OpSpec(OpKind::kCrop));
  ASSERT_TRUE(missing.has_value());
  EXPECT_EQ(missing->key, "size");
  EXPECT_EQ(missing->message, "crop needs 'size' (N, or height and width)");
}

// ---------------------------------------------------------------- frame sizes

TEST(FrameSizes, WalksEveryOp) {
  const Pipeline p = {OpSpec::shift(4), OpSpec::crop(90, 80), OpSpec::overlay(0.3),
                      OpSpec::crop(60, 50, true), OpSpec::shift(2, "zeros")};
  const std::vector<FrameSize> sizes = frame_sizes(p, {100, 96});
  EXPECT_EQ(sizes,
            (std::vector<FrameSize>{{100, 96}, {100, 96}, {90, 80}, {90, 80}, {60, 50}, {60, 50}}));
  EXPECT_EQ(frame_sizes({}, {5, 7}), (std::vector<FrameSize>{{5, 7}}));
}

TEST(FrameSizes, UnknownSidesStayUnknownUntilAnOpSetsThem) {
  const int64_t unknown = FrameSize::kUnknownSide;
  const std::vector<FrameSize> sizes =
      frame_sizes({OpSpec::shift(1), OpSpec::crop(8, 6)}, {unknown, 10});
  EXPECT_EQ(sizes, (std::vector<FrameSize>{{unknown, 10}, {unknown, 10}, {8, 6}}));
  // Only the known side is compared.
  const std::string m = error_of<c10::ValueError>([&] {
    frame_sizes({OpSpec::crop(8, 12)}, {unknown, 10});
  });
  EXPECT_NE(m.find("crop 8x12 is larger than its input ?x10"), std::string::npos) << m;
}

TEST(FrameSizes, RefusesACropLargerThanItsInput) {
  const std::string m = error_of<c10::ValueError>([] {
    frame_sizes({OpSpec::crop(60, 60), OpSpec::crop(64, 32)}, {84, 84});
  });
  EXPECT_NE(m.find("op 1 (crop): crop 64x32 is larger than its input 60x60 (the frame size at "
                   "this stage); size must be at most 60x60"),
            std::string::npos)
      << m;
  const FrameSizeWalk walk =
      walk_frame_sizes({OpSpec::crop(60, 60), OpSpec::crop(64, 32)}, {84, 84});
  EXPECT_EQ(walk.failed_op, 1u);
  EXPECT_EQ(walk.sizes, (std::vector<FrameSize>{{84, 84}, {60, 60}}));
  EXPECT_EQ(walk.problem.rfind("crop 64x32 is larger", 0), 0u);
}

TEST(FrameSizes, AGrowingOpMustCoverItsInput) {
  // The effect the next family's translate uses, on a schema built here.
  OpSchema grows = op_schema(OpKind::kCrop);
  grows.name = "translate";
  grows.frame_effect = FrameEffect::kGrowsToSize;
  std::string problem;
  const auto out = frame_size_after_op(grows, FrameSize{108, 100}, {84, 84}, &problem);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(*out, (FrameSize{108, 100}));
  EXPECT_FALSE(frame_size_after_op(grows, FrameSize{80, 100}, {84, 84}, &problem).has_value());
  EXPECT_EQ(problem,
            "translate 80x100 is smaller than its input 84x84 (the frame size at this stage); "
            "size must be at least 84x84");
  EXPECT_TRUE(
      frame_size_after_op(grows, FrameSize{80, 100}, {FrameSize::kUnknownSide, 84}, &problem)
          .has_value());
}

// ---------------------------------------------------------------- formatting

TEST(FormatOp, TextAndYamlForms) {
  const OpSpec crop = OpSpec::crop(84, 80, true).at_index(3);
  EXPECT_EQ(format_op(crop, OpStyle::kText), "op=crop,size=84x80,center=true,index=3");
  EXPECT_EQ(format_op(crop, OpStyle::kYaml), "{op: crop, size: [84, 80], center: true, index: 3}");
  EXPECT_EQ(format_op(OpSpec::crop(84, 84), OpStyle::kYaml), "{op: crop, size: 84, center: false}");
  EXPECT_EQ(format_op(OpSpec::overlay(0.1, 1.0 / 3.0), OpStyle::kText),
            "op=overlay,alpha=0.1,alpha_max=0.3333333333333333,per_frame=false,distinct=false");
  EXPECT_EQ(format_op(OpSpec::shift(4), OpStyle::kYaml), "{op: shift, pad: 4, padding: replicate}");
}

TEST(FormatOp, EveryKeyRoundTripsThroughTheTextForm) {
  for (const OpSchema& schema : op_schemas()) {
    SCOPED_TRACE(schema.name);
    const OpSpec op = every_key_set(schema);
    const std::string text = format_op(op, OpStyle::kText);
    for (const KeySpec& key : schema.keys)
      EXPECT_NE(text.find("," + key.name + "="), std::string::npos) << text;
    const Pipeline parsed = parse_pipeline(text);
    ASSERT_EQ(parsed.size(), 1u);
    EXPECT_EQ(parsed[0], op) << text;
    EXPECT_EQ(format_pipeline(parsed), text);
  }
}

// ---------------------------------------------------------------- equality

TEST(OpSpecEquality, SeesEveryKeyOfEveryOp) {
  for (const OpSchema& schema : op_schemas()) {
    const OpSpec base(schema.kind);
    EXPECT_EQ(base, OpSpec(schema.kind));
    for (const KeySpec& key : schema.keys) {
      SCOPED_TRACE(schema.name + "." + key.name);
      OpSpec changed = base;
      changed.set(key.name, another_value(key, base.value(key.name)));
      EXPECT_NE(changed, base);
      // Setting it back makes them equal again.
      changed.set(key.name, base.value(key.name));
      EXPECT_EQ(changed, base);
    }
  }
  EXPECT_NE(OpSpec(OpKind::kShift), OpSpec(OpKind::kOverlay));
  EXPECT_NE(OpSpec::shift(4), OpSpec::shift(4).at_index(0));  // unset index != 0
}

TEST(OpSpecAccess, WrongKeysAndTypesAreProgrammingErrors) {
  OpSpec shift = OpSpec::shift(4);
  EXPECT_THROW(shift.get_int("alpha"), std::logic_error);
  EXPECT_THROW(shift.get_float("pad"), std::logic_error);
  EXPECT_THROW(shift.set("pad", 0.5), std::logic_error);
  EXPECT_THROW(shift.set("pad", std::monostate{}), std::logic_error);  // pad has a default
  OpSpec overlay = OpSpec::overlay(0.5);
  overlay.set("alpha", int64_t{1});  // an int is a valid float
  EXPECT_EQ(overlay.get_float("alpha"), 1.0);
  overlay.set("alpha_max", 1.0).set("alpha_max", std::monostate{});
  EXPECT_FALSE(overlay.get_optional_float("alpha_max").has_value());
}

}  // namespace
}  // namespace obsaug
