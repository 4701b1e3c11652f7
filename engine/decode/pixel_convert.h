// Colour conversions shared by the JPEG and PNG decoders (see decode.h for
// the conventions). Internal to engine/.
#pragma once

#include <cstddef>
#include <cstdint>

namespace obsaug {
namespace detail {

// PIL's "L" conversion: 0.299 R + 0.587 G + 0.114 B in 16-bit fixed point.
inline uint8_t luma601(uint8_t r, uint8_t g, uint8_t b) {
  return static_cast<uint8_t>((r * 19595u + g * 38470u + b * 7471u + 0x8000u) >> 16);
}

inline void rgb_to_gray(const uint8_t* rgb, uint8_t* gray, size_t pixels) {
  for (size_t i = 0; i < pixels; ++i) gray[i] = luma601(rgb[3 * i], rgb[3 * i + 1], rgb[3 * i + 2]);
}

// Inverted (Adobe) CMYK to RGB, libjpeg-turbo's cmyk_to_rgb: R = C * K / 255.
// `out` gets 3 (RGB) or 1 (luma) channels; it may alias `cmyk`.
inline void cmyk_to_rgb_or_gray(const uint8_t* cmyk, uint8_t* out, size_t pixels, int channels) {
  for (size_t i = 0; i < pixels; ++i) {
    const unsigned k = cmyk[4 * i + 3];
    const uint8_t r = static_cast<uint8_t>((cmyk[4 * i] * k + 127) / 255);
    const uint8_t g = static_cast<uint8_t>((cmyk[4 * i + 1] * k + 127) / 255);
    const uint8_t b = static_cast<uint8_t>((cmyk[4 * i + 2] * k + 127) / 255);
    if (channels == 1) {
      out[i] = luma601(r, g, b);
    } else {
      out[3 * i] = r;
      out[3 * i + 1] = g;
      out[3 * i + 2] = b;
    }
  }
}

}  // namespace detail
}  // namespace obsaug
