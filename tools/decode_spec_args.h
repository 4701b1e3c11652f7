// The command-line options that describe a distractor decode (an AugmentSpec),
// shared by obsaug_decode_tool (tools/) and obsaug_decode_bench (benchmarks/):
//   --size HxW  --channels 1|3  --no-dct
// Header-only: both binaries link obsaug_decode and nothing else of tools/.
#pragma once

#include <cstdint>
#include <string>

#include "engine/decode/decode.h"
#include "tools/decimal.h"

namespace obsaug {

enum class SpecOption { kNotMine, kTaken, kBad };

// The largest --size side: a distractor is resized to an observation's size.
inline constexpr int kMaxDecodeSide = 16384;

// Reads the option at argv[*i] into `spec` when it is one of the above
// (advancing *i past its value); kBad sets `error` to what was expected.
inline SpecOption take_spec_option(int argc, char** argv, int* i, AugmentSpec* spec,
                                   std::string* error) {
  const std::string arg = argv[*i];
  const bool has_value = *i + 1 < argc;
  if (arg == "--size" && has_value) {
    const std::string value = argv[++*i];
    const size_t x = value.find('x');
    uint64_t h = 0, w = 0;
    if (x == std::string::npos || !parse_decimal(value.substr(0, x), kMaxDecodeSide, &h) ||
        !parse_decimal(value.substr(x + 1), kMaxDecodeSide, &w)) {
      *error = "--size wants HxW with sides in 1.." + std::to_string(kMaxDecodeSide) +
               ", e.g. 84x84; got '" + value + "'";
      return SpecOption::kBad;
    }
    spec->out_height = static_cast<int>(h);
    spec->out_width = static_cast<int>(w);
    return SpecOption::kTaken;
  }
  if (arg == "--channels" && has_value) {
    const std::string value = argv[++*i];
    if (value != "1" && value != "3") {
      *error = "--channels must be 1 or 3, got '" + value + "'";
      return SpecOption::kBad;
    }
    spec->channels = value == "1" ? 1 : 3;
    return SpecOption::kTaken;
  }
  if (arg == "--no-dct") {
    spec->dct_scaling = false;
    return SpecOption::kTaken;
  }
  return SpecOption::kNotMine;
}

// The checks of a complete spec: positive size, 1 or 3 channels. Empty when fine.
inline std::string spec_problem(const AugmentSpec& spec) {
  if (spec.out_height <= 0 || spec.out_width <= 0) return "--size wants positive HxW";
  if (spec.channels != 1 && spec.channels != 3) return "--channels must be 1 or 3";
  return "";
}

// What a binary's own option reader did with an argument.
inline constexpr int kUsedArg = 0;          // the argument alone (a flag)
inline constexpr int kUsedArgAndValue = 1;  // the argument and the one after it
inline constexpr int kUnknownArg = -1;      // not an option of this binary

// Reads argv[first, argc): the spec options above into `spec`, every other
// argument through own(arg, value), `value` being the argument after it or
// nullptr at the end, which returns one of the three above. Returns the
// first problem (an unknown or incomplete option, a bad spec option, then
// spec_problem of the result), empty when the command line is fine.
template <typename Own>
std::string parse_decode_args(int argc, char** argv, int first, AugmentSpec* spec, Own&& own) {
  for (int i = first; i < argc; ++i) {
    std::string error;
    const SpecOption taken = take_spec_option(argc, argv, &i, spec, &error);
    if (taken == SpecOption::kBad) return error;
    if (taken == SpecOption::kTaken) continue;
    const std::string arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    const int used = own(arg, value);
    if (used == kUnknownArg) {
      return "unknown option, or a missing or bad value (counts are decimal integers): " + arg +
             (value ? std::string(" ") + value : std::string());
    }
    i += used;
  }
  return spec_problem(*spec);
}

}  // namespace obsaug
