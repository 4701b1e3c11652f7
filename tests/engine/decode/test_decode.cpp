// Decoding (engine/decode/decode.h): every colour type of JPEG and PNG, written here
// with TurboJPEG and libpng; the resampler against a plain double-precision
// triangle filter; DCT-scaled against full-size decoding; RandomResizedCrop
// and flip statistics; reproducibility; corrupt, truncated and bomb files.
#include <gtest/gtest.h>
#include <png.h>
#include <turbojpeg.h>
#include <zlib.h>

#include <cmath>
#include <csetjmp>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/decode/decode.h"
#include "engine/source/image_source.h"
#include "tests/test_util.h"

namespace obsaug {
namespace {

using Bytes = std::vector<uint8_t>;

// --- fixtures --------------------------------------------------------------

// A smooth colour pattern with some texture: interleaved RGB, w x h.
Bytes test_pattern(int w, int h) {
  Bytes rgb(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      uint8_t* p = &rgb[(static_cast<size_t>(y) * w + x) * 3];
      p[0] = static_cast<uint8_t>(255.0 * x / std::max(1, w - 1));
      p[1] = static_cast<uint8_t>(255.0 * y / std::max(1, h - 1));
      p[2] = static_cast<uint8_t>(127.5 + 100.0 * std::sin(x * 0.05) * std::cos(y * 0.07));
    }
  }
  return rgb;
}

Bytes encode_jpeg(const Bytes& pixels, int w, int h, int pixel_format, int subsamp,
                  int quality = 95) {
  tjhandle tj = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  const int rc =
      tjCompress2(tj, pixels.data(), w, 0, h, pixel_format, &buf, &size, subsamp, quality, 0);
  EXPECT_EQ(rc, 0) << tjGetErrorStr2(tj);
  Bytes out(buf, buf + (rc == 0 ? size : 0));
  tjFree(buf);
  tjDestroy(tj);
  return out;
}

// Writes a PNG from rows already in the file's sample layout (big-endian
// 16-bit, packed sub-byte samples). Palette/tRNS optional.
struct PngSpec {
  PngSpec(int w, int h, int depth, int type)
      : width(w), height(h), bit_depth(depth), color_type(type) {}
  int width, height, bit_depth, color_type;
  bool interlace = false;
  std::vector<png_color> palette;
  std::vector<png_byte> trans;
};

void png_write_to_vector(png_structp png, png_bytep data, png_size_t n) {
  auto* out = static_cast<Bytes*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + n);
}

Bytes encode_png(const PngSpec& spec, const Bytes& raw) {
  Bytes out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  const size_t row_bytes = raw.size() / spec.height;
  std::vector<png_bytep> rows(spec.height);
  for (int y = 0; y < spec.height; ++y) rows[y] = const_cast<png_bytep>(raw.data() + y * row_bytes);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    ADD_FAILURE() << "libpng failed to write the fixture";
    return {};
  }
  png_set_write_fn(png, &out, png_write_to_vector, nullptr);
  png_set_IHDR(png, info, spec.width, spec.height, spec.bit_depth, spec.color_type,
               spec.interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (!spec.palette.empty())
    png_set_PLTE(png, info, spec.palette.data(), static_cast<int>(spec.palette.size()));
  if (!spec.trans.empty())
    png_set_tRNS(png, info, spec.trans.data(), static_cast<int>(spec.trans.size()), nullptr);
  png_write_info(png, info);
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

double mean_abs_diff(const Bytes& a, const Bytes& b) {
  EXPECT_EQ(a.size(), b.size());
  double sum = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) sum += std::abs(int(a[i]) - int(b[i]));
  return a.empty() ? 0 : sum / a.size();
}

int max_abs_diff(const Bytes& a, const Bytes& b) {
  int m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    m = std::max(m, std::abs(int(a[i]) - int(b[i])));
  return m;
}

uint8_t luma(const uint8_t* p) {
  return static_cast<uint8_t>((p[0] * 19595u + p[1] * 38470u + p[2] * 7471u + 0x8000u) >> 16);
}

Bytes to_gray(const Bytes& rgb) {
  Bytes g(rgb.size() / 3);
  for (size_t i = 0; i < g.size(); ++i) g[i] = luma(&rgb[3 * i]);
  return g;
}

PixelImage decode(const Bytes& b, int channels = 3, int num = 1, int denom = 1) {
  ImageDecoder dec;
  return dec.decode(b.data(), b.size(), "fixture", channels, num, denom);
}

// --- JPEG colour types ---------------------------------------------------------

