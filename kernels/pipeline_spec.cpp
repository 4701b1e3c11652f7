#include "kernels/pipeline_spec.h"

#include <c10/util/Exception.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "kernels/frame_eval.h"

namespace obsaug {
namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream stream(text);
  while (std::getline(stream, part, sep)) parts.push_back(part);
  if (!text.empty() && text.back() == sep) parts.emplace_back();
  return parts;
}

std::string where(size_t position, const OpSpec& op) {
  return "op " + std::to_string(position) + " (" + op.schema().name + ")";
}

int64_t parse_int(const std::string& at, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  const long long parsed = std::strtoll(value.c_str(), &end, 10);
  TORCH_CHECK_VALUE(!value.empty() && *end == '\0' && errno == 0, at, " must be an integer, got '",
                    value, "'");
  return parsed;
}

double parse_double(const std::string& at, const std::string& value) {
  char* end = nullptr;
  const double parsed = std::strtod(value.c_str(), &end);
  TORCH_CHECK_VALUE(!value.empty() && *end == '\0', at, " must be a number, got '", value, "'");
  return parsed;
}

bool parse_bool(const std::string& at, const std::string& value) {
  if (value == "true" || value == "True" || value == "1") return true;
  if (value == "false" || value == "False" || value == "0") return false;
  TORCH_CHECK_VALUE(false, at, " must be true or false, got '", value, "'");
}

// "84" or "84x80" (height x width).
FrameSize parse_size(const std::string& at, const std::string& value) {
  const auto x = value.find('x');
  if (x == std::string::npos) {
    const int64_t side = parse_int(at, value);
    return {side, side};
  }
  return {parse_int(at, value.substr(0, x)), parse_int(at, value.substr(x + 1))};
}

KeyValue parse_value(const KeySpec& key, const std::string& at, const std::string& value) {
  if (key.optional && value == "None") return std::monostate{};
  switch (key.type) {
    case KeyType::kInt:
      return parse_int(at, value);
    case KeyType::kFloat:
      return parse_double(at, value);
    case KeyType::kBool:
      return parse_bool(at, value);
    case KeyType::kEnum:
      return value;
    case KeyType::kSize:
      return parse_size(at, value);
  }
  return std::monostate{};
}

// Throws "op k (name): key message" for the first out-of-range value, or
// "op k (name): crop needs 'size' ..." for a missing required key.
void check_op_at(const OpSpec& op, size_t position) {
  if (const auto problem = check_op(op)) {
    const bool missing = std::holds_alternative<std::monostate>(op.value(problem->key));
    TORCH_CHECK_VALUE(false, where(position, op), ": ", missing ? "" : problem->key + " ",
                      problem->message);
  }
}

std::string format_value(const KeyValue& value, OpStyle style) {
  if (const auto* i = std::get_if<int64_t>(&value)) return std::to_string(*i);
  if (const auto* f = std::get_if<double>(&value)) return format_number(*f);
  if (const auto* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (const auto* s = std::get_if<std::string>(&value)) return *s;
  const FrameSize size = std::get<FrameSize>(value);
  if (size.height == size.width) return std::to_string(size.height);
  if (style == OpStyle::kText) return format_size(size);
  return "[" + std::to_string(size.height) + ", " + std::to_string(size.width) + "]";
}

}  // namespace

OpSpec::OpSpec(OpKind kind) : kind_(kind) {
  for (const KeySpec& key : schema().keys) values_.push_back(key.default_value);
}

size_t OpSpec::position(const std::string& key) const {
  const int at = schema().key_position(key);
  if (at < 0) throw std::logic_error(schema().name + " has no key '" + key + "'");
  return static_cast<size_t>(at);
}

const KeyValue& OpSpec::value(const std::string& key) const { return values_[position(key)]; }

