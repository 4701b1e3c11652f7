#include "kernels/op_schema.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace obsaug {
namespace {

constexpr int64_t kMaxPad = int64_t{1} << 20;
constexpr int64_t kMaxSide = int64_t{1} << 30;  // as resolve_pipeline's frames
constexpr int64_t kMaxIndex = 0x7fff;  // k is 16 bits of the counter; 0x8000 up is the sampler's

// A key of `type` named `name`; the helpers below fill in the rest.
KeySpec key(std::string name, KeyType type, std::string doc) {
  KeySpec k;
  k.name = std::move(name);
  k.type = type;
  k.doc = std::move(doc);
  return k;
}

KeySpec int_key(std::string name, int64_t fallback, int64_t lo, int64_t hi, std::string doc) {
  KeySpec k = key(std::move(name), KeyType::kInt, std::move(doc));
  k.default_value = fallback;
  k.int_min = lo;
  k.int_max = hi;
  return k;
}

KeySpec float_key(std::string name, double fallback, double lo, double hi, std::string doc) {
  KeySpec k = key(std::move(name), KeyType::kFloat, std::move(doc));
  k.default_value = fallback;
  k.float_min = lo;
  k.float_max = hi;
  return k;
}

// An optional float whose range starts at another key's value.
KeySpec float_above_key(std::string name, std::string lo_key, double hi, std::string doc) {
  KeySpec k = key(std::move(name), KeyType::kFloat, std::move(doc));
  k.optional = true;
  k.min_key = std::move(lo_key);
  k.float_max = hi;
  return k;
}

KeySpec bool_key(std::string name, bool fallback, std::string doc) {
  KeySpec k = key(std::move(name), KeyType::kBool, std::move(doc));
  k.default_value = fallback;
  return k;
}

KeySpec enum_key(std::string name, std::vector<std::string> choices, std::string doc) {
  KeySpec k = key(std::move(name), KeyType::kEnum, std::move(doc));
  k.default_value = choices.front();
  k.choices = std::move(choices);
  return k;
}

KeySpec probability_key(double fallback, std::string doc) {
  return float_key("p", fallback, 0.0, 1.0, std::move(doc));
}

KeySpec required_size_key(std::string name, std::string doc) {
  KeySpec k = key(std::move(name), KeyType::kSize, std::move(doc));
  k.required = true;
  k.int_min = 1;
  k.int_max = kMaxSide;
  return k;
}

// Keys every op takes, after its own.
std::vector<KeySpec> with_common_keys(std::vector<KeySpec> keys) {
  KeySpec index = int_key("index", 0, 0, kMaxIndex,
                          "k in the Philox counter; default: the op's position in the pipeline");
  index.optional = true;
  index.default_value = std::monostate{};
  keys.push_back(std::move(index));
  return keys;
}

std::vector<OpSchema> make_schemas() {
  std::vector<OpSchema> ops;
  {
    OpSchema op;
    op.kind = OpKind::kShift;
    op.name = "shift";
    op.doc = "random shift by (dx, dy) in [-pad, pad]^2 (DrQ's pad-then-crop)";
    op.keys = with_common_keys({int_key("pad", 4, 0, kMaxPad, "maximum shift in pixels"),
                                enum_key("padding", {"replicate", "zeros"},
                                         "outside the frame: the nearest border pixel, or 0")});
    ops.push_back(std::move(op));
  }
  {
    OpSchema op;
    op.kind = OpKind::kCrop;
    op.name = "crop";
    op.doc = "random (or centre) crop to size, every offset equally likely";
    op.keys = with_common_keys(
        {required_size_key("size", "output frame size: N (N x N) or height x width"),
         bool_key("center", false, "the centre offset instead of a random one (evaluation)")});
    op.frame_effect = FrameEffect::kCropsToSize;
    op.size_key = "size";
    ops.push_back(std::move(op));
  }
  {
    OpSchema op;
    op.kind = OpKind::kOverlay;
    op.name = "overlay";
    op.doc = "blend a random pool image in with weight alpha (DMControl-GB's random_overlay)";
    op.keys = with_common_keys(
        {float_key("alpha", 0.5, 0.0, 1.0, "blend weight of the distractor"),
         float_above_key("alpha_max", "alpha", 1.0,
                         "when given, the weight is drawn uniformly in [alpha, alpha_max]"),
         bool_key("per_frame", false, "one distractor per stacked frame instead of per sample"),
         bool_key("distinct", false,
                  "the samples of a call see different images (drawn without replacement, "
                  "in blocks of the pool's size)")});
    op.needs.pool = true;
    ops.push_back(std::move(op));
  }
  // The second family (DESIGN.md section 3a).
  {
    OpSchema op;
    op.kind = OpKind::kFlip;
    op.name = "flip";
    op.doc = "mirror the frame left-right (or top-bottom) with probability p";
    op.keys = with_common_keys({probability_key(0.5, "probability that a sample is flipped"),
                                enum_key("axis", {"horizontal", "vertical"},
                                         "horizontal mirrors columns, vertical mirrors rows")});
    ops.push_back(std::move(op));
  }
  {
    OpSchema op;
    op.kind = OpKind::kRotate;
    op.name = "rotate";
    op.doc = "rotate by 1, 2 or 3 quarter turns (torch.rot90) with probability p";
    op.keys = with_common_keys({probability_key(0.5, "probability that a sample is rotated")});
    op.needs_square = true;
    ops.push_back(std::move(op));
  }
  {
    OpSchema op;
    op.kind = OpKind::kTranslate;
    op.name = "translate";
    op.doc = "place the frame at a random offset on a zero canvas of size (RAD's translate)";
    KeySpec size = required_size_key("size", "canvas size: N (N x N) or height x width");
    op.keys = with_common_keys({size});
    op.frame_effect = FrameEffect::kGrowsToSize;
    op.size_key = "size";
    ops.push_back(std::move(op));
  }
  {
    OpSchema op;
    op.kind = OpKind::kCutout;
    op.name = "cutout";
    op.doc = "blank a random rectangle of min..max pixels a side with 0 or a random colour";
    KeySpec max = int_key("max", 30, 1, kMaxSide, "largest rectangle side (inclusive)");
    max.min_key = "min";
    op.keys = with_common_keys(
        {int_key("min", 10, 1, kMaxSide, "smallest rectangle side (inclusive)"), max,
         enum_key("fill", {"zeros", "color"},
                  "0, or one random colour per sample (RAD's random_cutout_color)"),
         probability_key(1.0, "probability that a sample gets a rectangle")});
    ops.push_back(std::move(op));
  }
  {
    OpSchema op;
    op.kind = OpKind::kGrayscale;
    op.name = "grayscale";
    op.doc = "replace R, G and B by their luma (0.299, 0.587, 0.114) with probability p";
    op.keys = with_common_keys({probability_key(1.0, "probability that a sample is grayed")});
    op.needs.mixes_channels = true;
    ops.push_back(std::move(op));
  }
  {
    OpSchema op;
    op.kind = OpKind::kColorJitter;
    op.name = "color_jitter";
    op.doc = "brightness, contrast, saturation and hue jitter in torchvision's order";
    op.keys = with_common_keys(
        {float_key("brightness", 0.4, 0.0, 100.0, "factor drawn in [max(0, 1-x), 1+x]; 0 skips"),
         float_key("contrast", 0.4, 0.0, 100.0, "factor drawn in [max(0, 1-x), 1+x]; 0 skips"),
         float_key("saturation", 0.4, 0.0, 100.0, "factor drawn in [max(0, 1-x), 1+x]; 0 skips"),
         float_key("hue", 0.5, 0.0, 0.5, "hue shift drawn in [-x, x] turns; 0 skips"),
         probability_key(1.0, "probability that a sample is jittered")});
    op.needs.mixes_channels = true;
    op.needs.frame_reduction = true;  // contrast's mean, when contrast > 0
    ops.push_back(std::move(op));
  }
  {
    OpSchema op;
    op.kind = OpKind::kRandomConv;
    op.name = "random_conv";
    op.doc = "a random 3x3 convolution, 3 channels to 3 (DMControl-GB's random_conv, RAD's)";
    op.keys = with_common_keys(
        {enum_key("init", {"normal", "xavier"},
                  "weights N(0, 1) (DMControl-GB) or xavier normal, std sqrt(2/54) (RAD)"),
         enum_key("padding", {"replicate", "zeros"}, "outside the frame: the border pixel, or 0"),
         enum_key("activation", {"sigmoid", "none"},
                  "255 * sigmoid(acc) (DMControl-GB) or 255 * acc (RAD)")});
    op.needs.mixes_channels = true;
    op.needs.neighbourhood_3x3 = true;
    ops.push_back(std::move(op));
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    if (static_cast<size_t>(ops[i].kind) != i)
      throw std::logic_error("op_schemas(): '" + ops[i].name + "' is out of OpKind order");
  }
  return ops;
}

std::string quoted(const std::string& text) { return "'" + text + "'"; }

std::string value_text(const KeyValue& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) return std::to_string(*i);
  if (const auto* f = std::get_if<double>(&value)) return format_number(*f);
  if (const auto* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (const auto* s = std::get_if<std::string>(&value)) return *s;
  if (const auto* z = std::get_if<FrameSize>(&value)) return format_size(*z);
  return "none";
}

// How a value of `type` is written, for "missing" messages.
std::string type_form(KeyType type) {
  switch (type) {
    case KeyType::kInt:
      return "an integer";
    case KeyType::kFloat:
      return "a number";
    case KeyType::kBool:
      return "true or false";
    case KeyType::kEnum:
      return "a name";
    case KeyType::kSize:
      return "N, or height and width";
  }
  return "?";
}

}  // namespace

