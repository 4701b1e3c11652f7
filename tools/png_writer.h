// 8-bit RGB PNG files through libpng (no torch: tests/tools builds it alone).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace obsaug::cli {

// An RGB image, rows top to bottom, 3 bytes per pixel.
struct RgbImage {
  int64_t width = 0;
  int64_t height = 0;
  std::vector<uint8_t> rgb;  // width * height * 3

  RgbImage(int64_t w, int64_t h, uint8_t fill) : width(w), height(h), rgb(w * h * 3, fill) {}
  uint8_t* pixel(int64_t x, int64_t y) { return &rgb[(y * width + x) * 3]; }
};

// Writes `image` to `path` (created, or a regular file replaced) through a
// temporary beside it that is renamed over it once whole
// (files/atomic_file.h): a failed write leaves `path` as it was and removes
// only the temporary; a `path` that exists as anything but a regular file
// (a device, a FIFO, a directory) is refused and left alone.
// std::runtime_error "cannot write PATH: ..." naming the reason.
void write_png(const RgbImage& image, const std::string& path);

}  // namespace obsaug::cli