OpSpec& OpSpec::set(const std::string& key, KeyValue value) {
  const size_t at = position(key);
  const KeySpec& spec = schema().keys[at];
  if (std::holds_alternative<int64_t>(value) && spec.type == KeyType::kFloat)
    value = static_cast<double>(std::get<int64_t>(value));
  const bool unset = std::holds_alternative<std::monostate>(value);
  const size_t want = 1 + static_cast<size_t>(spec.type);  // KeyType order == KeyValue order
  if (unset ? !(spec.optional || spec.required) : value.index() != want)
    throw std::logic_error(schema().name + "." + key + ": value of the wrong type");
  values_[at] = std::move(value);
  return *this;
}

template <typename T>
static const T& typed(const OpSpec& op, const std::string& key) {
  const T* v = std::get_if<T>(&op.value(key));
  if (v == nullptr) throw std::logic_error(op.schema().name + "." + key + " is unset");
  return *v;
}

int64_t OpSpec::get_int(const std::string& key) const { return typed<int64_t>(*this, key); }
double OpSpec::get_float(const std::string& key) const { return typed<double>(*this, key); }
bool OpSpec::get_bool(const std::string& key) const { return typed<bool>(*this, key); }
const std::string& OpSpec::get_choice(const std::string& key) const {
  return typed<std::string>(*this, key);
}
FrameSize OpSpec::get_size(const std::string& key) const { return typed<FrameSize>(*this, key); }

std::optional<double> OpSpec::get_optional_float(const std::string& key) const {
  const KeyValue& v = value(key);
  if (std::holds_alternative<std::monostate>(v)) return std::nullopt;
  return std::get<double>(v);
}

std::optional<int64_t> OpSpec::index() const {
  const KeyValue& v = value("index");
  if (std::holds_alternative<std::monostate>(v)) return std::nullopt;
  return std::get<int64_t>(v);
}

OpSpec OpSpec::shift(int64_t pad, const std::string& padding) {
  OpSpec op(OpKind::kShift);
  op.set("pad", pad).set("padding", padding);
  return op;
}

OpSpec OpSpec::crop(int64_t height, int64_t width, bool center) {
  OpSpec op(OpKind::kCrop);
  op.set("size", FrameSize{height, width}).set("center", center);
  return op;
}

OpSpec OpSpec::overlay(double alpha, std::optional<double> alpha_max, bool per_frame,
                       bool distinct) {
  OpSpec op(OpKind::kOverlay);
  op.set("alpha", alpha).set("per_frame", per_frame).set("distinct", distinct);
  if (alpha_max) op.set("alpha_max", *alpha_max);
  return op;
}

bool operator==(const OpSpec& a, const OpSpec& b) {
  return a.kind() == b.kind() && a.values() == b.values();
}

std::optional<KeyProblem> check_op(const OpSpec& op) {
  const OpSchema& schema = op.schema();
  for (size_t i = 0; i < schema.keys.size(); ++i) {
    if (auto message = check_key(schema, schema.keys[i], op.values()[i], op.values()))
      return KeyProblem{schema.keys[i].name, *message};
  }
  return std::nullopt;
}

Pipeline parse_pipeline(const std::string& text) {
  Pipeline pipeline;
  if (text.empty()) return pipeline;
  for (const std::string& op_text : split(text, '|')) {
    const std::string at_op = "op " + std::to_string(pipeline.size());
    // The op's name first: its keys depend on it, and it may come last.
    const OpSchema* schema = nullptr;
    const std::vector<std::string> fields = split(op_text, ',');
    for (const std::string& field : fields) {
      const auto eq = field.find('=');
      TORCH_CHECK_VALUE(eq != std::string::npos, at_op, ": expected key=value, got '", field, "'");
      if (field.substr(0, eq) != "op") continue;
      const std::string name = field.substr(eq + 1);
      schema = find_op_schema(name);
      TORCH_CHECK_VALUE(schema != nullptr, at_op, ": op must be one of ", op_name_list(), "; got '",
                        name, "'");
    }
    TORCH_CHECK_VALUE(schema != nullptr, at_op, ": missing 'op' (one of ", op_name_list(), ") in '",
                      op_text, "'");
    OpSpec op(schema->kind);
    const std::string at = where(pipeline.size(), op);
    for (const std::string& field : fields) {
      const auto eq = field.find('=');
      const std::string key = field.substr(0, eq);
      if (key == "op") continue;
      const int position = schema->key_position(key);
      if (position < 0) {
        bool other_op = false;
        for (const OpSchema& other : op_schemas()) other_op |= other.key_position(key) >= 0;
        TORCH_CHECK_VALUE(!other_op, at, ": key '", key, "' does not apply to ", schema->name, "; ",
                          schema->name, " takes ", schema->key_list());
        TORCH_CHECK_VALUE(false, at, ": unknown key '", key, "'; ", schema->name, " takes ",
                          schema->key_list());
      }
      const KeySpec& spec = schema->keys[static_cast<size_t>(position)];
      op.set(key, parse_value(spec, at + ": key '" + key + "'", field.substr(eq + 1)));
    }
    check_op_at(op, pipeline.size());
    pipeline.push_back(std::move(op));
  }
  return pipeline;
}