std::string KeySpec::range_text() const {
  switch (type) {
    case KeyType::kInt:
      return (min_key.empty() ? std::to_string(int_min) : min_key) + ".." + std::to_string(int_max);
    case KeyType::kSize:
      return std::to_string(int_min) + ".." + std::to_string(int_max) + " per side";
    case KeyType::kFloat:
      return "[" + (min_key.empty() ? format_number(float_min) : min_key) + ", " +
             format_number(float_max) + "]";
    case KeyType::kBool:
      return "true, false";
    case KeyType::kEnum: {
      std::string out;
      for (size_t i = 0; i < choices.size(); ++i) out += (i ? ", " : "") + choices[i];
      return out;
    }
  }
  return "?";
}

std::string KeySpec::default_text() const {
  if (required) return "required";
  return value_text(default_value);
}

int OpSchema::key_position(const std::string& key) const {
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i].name == key) return static_cast<int>(i);
  return -1;
}

std::string OpSchema::key_list() const {
  std::string out = "op";
  for (const KeySpec& k : keys) out += ", " + k.name;
  return out;
}

const std::vector<OpSchema>& op_schemas() {
  static const std::vector<OpSchema> schemas = make_schemas();
  return schemas;
}

const OpSchema& op_schema(OpKind kind) { return op_schemas().at(static_cast<size_t>(kind)); }

