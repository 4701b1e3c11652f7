// The user-facing description of a pipeline (an ordered list of ops with
// their parameters), its one-line text form used by the torch.library schema,
// and its resolution into the PipelineDesc the kernels read.
//
// Text form: ops separated by '|', each a comma-separated list of key=value,
// e.g. "op=shift,pad=4,padding=replicate|op=overlay,alpha=0.5". Keys:
//   shift:   pad (int >= 0, default 4), padding (replicate|zeros), index
//   crop:    size (N or HxW, required), center (true|false), index
//   overlay: alpha (0..1, default 0.5), alpha_max (alpha..1), per_frame, index
// `index` is k in the Philox counter; it defaults to the op's position.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/pipeline.h"

namespace obsaug {

struct OpSpec {
  OpKind kind = OpKind::kShift;
  std::optional<int64_t> index;  // defaults to the position in the pipeline
  // shift
  int64_t pad = 4;
  bool zeros = false;
  // crop
  int64_t crop_h = 0;
  int64_t crop_w = 0;
  bool center = false;
  // overlay
  double alpha = 0.5;
  std::optional<double> alpha_max;
  bool per_frame = false;

  static OpSpec shift(int64_t pad, const std::string& padding = "replicate");
  static OpSpec crop(int64_t height, int64_t width, bool center = false);
  static OpSpec overlay(double alpha, std::optional<double> alpha_max = std::nullopt,
                        bool per_frame = false);
  OpSpec& at_index(int64_t k) {
    index = k;
    return *this;
  }
};

using Pipeline = std::vector<OpSpec>;

// Parses and checks the text form; errors name the op, the key and what is allowed.
Pipeline parse_pipeline(const std::string& text);
// The text form of `pipeline` (parse_pipeline(format_pipeline(p)) == p).
std::string format_pipeline(const Pipeline& pipeline);

// w = round(alpha * 256), half up, in double (DESIGN.md section 3).
uint32_t blend_weight(double alpha);

// Geometry the pipeline is applied to.
struct FrameGeometry {
  int64_t height = 0;
  int64_t width = 0;
  int64_t frame_channels = 1;  // C
  int64_t pool_size = 0;       // P, 0 when no pool is given
  int64_t pool_h = 0;
  int64_t pool_w = 0;
};

// Checks every op against the frame geometry and resolves sizes and weights.
PipelineDesc resolve_pipeline(const Pipeline& pipeline, const FrameGeometry& geometry,
                              uint64_t seed, uint64_t step);

bool has_overlay(const Pipeline& pipeline);

}  // namespace obsaug