std::string format_op(const OpSpec& op, OpStyle style) {
  const bool text = style == OpStyle::kText;
  const char* assign = text ? "=" : ": ";
  const char* sep = text ? "," : ", ";
  std::string out = std::string(text ? "" : "{") + "op" + assign + op.schema().name;
  for (size_t i = 0; i < op.values().size(); ++i) {
    const KeyValue& value = op.values()[i];
    if (std::holds_alternative<std::monostate>(value)) continue;
    out += sep + op.schema().keys[i].name + assign + format_value(value, style);
  }
  return text ? out : out + "}";
}

std::string format_pipeline(const Pipeline& pipeline) {
  std::string out;
  for (size_t i = 0; i < pipeline.size(); ++i)
    out += (i ? "|" : "") + format_op(pipeline[i], OpStyle::kText);
  return out;
}

FrameSizeWalk walk_frame_sizes(const Pipeline& pipeline, const FrameSize& input) {
  FrameSizeWalk walk;
  walk.sizes.push_back(input);
  for (size_t k = 0; k < pipeline.size(); ++k) {
    const OpSchema& schema = pipeline[k].schema();
    const KeyValue none;
    const KeyValue& size = schema.size_key.empty() ? none : pipeline[k].value(schema.size_key);
    std::string problem;
    const std::optional<FrameSize> next =
        frame_size_after_op(schema, size, walk.sizes.back(), &problem);
    if (!next) {
      walk.failed_op = k;
      walk.problem = problem;
      return walk;
    }
    walk.sizes.push_back(*next);
  }
  return walk;
}

std::vector<FrameSize> frame_sizes(const Pipeline& pipeline, const FrameSize& input) {
  for (size_t k = 0; k < pipeline.size(); ++k) check_op_at(pipeline[k], k);
  FrameSizeWalk walk = walk_frame_sizes(pipeline, input);
  if (walk.failed_op) {
    TORCH_CHECK_VALUE(false, where(*walk.failed_op, pipeline[*walk.failed_op]), ": ", walk.problem);
  }
  return std::move(walk.sizes);
}

uint32_t blend_weight(double alpha) {
  return static_cast<uint32_t>(std::round(alpha * 256.0));  // half up: alpha >= 0
}

uint32_t gate_threshold(double p) {
  return static_cast<uint32_t>(std::min(16777216.0, std::ceil(p * 16777216.0)));
}