const OpSchema* find_op_schema(const std::string& name) {
  for (const OpSchema& op : op_schemas())
    if (op.name == name) return &op;
  return nullptr;
}

std::string op_name_list() {
  std::string out;
  for (const OpSchema& op : op_schemas()) out += (out.empty() ? "" : ", ") + op.name;
  return out;
}

std::string format_number(double value) {
  char buffer[64];
  // Whole numbers below 2^53 as integers ("100", not "1e+02").
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 9007199254740992.0) {
    std::snprintf(buffer, sizeof buffer, "%.0f", value);
    return buffer;
  }
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof buffer, "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  return buffer;
}

std::string format_size(const FrameSize& size) {
  return std::to_string(size.height) + "x" + std::to_string(size.width);
}

std::optional<std::string> check_key(const OpSchema& op, const KeySpec& key, const KeyValue& value,
                                     const std::vector<KeyValue>& values) {
  if (std::holds_alternative<std::monostate>(value)) {
    if (key.required)
      return op.name + " needs " + quoted(key.name) + " (" + type_form(key.type) + ")";
    return std::nullopt;
  }
  const std::string got = ", got " + value_text(value);
  switch (key.type) {
    case KeyType::kInt: {
      const int64_t v = std::get<int64_t>(value);
      int64_t lo = key.int_min;
      std::string bounds;
      if (!key.min_key.empty()) {
        lo = std::get<int64_t>(values.at(static_cast<size_t>(op.key_position(key.min_key))));
        bounds = " = " + std::to_string(lo) + ".." + std::to_string(key.int_max);
      }
      if (v < lo || v > key.int_max) return "must be in " + key.range_text() + bounds + got;
      return std::nullopt;
    }
    case KeyType::kSize: {
      const FrameSize v = std::get<FrameSize>(value);
      if (v.height < key.int_min || v.height > key.int_max || v.width < key.int_min ||
          v.width > key.int_max)
        return "must be in " + key.range_text() + got;
      return std::nullopt;
    }
    case KeyType::kFloat: {
      const double v = std::get<double>(value);
      double lo = key.float_min;
      std::string bounds;
      if (!key.min_key.empty()) {
        const int at = op.key_position(key.min_key);
        lo = std::get<double>(values.at(static_cast<size_t>(at)));
        bounds = " = [" + format_number(lo) + ", " + format_number(key.float_max) + "]";
      }
      if (!(std::isfinite(v) && v >= lo && v <= key.float_max))
        return "must be in " + key.range_text() + bounds + got;
      return std::nullopt;
    }
    case KeyType::kEnum: {
      const std::string& v = std::get<std::string>(value);
      for (const std::string& choice : key.choices)
        if (v == choice) return std::nullopt;
      return "must be one of " + key.range_text() + "; got " + quoted(v);
    }
    case KeyType::kBool:
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<FrameSize> frame_size_after_op(const OpSchema& op, const KeyValue& size,
                                             const FrameSize& input, std::string* problem) {
  if (op.needs_square && input.height != FrameSize::kUnknownSide &&
      input.width != FrameSize::kUnknownSide && input.height != input.width) {
    *problem = op.name + " needs a square frame at its input, got " + format_size(input) +
               " (the frame size at this stage); crop to a square first";
    return std::nullopt;
  }
  if (op.frame_effect == FrameEffect::kKeeps) return input;
  const FrameSize s = std::get<FrameSize>(size);
  const bool crops = op.frame_effect == FrameEffect::kCropsToSize;
  const auto fits = [&](int64_t want, int64_t have) {
    return have == FrameSize::kUnknownSide || (crops ? want <= have : want >= have);
  };
  if (fits(s.height, input.height) && fits(s.width, input.width)) return s;
  const auto side = [](int64_t v) {
    return v == FrameSize::kUnknownSide ? std::string("?") : std::to_string(v);
  };
  const std::string known = side(input.height) + "x" + side(input.width);
  *problem = op.name + " " + format_size(s) + " is " + (crops ? "larger" : "smaller") +
             " than its input " + known + " (the frame size at this stage); " + op.size_key +
             " must be at " + (crops ? "most " : "least ") + known;
  return std::nullopt;
}

}  // namespace obsaug