TEST(DecodeJpeg, RgbAllSubsamplings) {
  const int w = 96, h = 64;
  const Bytes rgb = test_pattern(w, h);
  for (int subsamp : {TJSAMP_444, TJSAMP_422, TJSAMP_420}) {
    const PixelImage img = decode(encode_jpeg(rgb, w, h, TJPF_RGB, subsamp));
    ASSERT_EQ(img.width, w);
    ASSERT_EQ(img.height, h);
    ASSERT_EQ(img.channels, 3);
    EXPECT_LT(mean_abs_diff(img.pixels, rgb), 3.0) << "subsamp " << subsamp;
  }
}

TEST(DecodeJpeg, GrayscaleBecomesRgbOrStaysLuma) {
  const int w = 64, h = 48;
  const Bytes gray = to_gray(test_pattern(w, h));
  const Bytes jpeg = encode_jpeg(gray, w, h, TJPF_GRAY, TJSAMP_GRAY);
  const PixelImage rgb = decode(jpeg, 3);
  for (size_t i = 0; i < gray.size(); ++i) {
    ASSERT_EQ(rgb.pixels[3 * i], rgb.pixels[3 * i + 1]);
    ASSERT_EQ(rgb.pixels[3 * i], rgb.pixels[3 * i + 2]);
  }
  const PixelImage one = decode(jpeg, 1);
  EXPECT_LT(mean_abs_diff(one.pixels, gray), 2.0);
}

TEST(DecodeJpeg, CmykIsConvertedToRgb) {
  const int w = 64, h = 48;
  const Bytes rgb = test_pattern(w, h);
  // Inverted (Adobe) CMYK, as libjpeg-turbo's rgb_to_cmyk writes it.
  Bytes cmyk(static_cast<size_t>(w) * h * 4);
  for (size_t i = 0; i < static_cast<size_t>(w) * h; ++i) {
    const double c = 1 - rgb[3 * i] / 255.0, m = 1 - rgb[3 * i + 1] / 255.0,
                 y = 1 - rgb[3 * i + 2] / 255.0;
    const double k = std::min({c, m, y});
    const double d = k < 1 ? 1 - k : 1;
    cmyk[4 * i + 0] = static_cast<uint8_t>(255 - (c - k) / d * 255 + 0.5);
    cmyk[4 * i + 1] = static_cast<uint8_t>(255 - (m - k) / d * 255 + 0.5);
    cmyk[4 * i + 2] = static_cast<uint8_t>(255 - (y - k) / d * 255 + 0.5);
    cmyk[4 * i + 3] = static_cast<uint8_t>(255 - k * 255 + 0.5);
  }
  const Bytes jpeg = encode_jpeg(cmyk, w, h, TJPF_CMYK, TJSAMP_444);
  ASSERT_FALSE(jpeg.empty());
  const PixelImage img = decode(jpeg, 3);
  EXPECT_LT(mean_abs_diff(img.pixels, rgb), 4.0);
  const PixelImage one = decode(jpeg, 1);
  EXPECT_LT(mean_abs_diff(one.pixels, to_gray(rgb)), 4.0);
}

// --- PNG colour types ------------------------------------------------------------