std::string output_affine_problem(double scale, double bias) {
  std::ostringstream out;
  if (!std::isfinite(scale) || !std::isfinite(bias)) {
    out << "scale and bias must be finite, got scale=" << scale << " bias=" << bias;
    return out.str();
  }
  const float s = static_cast<float>(scale);
  const float b = static_cast<float>(bias);
  if (!std::isfinite(s) || !std::isfinite(b)) {
    out << "scale=" << scale << " bias=" << bias << " are beyond float32, whose largest "
        << "finite value is about 3.4e38";
    return out.str();
  }
  if (scale != 0 && s == 0.0f) {
    out << "scale " << scale << " rounds to 0 in float32 (every output would be the bias); "
        << "the smallest nonzero float32 is about 1.4e-45";
    return out.str();
  }
  // The output is affine in v, so its largest magnitude is at v = 0 or 255.
  for (const float v : {0.0f, 255.0f}) {
    if (!std::isfinite(to_output(v, s, b, nullptr))) {
      out << "scale=" << scale << " bias=" << bias << " overflow float32 (" << v << " * scale + "
          << "bias is not finite); |255 * scale + bias| and |bias| must stay below 3.4e38";
      return out.str();
    }
  }
  return "";
}

namespace {

// color_jitter's factor range for strength x, as float32 lo and span from
// double (DESIGN.md section 3a): [max(0, 1-x), 1+x], or [-x, x] for hue.
void set_jitter_part(OpDesc* op, JitterPart part, double x) {
  const double lo = part == kHue ? -x : std::max(0.0, 1.0 - x);
  const double hi = part == kHue ? x : 1.0 + x;
  op->jitter_on[part] = x > 0.0;
  op->jitter_lo[part] = static_cast<float>(lo);
  op->jitter_span[part] = static_cast<float>(hi - lo);
}

// Op k mixes channels: C must be 3.
void check_rgb_frames(size_t k, const OpSpec& spec, const FrameGeometry& g) {
  if (!spec.schema().needs.mixes_channels || g.frame_channels == 3) return;
  TORCH_CHECK_VALUE(
      false, where(k, spec), ": needs RGB frames (C = 3 channels per stacked frame), ",
      g.channels_source != nullptr
          ? "got C = " + std::to_string(g.frame_channels) + " (" + g.channels_source + ")"
          : "got C = 1: obs has S*C = " + std::to_string(g.channels) +
                " channels, not a multiple of 3");
}

}  // namespace

void check_channel_mixing(const Pipeline& pipeline, const FrameGeometry& g) {
  for (size_t k = 0; k < pipeline.size(); ++k) check_rgb_frames(k, pipeline[k], g);
}

bool has_overlay(const Pipeline& pipeline) {
  for (const OpSpec& op : pipeline)
    if (op.schema().needs.pool) return true;
  return false;
}

