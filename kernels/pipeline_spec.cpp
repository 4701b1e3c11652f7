#include "kernels/pipeline_spec.h"

#include <c10/util/Exception.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

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

const char* kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kShift:
      return "shift";
    case OpKind::kCrop:
      return "crop";
    case OpKind::kOverlay:
      return "overlay";
  }
  return "?";
}

int64_t parse_int(const std::string& where, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  const long long parsed = std::strtoll(value.c_str(), &end, 10);
  TORCH_CHECK_VALUE(!value.empty() && *end == '\0' && errno == 0, where,
                    " must be an integer, got '", value, "'");
  return parsed;
}

double parse_double(const std::string& where, const std::string& value) {
  char* end = nullptr;
  const double parsed = std::strtod(value.c_str(), &end);
  TORCH_CHECK_VALUE(!value.empty() && *end == '\0', where, " must be a number, got '", value, "'");
  return parsed;
}

bool parse_bool(const std::string& where, const std::string& value) {
  if (value == "true" || value == "True" || value == "1") return true;
  if (value == "false" || value == "False" || value == "0") return false;
  TORCH_CHECK_VALUE(false, where, " must be true or false, got '", value, "'");
}

// "84" or "84x84" (height x width).
void parse_size(const std::string& where, const std::string& value, int64_t* h, int64_t* w) {
  const auto x = value.find('x');
  if (x == std::string::npos) {
    *h = *w = parse_int(where, value);
  } else {
    *h = parse_int(where, value.substr(0, x));
    *w = parse_int(where, value.substr(x + 1));
  }
}

std::string format_double(double value) {
  std::ostringstream out;
  out.precision(17);
  out << value;
  return out.str();
}

void check_op(const OpSpec& op, size_t position) {
  const std::string where = "op " + std::to_string(position) + " (" + kind_name(op.kind) + ")";
  if (op.index) {
    TORCH_CHECK_VALUE(*op.index >= 0 && *op.index <= 0xffff, where,
                      ": index must be in 0..65535, got ", *op.index);
  }
  switch (op.kind) {
    case OpKind::kShift:
      TORCH_CHECK_VALUE(op.pad >= 0 && op.pad <= (1 << 20), where,
                        ": pad must be in 0..1048576 pixels, got ", op.pad);
      break;
    case OpKind::kCrop:
      TORCH_CHECK_VALUE(op.crop_h >= 1 && op.crop_w >= 1, where,
                        ": size must be positive (size=N or size=HxW), got ", op.crop_h, "x",
                        op.crop_w);
      break;
    case OpKind::kOverlay: {
      TORCH_CHECK_VALUE(std::isfinite(op.alpha) && op.alpha >= 0.0 && op.alpha <= 1.0, where,
                        ": alpha must be in [0, 1], got ", op.alpha);
      if (op.alpha_max) {
        const double hi = *op.alpha_max;
        TORCH_CHECK_VALUE(std::isfinite(hi) && hi >= op.alpha && hi <= 1.0, where,
                          ": alpha_max must be in [alpha, 1] = [", op.alpha, ", 1], got ", hi);
      }
      break;
    }
  }
}

}  // namespace

OpSpec OpSpec::shift(int64_t pad, const std::string& padding) {
  TORCH_CHECK_VALUE(padding == "replicate" || padding == "zeros",
                    "shift: padding must be 'replicate' or 'zeros', got '", padding, "'");
  OpSpec op;
  op.kind = OpKind::kShift;
  op.pad = pad;
  op.zeros = padding == "zeros";
  return op;
}

OpSpec OpSpec::crop(int64_t height, int64_t width, bool center) {
  OpSpec op;
  op.kind = OpKind::kCrop;
  op.crop_h = height;
  op.crop_w = width;
  op.center = center;
  return op;
}

OpSpec OpSpec::overlay(double alpha, std::optional<double> alpha_max, bool per_frame) {
  OpSpec op;
  op.kind = OpKind::kOverlay;
  op.alpha = alpha;
  op.alpha_max = alpha_max;
  op.per_frame = per_frame;
  return op;
}