TEST(DecodePng, EveryColourTypeAndDepth) {
  const int w = 37, h = 23;  // odd sizes: sub-byte rows do not end on a byte
  const Bytes rgb = test_pattern(w, h);
  const Bytes gray = to_gray(rgb);
  const size_t n = static_cast<size_t>(w) * h;

  struct Case {
    const char* name;
    PngSpec spec;
    Bytes raw;
    Bytes want_rgb;
  };
  std::vector<Case> cases;

  {  // RGB 8, and the same interlaced
    PngSpec s{w, h, 8, PNG_COLOR_TYPE_RGB};
    cases.push_back({"rgb8", s, rgb, rgb});
    s.interlace = true;
    cases.push_back({"rgb8 adam7", s, rgb, rgb});
  }
  {  // gray 8 -> replicated
    Bytes want(n * 3);
    for (size_t i = 0; i < n; ++i) want[3 * i] = want[3 * i + 1] = want[3 * i + 2] = gray[i];
    cases.push_back({"gray8", PngSpec(w, h, 8, PNG_COLOR_TYPE_GRAY), gray, want});
  }
  {  // gray 1-bit -> 0 / 255
    const size_t row_bytes = (w + 7) / 8;
    Bytes raw(row_bytes * h, 0), want(n * 3);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        const bool on = (x * 7 + y * 3) % 5 < 2;
        if (on) raw[y * row_bytes + x / 8] |= static_cast<uint8_t>(0x80 >> (x % 8));
        const size_t i = static_cast<size_t>(y) * w + x;
        want[3 * i] = want[3 * i + 1] = want[3 * i + 2] = on ? 255 : 0;
      }
    cases.push_back({"gray1", PngSpec(w, h, 1, PNG_COLOR_TYPE_GRAY), raw, want});
  }
  {  // gray 16 -> high byte
    Bytes raw(n * 2), want(n * 3);
    for (size_t i = 0; i < n; ++i) {
      raw[2 * i] = gray[i];
      raw[2 * i + 1] = static_cast<uint8_t>(255 - gray[i]);
      want[3 * i] = want[3 * i + 1] = want[3 * i + 2] = gray[i];
    }
    cases.push_back({"gray16", PngSpec(w, h, 16, PNG_COLOR_TYPE_GRAY), raw, want});
  }
  {  // gray + alpha -> alpha dropped
    Bytes raw(n * 2), want(n * 3);
    for (size_t i = 0; i < n; ++i) {
      raw[2 * i] = gray[i];
      raw[2 * i + 1] = static_cast<uint8_t>(i % 256);
      want[3 * i] = want[3 * i + 1] = want[3 * i + 2] = gray[i];
    }
    cases.push_back({"gray+alpha", PngSpec(w, h, 8, PNG_COLOR_TYPE_GRAY_ALPHA), raw, want});
  }
  {  // palette 4-bit with transparency -> palette colours, alpha dropped
    PngSpec s{w, h, 4, PNG_COLOR_TYPE_PALETTE};
    for (int k = 0; k < 16; ++k) {
      s.palette.push_back(png_color{static_cast<png_byte>(k * 16),
                                    static_cast<png_byte>(255 - k * 9),
                                    static_cast<png_byte>(k * k)});
    }
    s.trans = {0, 128, 255};
    const size_t row_bytes = (w + 1) / 2;
    Bytes raw(row_bytes * h, 0), want(n * 3);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        const int k = (x + 3 * y) % 16;
        raw[y * row_bytes + x / 2] |= static_cast<uint8_t>(x % 2 == 0 ? k << 4 : k);
        const size_t i = static_cast<size_t>(y) * w + x;
        want[3 * i] = s.palette[k].red;
        want[3 * i + 1] = s.palette[k].green;
        want[3 * i + 2] = s.palette[k].blue;
      }
    cases.push_back({"palette4+tRNS", s, raw, want});
  }
  {  // RGB 16 -> high bytes
    Bytes raw(n * 6);
    for (size_t i = 0; i < n * 3; ++i) {
      raw[2 * i] = rgb[i];
      raw[2 * i + 1] = static_cast<uint8_t>(i);
    }
    cases.push_back({"rgb16", PngSpec(w, h, 16, PNG_COLOR_TYPE_RGB), raw, rgb});
  }
  {  // RGBA 8 and 16 -> alpha dropped
    Bytes raw8(n * 4), raw16(n * 8);
    for (size_t i = 0; i < n; ++i) {
      for (int c = 0; c < 3; ++c) {
        raw8[4 * i + c] = rgb[3 * i + c];
        raw16[8 * i + 2 * c] = rgb[3 * i + c];
        raw16[8 * i + 2 * c + 1] = 0x5a;
      }
      raw8[4 * i + 3] = static_cast<uint8_t>(i % 7 == 0 ? 0 : 200);
      raw16[8 * i + 6] = raw8[4 * i + 3];
    }
    cases.push_back({"rgba8", PngSpec(w, h, 8, PNG_COLOR_TYPE_RGB_ALPHA), raw8, rgb});
    cases.push_back({"rgba16", PngSpec(w, h, 16, PNG_COLOR_TYPE_RGB_ALPHA), raw16, rgb});
  }

  for (const Case& c : cases) {
    const Bytes png = encode_png(c.spec, c.raw);
    ASSERT_FALSE(png.empty()) << c.name;
    const PixelImage img = decode(png, 3);
    ASSERT_EQ(img.width, w) << c.name;
    ASSERT_EQ(img.height, h) << c.name;
    EXPECT_EQ(img.pixels, c.want_rgb) << c.name;
    const PixelImage one = decode(png, 1);
    EXPECT_EQ(one.pixels, to_gray(c.want_rgb)) << c.name;
  }
}

// --- resampling ----------------------------------------------------------------