PipelineDesc resolve_pipeline(const Pipeline& pipeline, const FrameGeometry& g, uint64_t seed,
                              uint64_t step) {
  TORCH_CHECK_VALUE(static_cast<int>(pipeline.size()) <= kMaxOps, "a pipeline holds at most ",
                    kMaxOps, " ops, got ", pipeline.size());
  TORCH_CHECK_VALUE(g.height >= 1 && g.width >= 1 && g.height <= (1 << 30) && g.width <= (1 << 30),
                    "obs frames must be between 1x1 and 2^30 x 2^30, got ", g.height, "x", g.width);
  TORCH_CHECK_VALUE(g.frame_channels >= 1 && g.frame_channels <= INT32_MAX,
                    "frames of C = ", g.frame_channels, " channels (",
                    g.channels_source != nullptr ? g.channels_source : "guessed",
                    "); C must lie in [1, 2^31)");
  // The frame index is 15 bits of the counter (DESIGN.md section 3a).
  TORCH_CHECK_VALUE(g.channels / g.frame_channels < kMaxFrames,
                    "obs holds S = ", g.channels / g.frame_channels,
                    " stacked frames of C = ", g.frame_channels, " channels; at most ",
                    kMaxFrames - 1, " are allowed");
  const std::vector<FrameSize> sizes = frame_sizes(pipeline, {g.height, g.width});
  PipelineDesc desc{};
  desc.n_ops = static_cast<int32_t>(pipeline.size());
  desc.in_h = static_cast<int32_t>(g.height);
  desc.in_w = static_cast<int32_t>(g.width);
  desc.out_h = static_cast<int32_t>(sizes.back().height);
  desc.out_w = static_cast<int32_t>(sizes.back().width);
  desc.frame_channels = static_cast<int32_t>(g.frame_channels);
  desc.pool_size = static_cast<int32_t>(g.pool_size);
  desc.seed = seed;
  desc.step = step;
  for (size_t k = 0; k < pipeline.size(); ++k) {
    const OpSpec& spec = pipeline[k];
    OpDesc& op = desc.ops[k];
    op.kind = spec.kind();
    op.index = static_cast<uint32_t>(spec.index().value_or(static_cast<int64_t>(k)));
    op.mixes_channels = spec.schema().needs.mixes_channels;
    op.in_h = static_cast<int32_t>(sizes[k].height);
    op.in_w = static_cast<int32_t>(sizes[k].width);
    op.out_h = static_cast<int32_t>(sizes[k + 1].height);
    op.out_w = static_cast<int32_t>(sizes[k + 1].width);
    if (spec.schema().needs.pool) {
      const int32_t h = op.in_h;
      const int32_t w = op.in_w;
      TORCH_CHECK_VALUE(g.pool_size >= 1, where(k, spec),
                        ": needs a distractor pool [P, C, H, W] with P >= 1, got ",
                        g.pool_size == 0 ? "no pool" : "an empty pool");
      TORCH_CHECK_VALUE(g.pool_h == h && g.pool_w == w, where(k, spec), ": pool images are ",
                        g.pool_h, "x", g.pool_w, " but this op sees ", h, "x", w,
                        " frames; build the pool with image_size (", h, ", ", w,
                        ") (obsaug never resizes silently)");
    }
    // Each op's values as its per-pixel math reads them (kernels/pipeline.h).
    switch (spec.kind()) {
      case OpKind::kShift:
        op.pad = static_cast<int32_t>(spec.get_int("pad"));
        op.zeros = spec.get_choice("padding") == "zeros";
        break;
      case OpKind::kCrop:
        op.center = spec.get_bool("center");
        break;
      case OpKind::kOverlay: {
        const double alpha = spec.get_float("alpha");
        op.per_frame = spec.get_bool("per_frame");
        op.distinct = spec.get_bool("distinct");
        op.weight_lo = blend_weight(alpha);
        op.weight_hi = blend_weight(spec.get_optional_float("alpha_max").value_or(alpha));
        break;
      }
      case OpKind::kFlip:
        op.gate = gate_threshold(spec.get_float("p"));
        op.vertical = spec.get_choice("axis") == "vertical";
        break;
      case OpKind::kRotate:
      case OpKind::kGrayscale:
        op.gate = gate_threshold(spec.get_float("p"));
        break;
      case OpKind::kTranslate:
        break;
      case OpKind::kCutout:
        op.gate = gate_threshold(spec.get_float("p"));
        op.cut_min = static_cast<int32_t>(std::min<int64_t>(spec.get_int("min"), 1 << 30));
        op.cut_max = static_cast<int32_t>(std::min<int64_t>(spec.get_int("max"), 1 << 30));
        op.fill_color = spec.get_choice("fill") == "color";
        break;
      case OpKind::kColorJitter:
        op.gate = gate_threshold(spec.get_float("p"));
        set_jitter_part(&op, kBrightness, spec.get_float("brightness"));
        set_jitter_part(&op, kContrast, spec.get_float("contrast"));
        set_jitter_part(&op, kSaturation, spec.get_float("saturation"));
        set_jitter_part(&op, kHue, spec.get_float("hue"));
        break;
      case OpKind::kRandomConv:
        op.zeros = spec.get_choice("padding") == "zeros";
        op.sigmoid = spec.get_choice("activation") == "sigmoid";
        op.conv_std = spec.get_choice("init") == "xavier"
                          ? static_cast<float>(std::sqrt(2.0 / 54.0))  // 0x3e4511a3
                          : 1.0f;
        break;
    }
    check_rgb_frames(k, spec, g);
  }
  plan_segments(&desc);
  return desc;
}

}  // namespace obsaug
