// tools/png_writer: an image written and read back with libpng is the same
// 8-bit RGB image, pixel for pixel; a path that cannot be written is a
// runtime_error naming it.
#include <gtest/gtest.h>
#include <png.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "tools/png_writer.h"

namespace obsaug::cli {
namespace {

struct ReadBack {
  png_uint_32 width = 0, height = 0;
  int bit_depth = 0, color_type = 0;
  std::vector<uint8_t> rgb;
};

ReadBack read_png(const std::string& path) {
  ReadBack out;
  FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) throw std::runtime_error("cannot open " + path);
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    std::fclose(file);
    throw std::runtime_error("libpng failed reading " + path);
  }
  png_init_io(png, file);
  png_read_info(png, info);
  out.width = png_get_image_width(png, info);
  out.height = png_get_image_height(png, info);
  out.bit_depth = png_get_bit_depth(png, info);
  out.color_type = png_get_color_type(png, info);
  const size_t row_bytes = png_get_rowbytes(png, info);
  out.rgb.resize(row_bytes * out.height);
  for (png_uint_32 y = 0; y < out.height; ++y) png_read_row(png, &out.rgb[y * row_bytes], nullptr);
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  std::fclose(file);
  return out;
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "obsaug_png_" + name + "_" + std::to_string(::getpid()) + ".png";
}

TEST(PngWriter, RoundTripIsExact) {
  for (const auto& [w, h] : {std::pair<int64_t, int64_t>{1, 1}, {7, 3}, {64, 33}}) {
    RgbImage image(w, h, 0);
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) {
        uint8_t* p = image.pixel(x, y);
        p[0] = static_cast<uint8_t>(x * 37 + y);  // every byte value shows up across the sizes
        p[1] = static_cast<uint8_t>(y * 91 + 3 * x);
        p[2] = static_cast<uint8_t>((x ^ y) * 13);
      }
    }
    const std::string path = temp_path("round_trip");
    write_png(image, path);
    const ReadBack back = read_png(path);
    std::remove(path.c_str());
    EXPECT_EQ(back.width, static_cast<png_uint_32>(w));
    EXPECT_EQ(back.height, static_cast<png_uint_32>(h));
    EXPECT_EQ(back.bit_depth, 8);
    EXPECT_EQ(back.color_type, PNG_COLOR_TYPE_RGB);
    EXPECT_EQ(back.rgb, image.rgb) << w << "x" << h;
  }
}

TEST(PngWriter, PixelAddressesRowsTopToBottom) {
  RgbImage image(4, 2, 9);
  image.pixel(3, 1)[2] = 200;
  EXPECT_EQ(image.rgb[(1 * 4 + 3) * 3 + 2], 200);
  EXPECT_EQ(image.rgb.size(), 4u * 2u * 3u);
  EXPECT_EQ(image.rgb[0], 9);
}

TEST(PngWriter, UnwritablePathNamesIt) {
  const std::string path = temp_path("no/such/dir/grid");
  try {
    write_png(RgbImage(2, 2, 0), path);
    FAIL() << "wrote " << path;
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("cannot write " + path + ": ", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace obsaug::cli