// Separable triangle filter in double precision, the textbook definition of
// an antialiased bilinear resize of box [b0, b1) into n outputs: support
// max(scale, 1), taps clamped to the source, one rounding at the end.
std::vector<std::vector<double>> reference_weights(int in, double b0, double b1, int n) {
  const double scale = (b1 - b0) / n, fs = std::max(scale, 1.0);
  std::vector<std::vector<double>> w(n, std::vector<double>(in, 0.0));
  for (int o = 0; o < n; ++o) {
    const double center = b0 + (o + 0.5) * scale;
    double sum = 0;
    for (int i = 0; i < in; ++i) {
      const double d = std::fabs(i + 0.5 - center) / fs;
      w[o][i] = d < 1 ? 1 - d : 0;
      sum += w[o][i];
    }
    for (double& v : w[o]) v /= sum;
  }
  return w;
}

Bytes reference_resize(const Bytes& src, int sw, int sh, int c, double x0, double y0, double x1,
                       double y1, int ow, int oh) {
  const auto wx = reference_weights(sw, x0, x1, ow), wy = reference_weights(sh, y0, y1, oh);
  Bytes out(static_cast<size_t>(ow) * oh * c);
  for (int y = 0; y < oh; ++y)
    for (int x = 0; x < ow; ++x)
      for (int ch = 0; ch < c; ++ch) {
        double v = 0;
        for (int iy = 0; iy < sh; ++iy) {
          if (wy[y][iy] == 0) continue;
          double row = 0;
          for (int ix = 0; ix < sw; ++ix)
            row += wx[x][ix] * src[(static_cast<size_t>(iy) * sw + ix) * c + ch];
          v += wy[y][iy] * row;
        }
        out[(static_cast<size_t>(y) * ow + x) * c + ch] =
            static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
      }
  return out;
}

TEST(Resize, MatchesATriangleFilterReference) {
  const int sw = 61, sh = 47;
  std::mt19937 rng(7);
  Bytes noisy = test_pattern(sw, sh);
  for (uint8_t& v : noisy)
    v = static_cast<uint8_t>(std::clamp<int>(v + int(rng() % 41) - 20, 0, 255));
  struct Box {
    double x0, y0, x1, y1;
    int ow, oh;
  };
  const std::vector<Box> boxes = {{0, 0, 61, 47, 20, 15},  {0, 0, 61, 47, 61, 47},
                                  {0, 0, 61, 47, 120, 90}, {3.25, 5.5, 40.75, 44.0, 11, 9},
                                  {10, 2, 30, 12, 84, 84}, {0, 0, 61, 47, 7, 40}};
  for (int c : {1, 3}) {
    const Bytes src = c == 3 ? noisy : to_gray(noisy);
    for (const Box& b : boxes) {
      ImageView view{src.data(), sw, sh, c, static_cast<size_t>(sw) * c};
      Bytes ours(static_cast<size_t>(b.ow) * b.oh * c);
      resize_antialiased(view, b.x0, b.y0, b.x1, b.y1, ours.data(), b.ow, b.oh);
      const Bytes ref = reference_resize(src, sw, sh, c, b.x0, b.y0, b.x1, b.y1, b.ow, b.oh);
      EXPECT_LE(max_abs_diff(ours, ref), 1) << c << " " << b.ow << "x" << b.oh;
      EXPECT_LT(mean_abs_diff(ours, ref), 0.3) << c << " " << b.ow << "x" << b.oh;
    }
  }
  // The identity is an exact copy.
  ImageView view{noisy.data(), sw, sh, 3, static_cast<size_t>(sw) * 3};
  Bytes same(noisy.size());
  resize_antialiased(view, 0, 0, sw, sh, same.data(), sw, sh);
  EXPECT_EQ(same, noisy);
  EXPECT_THROW(resize_antialiased(view, -1, 0, sw, sh, same.data(), 5, 5), std::invalid_argument);
  EXPECT_THROW(resize_antialiased(view, 0, 0, sw + 1, sh, same.data(), 5, 5),
               std::invalid_argument);
}

// --- the pipeline ------------------------------------------------------------------

