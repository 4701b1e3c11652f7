// Decimal integers on a command line, shared by the CLI (tools/args.cpp), the
// decode tool and the decode benchmark (tools/decode_spec_args.h): digits
// only, so no sign, hex, octal or trailing junk slips through strtoull.
// Header-only and torch-free.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace obsaug {

// `text` as a decimal integer in 0..max into *out; false (and *out as it was)
// when it is not one or lies outside that range.
inline bool parse_decimal(const std::string& text, uint64_t max, uint64_t* out) {
  if (text.empty() || text.size() > 20 || text.find_first_not_of("0123456789") != std::string::npos)
    return false;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE || v > max) return false;
  *out = v;
  return true;
}

}  // namespace obsaug
