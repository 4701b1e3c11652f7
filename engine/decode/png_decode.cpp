// ImageDecoder's PNG path: libpng's progressive-free reader with libpng's
// setjmp error handling confined to read_png(), which touches only the
// PngRead state behind a pointer (nothing with a destructor lives in its
// frame), so a longjmp out of libpng never skips a C++ destructor.
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "engine/decode/decode.h"
#include "engine/decode/pixel_convert.h"

namespace obsaug {

namespace {

struct PngRead {
  const uint8_t* data = nullptr;
  size_t size = 0;
  size_t pos = 0;
  uint64_t max_pixels = 0;
  int want_channels = 3;
  char message[256] = {0};
  png_structp png = nullptr;
  png_infop info = nullptr;
  // Results.
  int width = 0, height = 0, channels = 0;
  std::vector<uint8_t> pixels;
  std::vector<png_bytep> rows;
};

void on_error(png_structp png, png_const_charp msg) {
  auto* state = static_cast<PngRead*>(png_get_error_ptr(png));
  std::snprintf(state->message, sizeof(state->message), "%s", msg);
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}

void on_read(png_structp png, png_bytep out, png_size_t n) {
  auto* state = static_cast<PngRead*>(png_get_io_ptr(png));
  if (n > state->size - state->pos) png_error(png, "truncated PNG (data ends early)");
  std::memcpy(out, state->data + state->pos, n);
  state->pos += n;
}

// Decodes s->data into s->pixels (8-bit, gray or RGB, alpha dropped).
// Returns false with s->message set on any error.
bool read_png(PngRead* s) {
  s->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, s, on_error, on_warning);
  if (!s->png) {
    std::snprintf(s->message, sizeof(s->message), "cannot create a libpng reader");
    return false;
  }
  s->info = png_create_info_struct(s->png);
  if (!s->info) {
    std::snprintf(s->message, sizeof(s->message), "cannot create a libpng info struct");
    return false;
  }
  if (setjmp(png_jmpbuf(s->png))) return false;
  png_set_read_fn(s->png, s, on_read);
  png_set_user_limits(s->png, 1u << 20, 1u << 20);  // per side; area is checked below
  png_set_chunk_malloc_max(s->png, 16u << 20);      // ancillary chunks (text, ICC)
  png_read_info(s->png, s->info);

  const png_uint_32 w = png_get_image_width(s->png, s->info);
  const png_uint_32 h = png_get_image_height(s->png, s->info);
  if (static_cast<uint64_t>(w) * h > s->max_pixels) {
    std::snprintf(s->message, sizeof(s->message),
                  "PNG of %u x %u pixels exceeds the limit of %llu (decompression bomb?)", w, h,
                  static_cast<unsigned long long>(s->max_pixels));
    return false;
  }
  const int color_type = png_get_color_type(s->png, s->info);
  const int bit_depth = png_get_bit_depth(s->png, s->info);
  const bool gray = (color_type & PNG_COLOR_MASK_COLOR) == 0;
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(s->png);
  if (gray && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(s->png);
  if (bit_depth == 16) png_set_strip_16(s->png);  // the high byte, as PIL does
  png_set_strip_alpha(s->png);                    // a no-op without alpha
  if (gray && s->want_channels == 3) png_set_gray_to_rgb(s->png);
  png_set_interlace_handling(s->png);
  png_read_update_info(s->png, s->info);

  s->channels = png_get_channels(s->png, s->info);
  const size_t row_bytes = png_get_rowbytes(s->png, s->info);
  if ((s->channels != 1 && s->channels != 3) || png_get_bit_depth(s->png, s->info) != 8 ||
      row_bytes != static_cast<size_t>(w) * s->channels) {
    std::snprintf(s->message, sizeof(s->message), "unexpected PNG layout after conversion");
    return false;
  }
  s->width = static_cast<int>(w);
  s->height = static_cast<int>(h);
  s->pixels.resize(row_bytes * h);
  s->rows.resize(h);
  for (png_uint_32 y = 0; y < h; ++y) s->rows[y] = s->pixels.data() + y * row_bytes;
  png_read_image(s->png, s->rows.data());
  return true;
}

}  // namespace

PixelImage ImageDecoder::decode_png(const uint8_t* data, size_t size, const std::string& name,
                                    int channels) {
  PngRead state;
  state.data = data;
  state.size = size;
  state.max_pixels = limits_.max_pixels;
  state.want_channels = channels;
  const bool ok = read_png(&state);
  png_destroy_read_struct(state.png ? &state.png : nullptr, state.info ? &state.info : nullptr,
                          nullptr);
  if (!ok) throw DecodeError(name + ": " + state.message);

  PixelImage img;
  img.width = state.width;
  img.height = state.height;
  img.channels = channels;
  if (state.channels == channels) {
    img.pixels = std::move(state.pixels);
  } else {  // an RGB PNG asked for as grayscale
    const size_t pixels = static_cast<size_t>(img.width) * img.height;
    img.pixels.resize(pixels);
    detail::rgb_to_gray(state.pixels.data(), img.pixels.data(), pixels);
  }
  return img;
}

}  // namespace obsaug