TEST(DecodeAugmented, CropFlipAndLayoutMatchAManualPipeline) {
  const int w = 300, h = 200;
  const Bytes rgb = test_pattern(w, h);
  const Bytes png = encode_png(PngSpec(w, h, 8, PNG_COLOR_TYPE_RGB), rgb);
  AugmentSpec spec;
  spec.out_height = 40;
  spec.out_width = 56;
  ImageDecoder dec;
  int flips = 0;
  for (uint64_t serial = 0; serial < 12; ++serial) {
    Bytes chw(3 * 40 * 56);
    AugmentRecord rec;
    dec.decode_augmented(png.data(), png.size(), "p", spec, 99, serial, chw.data(), &rec);
    const CropBox& b = rec.crop;
    EXPECT_EQ(rec.scale_num, 1);
    // The manual pipeline: crop, resize, flip, HWC -> CHW.
    Bytes crop(static_cast<size_t>(b.width) * b.height * 3);
    for (int y = 0; y < b.height; ++y)
      std::memcpy(&crop[static_cast<size_t>(y) * b.width * 3], &rgb[((b.top + y) * w + b.left) * 3],
                  b.width * 3);
    Bytes hwc(40 * 56 * 3);
    resize_antialiased(
        ImageView{crop.data(), b.width, b.height, 3, static_cast<size_t>(b.width) * 3}, 0, 0,
        b.width, b.height, hwc.data(), 56, 40);
    Bytes want(chw.size());
    for (int y = 0; y < 40; ++y)
      for (int x = 0; x < 56; ++x)
        for (int c = 0; c < 3; ++c)
          want[(c * 40 + y) * 56 + x] = hwc[(y * 56 + (rec.flipped ? 55 - x : x)) * 3 + c];
    EXPECT_EQ(chw, want) << "serial " << serial;
    flips += rec.flipped;
  }
  EXPECT_GT(flips, 0);
  EXPECT_LT(flips, 12);
}

TEST(DecodeAugmented, ReproducibleFromSeedAndSerial) {
  const Bytes jpeg = encode_jpeg(test_pattern(320, 240), 320, 240, TJPF_RGB, TJSAMP_420);
  AugmentSpec spec;
  spec.out_height = spec.out_width = 32;
  ImageDecoder a, b;
  Bytes x(3 * 32 * 32), y(3 * 32 * 32), z(3 * 32 * 32);
  a.decode_augmented(jpeg.data(), jpeg.size(), "j", spec, 5, 17, x.data());
  b.decode_augmented(jpeg.data(), jpeg.size(), "j", spec, 5, 17, y.data());
  a.decode_augmented(jpeg.data(), jpeg.size(), "j", spec, 5, 18, z.data());
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
}

TEST(DecodeAugmented, GrayscaleOutputIsItu601Luma) {
  const Bytes rgb = test_pattern(128, 96);
  const Bytes png = encode_png(PngSpec(128, 96, 8, PNG_COLOR_TYPE_RGB), rgb);
  AugmentSpec spec;
  spec.out_height = 96;
  spec.out_width = 128;
  spec.channels = 1;
  spec.random_crop = false;
  ImageDecoder dec;
  Bytes out(96 * 128);
  dec.decode_augmented(png.data(), png.size(), "g", spec, 0, 0, out.data());
  EXPECT_EQ(out, to_gray(rgb));
}

TEST(DecodeAugmented, ChooseJpegScaleIsTheSmallestThatCovers) {
  int count = 0;
  const tjscalingfactor* f = tjGetScalingFactors(&count);
  std::mt19937 rng(3);
  for (int trial = 0; trial < 2000; ++trial) {
    const int w = 50 + rng() % 3000, h = 50 + rng() % 3000;
    CropBox box;
    box.width = 1 + rng() % w;
    box.height = 1 + rng() % h;
    const int ow = 1 + rng() % 300, oh = 1 + rng() % 300;
    int num, denom;
    choose_jpeg_scale(w, h, box, ow, oh, &num, &denom);
    // Brute force: the smallest factor <= 1 under which the crop still spans the output.
    double best = 1.0;
    for (int i = 0; i < count; ++i) {
      const double v = double(f[i].num) / f[i].denom;
      if (v < best && box.width * v >= ow && box.height * v >= oh) best = v;
    }
    EXPECT_DOUBLE_EQ(double(num) / denom, best);
    EXPECT_TRUE(double(num) / denom == 1.0 ||
                (box.width * num / double(denom) >= ow && box.height * num / double(denom) >= oh));
  }
}

