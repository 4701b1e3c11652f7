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

// Writes `image` to `path` (created or replaced). std::runtime_error naming
// the path and the system's reason when the file cannot be written.
void write_png(const RgbImage& image, const std::string& path);

}  // namespace obsaug::cli
