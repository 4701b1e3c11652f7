// The one description of every op (DESIGN.md section 6, STYLE.md habit 11):
// its name, its keys (type, default, range and the range's text), what it
// does to the frame size, and what it needs from the kernels. Everything that
// parses, checks, prints or documents an op reads this table: the pipeline's
// text form and resolve_pipeline (kernels/pipeline_spec.*), the YAML loader's
// messages (engine/config.cpp), obsaug.ops's checks, key lists and fake
// kernels (python/obsaug/ops.py through obsaug._C.op_schema and
// obsaug._C.frame_sizes), and the README's op table (tested against it).
//
// Adding an op: one entry in op_schemas() (kernels/op_schema.cpp), its
// OpKind, its resolution into an OpDesc (resolve_pipeline) and its
// per-pixel math (kernels/pipeline.h).
//
// Values: OpSpec (kernels/pipeline_spec.h) holds one KeyValue per key of its
// op, in the schema's key order. The checks here are pure functions of the
// values; their messages are the ones every front end prints after its own
// prefix ("op 1 (overlay): alpha ..." in the text form, "pipeline[1].alpha:
// ..." in YAML), so the same bad value reads the same everywhere.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "kernels/pipeline.h"

namespace obsaug {

// A frame size. kUnknownSide stands for a side not known yet (a symbolic
// size while torch.compile traces); frame_sizes carries it through the ops
// that keep the size and compares only known sides.
struct FrameSize {
  static constexpr int64_t kUnknownSide = -1;
  int64_t height = 0;
  int64_t width = 0;
};
inline bool operator==(const FrameSize& a, const FrameSize& b) {
  return a.height == b.height && a.width == b.width;
}
inline bool operator!=(const FrameSize& a, const FrameSize& b) { return !(a == b); }

enum class KeyType {
  kInt,    // int64_t
  kFloat,  // double, finite
  kBool,   // bool
  kEnum,   // std::string, one of KeySpec::choices
  kSize,   // FrameSize: N (N x N) or height x width
};

// One key's value. std::monostate: not given, which only an optional key
// (no default) or a required key that is still missing may be.
using KeyValue = std::variant<std::monostate, int64_t, double, bool, std::string, FrameSize>;

struct KeySpec {
  std::string name;
  KeyType type = KeyType::kInt;
  KeyValue default_value;  // monostate when optional or required
  bool optional = false;   // may stay unset (alpha_max: a fixed alpha; index: the position)
  bool required = false;   // has no default and must be given (crop's size)
  // Range, both ends inclusive. kInt: [int_min, int_max], or [value of
  // min_key, int_max] when min_key is set (cutout's max >= min); kSize: each side.
  int64_t int_min = 0;
  int64_t int_max = 0;
  // kFloat: [float_min, float_max], or [value of min_key, float_max]
  // when min_key is set (alpha_max >= alpha).
  double float_min = 0.0;
  double float_max = 0.0;
  std::string min_key;               // kInt, kFloat: the key whose value is the lower bound
  std::vector<std::string> choices;  // kEnum
  std::string doc;                   // what the key means, one line

  // The range as the errors and the README print it: "0..1048576", "[0, 1]",
  // "[alpha, 1]", "replicate, zeros", "true, false", "1..1073741824 per side".
  std::string range_text() const;
  // The default as the README prints it: "4", "0.5", "replicate", "false",
  // "none" (optional), "required".
  std::string default_text() const;
};

// What an op does to the frame size between its input and its output.
enum class FrameEffect {
  kKeeps,        // output size == input size
  kCropsToSize,  // output = the op's size key, which must fit inside the input
  kGrowsToSize,  // output = the op's size key, which must cover the input (translate)
};

// What an op needs from the kernels (DESIGN.md section 3a): the fused pass
// plans its stages and barriers from these.
struct OpNeeds {
  bool pool = false;               // reads the distractor pool (overlay)
  bool mixes_channels = false;     // an output channel reads other channels (grayscale)
  bool neighbourhood_3x3 = false;  // an output pixel reads its 3x3 neighbours (random_conv)
  bool frame_reduction = false;    // needs a whole-frame reduction first (contrast's mean)
};

struct OpSchema {
  OpKind kind;
  std::string name;
  std::string doc;
  std::vector<KeySpec> keys;  // the op's own keys, then the common ones ("index")
  FrameEffect frame_effect = FrameEffect::kKeeps;
  std::string size_key;       // the kSize key that sets the output (kCropsToSize, kGrowsToSize)
  bool needs_square = false;  // its input frame must be square (rotate)
  OpNeeds needs;

  // Position of `key` in `keys`, or -1 when the op has no such key.
  int key_position(const std::string& key) const;
  // "op, pad, padding, index": every key a user may write for this op.
  std::string key_list() const;
};

// Every op, in OpKind order (op_schemas()[int(kind)].kind == kind).
const std::vector<OpSchema>& op_schemas();
const OpSchema& op_schema(OpKind kind);
// The op called `name`, or nullptr.
const OpSchema* find_op_schema(const std::string& name);
// "shift, crop, overlay".
std::string op_name_list();

// `value` as the errors and the text forms print it: shortest text that
// reads back to the same double ("0.1", "1e-300", "nan", "inf").
std::string format_number(double value);
std::string format_size(const FrameSize& size);  // "84x80"

// The problem with `value` as key `key` of an op whose other values are
// `values` (the op's values in key order, for keys whose range names another
// key), or nullopt when it is fine. The message has no prefix:
//   "must be in 0..1048576, got -1"
//   "must be in [alpha, 1] = [0.5, 1], got 0.4"
//   "must be one of replicate, zeros; got 'reflect'"
//   "crop needs 'size' (N, or height and width)"
std::optional<std::string> check_key(const OpSchema& op, const KeySpec& key, const KeyValue& value,
                                     const std::vector<KeyValue>& values);

// Frame size after one op of schema `op` whose size key holds `size` (unset
// for kKeeps), on an `input` frame; nullopt with `*problem` set when the size
// does not fit ("crop 90x80 is larger than its input 84x84 ...").
std::optional<FrameSize> frame_size_after_op(const OpSchema& op, const KeyValue& size,
                                             const FrameSize& input, std::string* problem);

}  // namespace obsaug