TEST(DecodeAugmented, DctScalingIsCloseToFullDecodeAndResize) {
  const int w = 1600, h = 1200;
  const Bytes jpeg = encode_jpeg(test_pattern(w, h), w, h, TJPF_RGB, TJSAMP_420, 90);
  AugmentSpec on, off;
  on.out_height = off.out_height = 84;
  on.out_width = off.out_width = 84;
  off.dct_scaling = false;
  ImageDecoder dec;
  double total = 0;
  int scaled = 0;
  for (uint64_t serial = 0; serial < 16; ++serial) {
    Bytes a(3 * 84 * 84), b(3 * 84 * 84);
    AugmentRecord ra, rb;
    dec.decode_augmented(jpeg.data(), jpeg.size(), "big", on, 1, serial, a.data(), &ra);
    dec.decode_augmented(jpeg.data(), jpeg.size(), "big", off, 1, serial, b.data(), &rb);
    EXPECT_EQ(ra.crop.top, rb.crop.top);
    EXPECT_EQ(ra.crop.width, rb.crop.width);
    EXPECT_EQ(rb.scale_num, rb.scale_denom);
    EXPECT_EQ(ra.decoded_width, (w * ra.scale_num + ra.scale_denom - 1) / ra.scale_denom);
    scaled += ra.scale_num < ra.scale_denom;
    const double mad = mean_abs_diff(a, b);
    EXPECT_LT(mad, 3.0) << "serial " << serial << " scale " << ra.scale_num << "/"
                        << ra.scale_denom;
    total += mad;
  }
  EXPECT_GE(scaled, 12);  // crops of >= 8% of a 1600x1200 image down to 84x84
  EXPECT_LT(total / 16, 1.5);
}

TEST(DecodeAugmented, DecodersOnSeveralThreadsAgreeWithOne) {
  // One decoder per thread, as the pool's workers use them: no shared state
  // in TurboJPEG or libpng may leak between them.
  const Bytes rgb = test_pattern(200, 150);
  const std::vector<Bytes> files = {
      encode_jpeg(rgb, 200, 150, TJPF_RGB, TJSAMP_420),
      encode_png(PngSpec(200, 150, 8, PNG_COLOR_TYPE_RGB), rgb),
      Bytes{1, 2, 3},  // fails, on every thread alike
  };
  AugmentSpec spec;
  spec.out_height = spec.out_width = 32;
  const int per_thread = 60, threads = 4;
  auto run = [&](int serial0, std::vector<Bytes>* outs) {
    ImageDecoder dec;
    for (int i = 0; i < per_thread; ++i) {
      const Bytes& f = files[i % files.size()];
      Bytes out(3 * 32 * 32, 0);
      try {
        dec.decode_augmented(f.data(), f.size(), "t", spec, 77, serial0 + i, out.data());
      } catch (const DecodeError&) {
        out.assign(1, 0xEE);
      }
      outs->push_back(std::move(out));
    }
  };
  std::vector<std::vector<Bytes>> want(threads), got(threads);
  for (int t = 0; t < threads; ++t) run(t * 1000, &want[t]);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(run, t * 1000, &got[t]);
  for (std::thread& th : pool) th.join();
  for (int t = 0; t < threads; ++t) EXPECT_EQ(got[t], want[t]) << "thread " << t;
}

// --- RandomResizedCrop and flip statistics ------------------------------------------

TEST(RandomResizedCrop, AreaAspectAndOffsetsFollowTorchvision) {
  AugmentSpec spec;
  const int w = 640, h = 480;
  const int n = 20000;
  int fallbacks = 0, flips = 0;
  double mean_top = 0, mean_left = 0, mean_log_aspect = 0;
  int accepted = 0;
  for (int serial = 0; serial < n; ++serial) {
    const CropBox b = random_resized_crop_box(w, h, spec, 42, serial);
    ASSERT_GE(b.top, 0);
    ASSERT_GE(b.left, 0);
    ASSERT_LE(b.top + b.height, h);
    ASSERT_LE(b.left + b.width, w);
    flips += draw_flip(spec, 42, serial);
    if (b.fallback) {
      ++fallbacks;
      continue;
    }
    ++accepted;
    const double area = double(b.width) * b.height / (double(w) * h);
    const double aspect = double(b.width) / b.height;
    // Rounding w and h to integers moves area and aspect by well under 2%.
    EXPECT_GE(area, 0.08 * 0.98);
    EXPECT_LE(area, 1.0);
    EXPECT_GE(aspect, 0.75 * 0.98);
    EXPECT_LE(aspect, 4.0 / 3.0 * 1.02);
    if (b.height < h)
      mean_top += double(b.top) / (h - b.height);
    else
      mean_top += 0.5;
    if (b.width < w)
      mean_left += double(b.left) / (w - b.width);
    else
      mean_left += 0.5;
    mean_log_aspect += std::log(aspect);
  }
  // A 4:3 image rejects only draws too large for it; ten attempts almost
  // never all fail.
  EXPECT_LT(fallbacks, n / 1000);
  EXPECT_NEAR(double(flips) / n, 0.5, 0.015);
  EXPECT_NEAR(mean_top / accepted, 0.5, 0.02);
  EXPECT_NEAR(mean_left / accepted, 0.5, 0.02);
  // Accepted aspects lean to the image's own 4:3 (large crops of the other
  // shape are rejected), so the mean log aspect is positive but inside the range.
  EXPECT_GT(mean_log_aspect / accepted, 0.0);
  EXPECT_LT(mean_log_aspect / accepted, std::log(4.0 / 3.0));
}