Pipeline parse_pipeline(const std::string& text) {
  Pipeline pipeline;
  if (text.empty()) return pipeline;
  for (const std::string& op_text : split(text, '|')) {
    const std::string where = "op " + std::to_string(pipeline.size());
    OpSpec op;
    bool named = false;
    std::string padding = "replicate";
    bool has_size = false;
    for (const std::string& field : split(op_text, ',')) {
      const auto eq = field.find('=');
      TORCH_CHECK_VALUE(eq != std::string::npos, where, ": expected key=value, got '", field, "'");
      const std::string key = field.substr(0, eq);
      const std::string value = field.substr(eq + 1);
      const std::string at = where + " key '" + key + "'";
      if (key == "op") {
        if (value == "shift")
          op.kind = OpKind::kShift;
        else if (value == "crop")
          op.kind = OpKind::kCrop;
        else if (value == "overlay")
          op.kind = OpKind::kOverlay;
        else
          TORCH_CHECK_VALUE(false, where, ": op must be shift, crop or overlay, got '", value, "'");
        named = true;
      } else if (key == "index") {
        op.index = parse_int(at, value);
      } else if (key == "pad") {
        op.pad = parse_int(at, value);
      } else if (key == "padding") {
        padding = value;
      } else if (key == "size") {
        parse_size(at, value, &op.crop_h, &op.crop_w);
        has_size = true;
      } else if (key == "center") {
        op.center = parse_bool(at, value);
      } else if (key == "alpha") {
        op.alpha = parse_double(at, value);
      } else if (key == "alpha_max") {
        if (value != "None") op.alpha_max = parse_double(at, value);
      } else if (key == "per_frame") {
        op.per_frame = parse_bool(at, value);
      } else {
        TORCH_CHECK_VALUE(false, where, ": unknown key '", key,
                          "'; known keys: op, index, pad, padding (shift), size, center (crop), "
                          "alpha, alpha_max, per_frame (overlay)");
      }
    }
    TORCH_CHECK_VALUE(named, where, ": missing 'op' (shift, crop or overlay) in '", op_text, "'");
    const char* name = kind_name(op.kind);
    const auto only_for = [&](bool allowed, const char* key) {
      TORCH_CHECK_VALUE(allowed, where, " (", name, "): key '", key, "' does not apply to ", name,
                        "; ", name, " takes ",
                        op.kind == OpKind::kShift  ? "pad, padding, index"
                        : op.kind == OpKind::kCrop ? "size, center, index"
                                                   : "alpha, alpha_max, per_frame, index");
    };
    for (const std::string& field : split(op_text, ',')) {
      const std::string key = field.substr(0, field.find('='));
      if (key == "pad" || key == "padding") only_for(op.kind == OpKind::kShift, key.c_str());
      if (key == "size" || key == "center") only_for(op.kind == OpKind::kCrop, key.c_str());
      if (key == "alpha" || key == "alpha_max" || key == "per_frame")
        only_for(op.kind == OpKind::kOverlay, key.c_str());
    }
    if (op.kind == OpKind::kShift) {
      TORCH_CHECK_VALUE(padding == "replicate" || padding == "zeros", where,
                        " (shift): padding must be 'replicate' or 'zeros', got '", padding, "'");
      op.zeros = padding == "zeros";
    }
    if (op.kind == OpKind::kCrop) {
      TORCH_CHECK_VALUE(has_size, where, " (crop): missing 'size' (size=N or size=HxW)");
    }
    check_op(op, pipeline.size());
    pipeline.push_back(op);
  }
  return pipeline;
}

