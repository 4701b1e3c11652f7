// The user-facing description of a pipeline (an ordered list of ops with
// their parameters), its text forms and its resolution into the
// PipelineDesc the kernels read. Which keys an op has, their types, defaults
// and ranges come from the op schema (kernels/op_schema.h); nothing here
// lists them again.
//
// Text form (the torch.library schema's `str pipeline`): ops separated by
// '|', each a comma-separated list of key=value, e.g.
// "op=shift,pad=4,padding=replicate|op=overlay,alpha=0.5". Sizes are N or
// HxW, booleans true/false (also True/False/1/0), an optional key may be
// None. `index` is k in the Philox counter; it defaults to the op's position.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/op_schema.h"
#include "kernels/pipeline.h"

namespace obsaug {

// One op: its kind and one value per key of its schema, in the schema's key
// order, each at its default until set (optional and required keys start
// unset). set() and the typed getters throw std::logic_error for a key the
// op does not have or a value of the wrong type: a programming error, not
// bad input. Ranges are checked by check_op (and parse/resolve), not here.
class OpSpec {
 public:
  OpSpec() : OpSpec(OpKind::kShift) {}
  explicit OpSpec(OpKind kind);

  OpKind kind() const { return kind_; }
  const OpSchema& schema() const { return op_schema(kind_); }
  // Values in the schema's key order.
  const std::vector<KeyValue>& values() const { return values_; }

  const KeyValue& value(const std::string& key) const;
  OpSpec& set(const std::string& key, KeyValue value);
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  std::optional<double> get_optional_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  const std::string& get_choice(const std::string& key) const;
  FrameSize get_size(const std::string& key) const;
  // k in the Philox counter, when set; the pipeline position otherwise.
  std::optional<int64_t> index() const;

  static OpSpec shift(int64_t pad, const std::string& padding = "replicate");
  static OpSpec crop(int64_t height, int64_t width, bool center = false);
  static OpSpec overlay(double alpha, std::optional<double> alpha_max = std::nullopt,
                        bool per_frame = false, bool distinct = false);
  OpSpec& at_index(int64_t k) { return set("index", k); }

 private:
  size_t position(const std::string& key) const;
  OpKind kind_;
  std::vector<KeyValue> values_;
};

// Same kind and every value equal (doubles exactly): a comparison over the
// schema's keys, so no key can be left out of it.
bool operator==(const OpSpec& a, const OpSpec& b);
inline bool operator!=(const OpSpec& a, const OpSpec& b) { return !(a == b); }

using Pipeline = std::vector<OpSpec>;

// The problem with `op`'s values (first key in schema order), nullopt when
// every value is in range. KeyProblem::message has no prefix (op_schema.h).
struct KeyProblem {
  std::string key;
  std::string message;
};
std::optional<KeyProblem> check_op(const OpSpec& op);

// Parses and checks the text form; errors (c10::ValueError) name the op's
// position and name, the key and what is allowed.
Pipeline parse_pipeline(const std::string& text);

// How format_op writes an op.
enum class OpStyle {
  kText,  // op=crop,size=84x80,center=false  (the text form)
  kYaml,  // {op: crop, size: [84, 80], center: false}  (the config's printed form)
};
// Every key that is set, in schema order (unset optional keys are left out);
// a square size is written as N. Parsing either form gives the op back.
std::string format_op(const OpSpec& op, OpStyle style);
// The text form of `pipeline` (parse_pipeline(format_pipeline(p)) == p).
std::string format_pipeline(const Pipeline& pipeline);

// The frame size at each op's input and after the last op: sizes[k] is what
// op k reads, sizes.back() the output (pipeline.size() + 1 entries). Input
// sides may be FrameSize::kUnknownSide (kept until an op sets the size).
// Throws c10::ValueError "op k (name): ..." when an op's values are out of
// range or its size does not fit its input.
std::vector<FrameSize> frame_sizes(const Pipeline& pipeline, const FrameSize& input);

// frame_sizes without throwing: the sizes up to the op that failed, which
// op failed and why (for callers that report errors their own way).
struct FrameSizeWalk {
  std::vector<FrameSize> sizes;
  std::optional<size_t> failed_op;
  std::string problem;  // no prefix, e.g. "crop 90x80 is larger than its input 84x84 ..."
};
FrameSizeWalk walk_frame_sizes(const Pipeline& pipeline, const FrameSize& input);

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
  int64_t channels = 0;  // S*C of the observations, when known (for messages)
  // What gave C, for messages ("the pool's channels"); nullptr: guessed from S*C.
  const char* channels_source = nullptr;
};

// Checks every op against the frame geometry and resolves sizes and weights.
// C (geometry.frame_channels) must lie in [1, 2^31).
PipelineDesc resolve_pipeline(const Pipeline& pipeline, const FrameGeometry& geometry,
                              uint64_t seed, uint64_t step);

// The check resolve_pipeline makes of the ops that mix channels (grayscale,
// color_jitter, random_conv: C = 3), with its message, on C and its source
// alone: it reads no frame size (the fake kernels run it on symbolic sizes).
void check_channel_mixing(const Pipeline& pipeline, const FrameGeometry& geometry);

// Whether any op reads the distractor pool (OpNeeds::pool).
bool has_overlay(const Pipeline& pipeline);

// A gate's threshold T = min(2^24, ceil(p * 2^24)), in double (section 3a).
uint32_t gate_threshold(double p);

// What is wrong with a float32 output's out = v * scale + bias (v in 0..255,
// computed in float32, to_output in kernels/pipeline.h), or "" when nothing
// is: scale and bias must be finite, scale must not round to 0 in float32
// unless it is 0, and no v may give inf. The ops and the config both ask.
std::string output_affine_problem(double scale, double bias);

}  // namespace obsaug