TEST(RandomResizedCrop, SmallAreasAreLogUniformInAspectWhenEverythingFits) {
  // scale <= 0.2 on a square image: every draw fits, so the draws are the
  // raw distribution: area fraction uniform in [0.08, 0.2], log aspect uniform.
  AugmentSpec spec;
  spec.scale_min = 0.08;
  spec.scale_max = 0.2;
  const int n = 20000;
  double sum_area = 0, sum_log = 0, sum_log2 = 0;
  for (int serial = 0; serial < n; ++serial) {
    const CropBox b = random_resized_crop_box(2000, 2000, spec, 7, serial);
    ASSERT_FALSE(b.fallback);
    sum_area += b.width * double(b.height) / 4e6;
    const double la = std::log(double(b.width) / b.height);
    sum_log += la;
    sum_log2 += la * la;
  }
  const double lr = std::log(4.0 / 3.0);
  EXPECT_NEAR(sum_area / n, 0.14, 0.003);
  EXPECT_NEAR(sum_log / n, 0.0, 0.005);
  EXPECT_NEAR(sum_log2 / n, lr * lr / 3, 0.002);  // variance of U(-lr, lr)
}

TEST(RandomResizedCrop, ElongatedImagesFallBackToACentredCrop) {
  AugmentSpec spec;
  int fallbacks = 0;
  for (int serial = 0; serial < 500; ++serial) {
    const CropBox b = random_resized_crop_box(1000, 20, spec, 1, serial);
    if (!b.fallback) continue;
    ++fallbacks;
    EXPECT_EQ(b.height, 20);
    EXPECT_EQ(b.width, 27);  // round(20 * 4/3)
    EXPECT_EQ(b.left, (1000 - 27) / 2);
    EXPECT_EQ(b.top, 0);
  }
  EXPECT_GT(fallbacks, 400);
  const CropBox tall = random_resized_crop_box(10, 1000, spec, 1, 0);
  ASSERT_TRUE(tall.fallback);
  EXPECT_EQ(tall.width, 10);
  EXPECT_EQ(tall.height, 13);  // round(10 / (3/4))
  EXPECT_EQ(tall.top, (1000 - 13) / 2);
}

// --- bad input ------------------------------------------------------------------------

void expect_decode_error(const Bytes& bytes, const std::string& fragment,
                         DecodeLimits limits = {}) {
  ImageDecoder dec(limits);
  AugmentSpec spec;
  spec.out_height = spec.out_width = 16;
  Bytes out(3 * 16 * 16);
  try {
    dec.decode_augmented(bytes.data(), bytes.size(), "bad/file.jpg", spec, 0, 0, out.data());
    FAIL() << "expected DecodeError containing '" << fragment << "'";
  } catch (const DecodeError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("bad/file.jpg"), std::string::npos) << what;
    EXPECT_NE(what.find(fragment), std::string::npos) << what;
  }
}

Bytes png_with_ihdr(uint32_t w, uint32_t h) {
  Bytes b = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  for (uint32_t v : {w, h}) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
  }
  for (uint8_t v : {8, 2, 0, 0, 0}) b.push_back(v);  // 8-bit RGB
  const uLong crc = crc32(0L, b.data() + 12, 17);
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(crc >> s));
  return b;
}