std::string format_pipeline(const Pipeline& pipeline) {
  std::ostringstream out;
  for (size_t i = 0; i < pipeline.size(); ++i) {
    const OpSpec& op = pipeline[i];
    if (i) out << '|';
    out << "op=" << kind_name(op.kind);
    if (op.index) out << ",index=" << *op.index;
    switch (op.kind) {
      case OpKind::kShift:
        out << ",pad=" << op.pad << ",padding=" << (op.zeros ? "zeros" : "replicate");
        break;
      case OpKind::kCrop:
        out << ",size=" << op.crop_h << 'x' << op.crop_w
            << ",center=" << (op.center ? "true" : "false");
        break;
      case OpKind::kOverlay:
        out << ",alpha=" << format_double(op.alpha);
        if (op.alpha_max) out << ",alpha_max=" << format_double(*op.alpha_max);
        out << ",per_frame=" << (op.per_frame ? "true" : "false");
        break;
    }
  }
  return out.str();
}

uint32_t blend_weight(double alpha) {
  return static_cast<uint32_t>(std::round(alpha * 256.0));  // half up: alpha >= 0
}

bool has_overlay(const Pipeline& pipeline) {
  for (const OpSpec& op : pipeline)
    if (op.kind == OpKind::kOverlay) return true;
  return false;
}

PipelineDesc resolve_pipeline(const Pipeline& pipeline, const FrameGeometry& g, uint64_t seed,
                              uint64_t step) {
  TORCH_CHECK_VALUE(static_cast<int>(pipeline.size()) <= kMaxOps, "a pipeline holds at most ",
                    kMaxOps, " ops, got ", pipeline.size());
  TORCH_CHECK_VALUE(g.height >= 1 && g.width >= 1 && g.height <= (1 << 30) && g.width <= (1 << 30),
                    "obs frames must be between 1x1 and 2^30 x 2^30, got ", g.height, "x", g.width);
  PipelineDesc desc{};
  desc.n_ops = static_cast<int32_t>(pipeline.size());
  desc.in_h = static_cast<int32_t>(g.height);
  desc.in_w = static_cast<int32_t>(g.width);
  desc.frame_channels = static_cast<int32_t>(g.frame_channels);
  desc.pool_size = static_cast<int32_t>(g.pool_size);
  desc.seed = seed;
  desc.step = step;
  int32_t h = desc.in_h;
  int32_t w = desc.in_w;
  for (size_t k = 0; k < pipeline.size(); ++k) {
    const OpSpec& spec = pipeline[k];
    check_op(spec, k);
    const std::string where = "op " + std::to_string(k) + " (" + kind_name(spec.kind) + ")";
    OpDesc& op = desc.ops[k];
    op.kind = spec.kind;
    op.index = static_cast<uint32_t>(spec.index.value_or(static_cast<int64_t>(k)));
    op.in_h = op.out_h = h;
    op.in_w = op.out_w = w;
    switch (spec.kind) {
      case OpKind::kShift:
        op.pad = static_cast<int32_t>(spec.pad);
        op.zeros = spec.zeros;
        break;
      case OpKind::kCrop:
        TORCH_CHECK_VALUE(spec.crop_h <= h && spec.crop_w <= w, where, ": crop size ", spec.crop_h,
                          "x", spec.crop_w, " is larger than its input ", h, "x", w,
                          "; the crop must fit inside the frame");
        op.center = spec.center;
        op.out_h = h = static_cast<int32_t>(spec.crop_h);
        op.out_w = w = static_cast<int32_t>(spec.crop_w);
        break;
      case OpKind::kOverlay:
        TORCH_CHECK_VALUE(g.pool_size >= 1, where,
                          ": needs a distractor pool [P, C, H, W] with P >= 1, got ",
                          g.pool_size == 0 ? "no pool" : "an empty pool");
        TORCH_CHECK_VALUE(g.pool_h == h && g.pool_w == w, where, ": pool images are ", g.pool_h,
                          "x", g.pool_w, " but this op sees ", h, "x", w,
                          " frames; build the pool with image_size (", h, ", ", w,
                          ") (obsaug never resizes silently)");
        op.per_frame = spec.per_frame;
        op.weight_lo = blend_weight(spec.alpha);
        op.weight_hi = blend_weight(spec.alpha_max.value_or(spec.alpha));
        break;
    }
  }
  desc.out_h = h;
  desc.out_w = w;
  return desc;
}

}  // namespace obsaug