TEST(DecodeFailures, ZeroByteTruncatedRandomAndMislabelled) {
  const Bytes jpeg = encode_jpeg(test_pattern(200, 150), 200, 150, TJPF_RGB, TJSAMP_420);
  const Bytes png = encode_png(PngSpec(200, 150, 8, PNG_COLOR_TYPE_RGB), test_pattern(200, 150));
  expect_decode_error({}, "empty");
  expect_decode_error(Bytes(jpeg.begin(), jpeg.begin() + jpeg.size() / 2), "JPEG");
  expect_decode_error(Bytes(jpeg.begin(), jpeg.end() - 2), "JPEG");     // no EOI marker
  expect_decode_error(Bytes(jpeg.begin(), jpeg.begin() + 20), "JPEG");  // cut in the headers
  expect_decode_error(Bytes(png.begin(), png.begin() + png.size() / 2), "truncated");
  expect_decode_error(Bytes(png.begin(), png.begin() + 20), "PNG");
  std::mt19937 rng(5);
  Bytes noise(5000);
  for (uint8_t& v : noise) v = static_cast<uint8_t>(rng());
  noise[0] = 'G';
  expect_decode_error(noise, "not a JPEG or PNG");
  expect_decode_error({'G', 'I', 'F', '8', '9', 'a'}, "not a JPEG or PNG");
  // A PNG named .jpg decodes as the PNG it is (the format comes from the bytes).
  ImageDecoder dec;
  const PixelImage img = dec.decode(png.data(), png.size(), "really_a_png.jpg");
  EXPECT_EQ(img.width, 200);
}

TEST(DecodeFailures, DecompressionBombsAreRejectedBeforeAllocating) {
  expect_decode_error(png_with_ihdr(100000, 100000), "exceeds the limit");
  // A real small JPEG whose frame header claims 60000 x 60000.
  Bytes jpeg = encode_jpeg(test_pattern(64, 64), 64, 64, TJPF_RGB, TJSAMP_444);
  for (size_t i = 2; i + 9 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xFF && jpeg[i + 1] == 0xC0) {
      for (size_t at : {i + 5, i + 7}) {
        jpeg[at] = 60000 >> 8;
        jpeg[at + 1] = 60000 & 0xff;
      }
      break;
    }
  }
  expect_decode_error(jpeg, "exceeds the limit");
  // Limits are configurable: pixels and bytes.
  const Bytes small = encode_jpeg(test_pattern(64, 64), 64, 64, TJPF_RGB, TJSAMP_444);
  DecodeLimits tight;
  tight.max_pixels = 1000;
  expect_decode_error(small, "exceeds the limit", tight);
  DecodeLimits few_bytes;
  few_bytes.max_bytes = 100;
  expect_decode_error(small, "bytes exceeds", few_bytes);
}

TEST(DecodeFailures, CorruptedFilesNeverCrash) {
  const Bytes jpeg = encode_jpeg(test_pattern(120, 90), 120, 90, TJPF_RGB, TJSAMP_420);
  const Bytes png =
      encode_png(PngSpec(120, 90, 8, PNG_COLOR_TYPE_RGB_ALPHA), Bytes(120 * 90 * 4, 77));
  ImageDecoder dec;
  AugmentSpec spec;
  spec.out_height = spec.out_width = 24;
  Bytes out(3 * 24 * 24);
  std::mt19937 rng(11);
  int failures = 0, trials = 0;
  for (const Bytes* original : {&jpeg, &png}) {
    for (int trial = 0; trial < 300; ++trial, ++trials) {
      Bytes b = *original;
      if (trial % 3 == 0) {
        b.resize(rng() % b.size());
      } else {
        for (int k = 0; k < 1 + trial % 8; ++k) b[rng() % b.size()] = static_cast<uint8_t>(rng());
      }
      try {
        dec.decode_augmented(b.data(), b.size(), "fuzz", spec, 0, trial, out.data());
      } catch (const DecodeError&) {
        ++failures;
      }
    }
  }
  EXPECT_GT(failures, trials / 4);
}

// --- the embedded photographs (scripts/fetch_photos.sh), when present -------------

TEST(DecodeEmbeddedPhotos, EveryPhotoDecodes) {
  const std::string dir = std::string(OBSAUG_SOURCE_DIR) + "/data/photos";
  if (!std::filesystem::is_directory(dir))
    GTEST_SKIP() << dir << " absent (run scripts/fetch_photos.sh)";
  const std::vector<ImageRef> refs = list_source(dir);
  EXPECT_GE(refs.size(), 30u);
  ImageDecoder dec;
  AugmentSpec spec;
  spec.out_height = spec.out_width = 84;
  Bytes out(3 * 84 * 84);
  uint64_t serial = 0;
  for (const ImageRef& ref : refs) {
    const Bytes bytes = read_image_bytes(ref, dec.limits().max_bytes);
    AugmentRecord rec;
    EXPECT_NO_THROW(dec.decode_augmented(bytes.data(), bytes.size(), ref.path, spec, 0, serial++,
                                         out.data(), &rec))
        << ref.path;
    EXPECT_GE(std::min(rec.info.width, rec.info.height), 256) << ref.path;
  }
}

}  // namespace
}  // namespace obsaug
