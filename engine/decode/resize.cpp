// Pillow's ImagingResample (libImaging/Resample.c) for 8-bit images and the
// BILINEAR filter, rewritten for interleaved 1- or 3-channel buffers. Kept
// bit-compatible with Pillow on purpose: the pool's images then equal what
// torchvision's RandomResizedCrop produces on a PIL image. (Pillow 13
// sometimes runs the vertical pass first, python-pillow/Pillow#9549; its
// results then differ from these by one level in some pixels.)
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/decode/decode.h"

namespace obsaug {

namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;

double triangle(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Per output position: the first input index, the tap count, and `ksize`
// fixed-point weights (Pillow's precompute_coeffs + normalize_coeffs_8bpc).
struct Coefficients {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<int32_t> weights;
};

Coefficients precompute(int in_size, float in0, float in1, int out_size) {
  const double scale = static_cast<double>(in1 - in0) / out_size;
  const double filterscale = std::max(scale, 1.0);
  const double support = 1.0 * filterscale;
  Coefficients c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(out_size);
  c.count.resize(out_size);
  c.weights.assign(static_cast<size_t>(out_size) * c.ksize, 0);
  std::vector<double> k(c.ksize);
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = in0 + (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int xmin = static_cast<int>(center - support + 0.5);  // truncation, as in C
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    xmax = std::max(0, std::min(xmax, c.ksize));
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      k[x] = triangle((x + xmin - center + 0.5) * ss);
      ww += k[x];
    }
    int32_t* kk = &c.weights[static_cast<size_t>(xx) * c.ksize];
    for (int x = 0; x < xmax; ++x) {
      const double w = ww != 0.0 ? k[x] / ww : k[x];
      kk[x] = static_cast<int32_t>(w < 0 ? -0.5 + w * (1 << kPrecisionBits)
                                         : 0.5 + w * (1 << kPrecisionBits));
    }
    c.first[xx] = xmin;
    c.count[xx] = xmax;
  }
  return c;
}

inline uint8_t clip8(int32_t v) {
  if (v >= (1 << kPrecisionBits << 8)) return 255;
  if (v <= 0) return 0;
  return static_cast<uint8_t>(v >> kPrecisionBits);
}

template <int C>
void horizontal(const uint8_t* src, size_t src_stride, int row0, int rows, const Coefficients& cx,
                uint8_t* dst, int out_width) {
  for (int y = 0; y < rows; ++y) {
    const uint8_t* in = src + static_cast<size_t>(row0 + y) * src_stride;
    uint8_t* out = dst + static_cast<size_t>(y) * out_width * C;
    for (int xx = 0; xx < out_width; ++xx) {
      const int32_t* k = &cx.weights[static_cast<size_t>(xx) * cx.ksize];
      const uint8_t* p = in + static_cast<size_t>(cx.first[xx]) * C;
      int32_t ss[C];
      for (int ch = 0; ch < C; ++ch) ss[ch] = 1 << (kPrecisionBits - 1);
      for (int x = 0; x < cx.count[xx]; ++x)
        for (int ch = 0; ch < C; ++ch) ss[ch] += p[x * C + ch] * k[x];
      for (int ch = 0; ch < C; ++ch) out[xx * C + ch] = clip8(ss[ch]);
    }
  }
}

// Rows of `src` (width `width`, C channels, `src_stride` bytes apart) into
// out_height rows of `dst`; cy.first is relative to `src`'s first row.
template <int C>
void vertical(const uint8_t* src, size_t src_stride, int width, const Coefficients& cy,
              int row_shift, uint8_t* dst, int out_height) {
  for (int yy = 0; yy < out_height; ++yy) {
    const int32_t* k = &cy.weights[static_cast<size_t>(yy) * cy.ksize];
    const uint8_t* in = src + static_cast<size_t>(cy.first[yy] - row_shift) * src_stride;
    uint8_t* out = dst + static_cast<size_t>(yy) * width * C;
    for (int x = 0; x < width * C; ++x) {
      int32_t ss = 1 << (kPrecisionBits - 1);
      for (int y = 0; y < cy.count[yy]; ++y)
        ss += in[static_cast<size_t>(y) * src_stride + x] * k[y];
      out[x] = clip8(ss);
    }
  }
}

template <int C>
void resize_impl(const ImageView& src, const float box[4], uint8_t* dst, int out_width,
                 int out_height) {
  const bool need_horizontal = out_width != src.width || box[0] != 0.0f || box[2] != out_width;
  const bool need_vertical = out_height != src.height || box[1] != 0.0f || box[3] != out_height;
  const Coefficients cx = precompute(src.width, box[0], box[2], out_width);
  const Coefficients cy = precompute(src.height, box[1], box[3], out_height);
  const int ybox_first = cy.first[0];
  const int ybox_last = cy.first[out_height - 1] + cy.count[out_height - 1];

  const uint8_t* rows = src.data;
  size_t rows_stride = src.row_stride;
  int row_shift = 0;  // which source row `rows` starts at
  std::vector<uint8_t> temp;
  if (need_horizontal) {
    temp.resize(static_cast<size_t>(ybox_last - ybox_first) * out_width * C);
    horizontal<C>(src.data, src.row_stride, ybox_first, ybox_last - ybox_first, cx, temp.data(),
                  out_width);
    rows = temp.data();
    rows_stride = static_cast<size_t>(out_width) * C;
    row_shift = ybox_first;
  }
  const int width = need_horizontal ? out_width : src.width;
  if (need_vertical) {
    vertical<C>(rows, rows_stride, width, cy, row_shift, dst, out_height);
  } else {
    // The vertical pass is the identity (then ybox_first = row_shift = 0).
    for (int y = 0; y < out_height; ++y) {
      std::copy_n(rows + static_cast<size_t>(y) * rows_stride, static_cast<size_t>(width) * C,
                  dst + static_cast<size_t>(y) * width * C);
    }
  }
}

}  // namespace

void resize_antialiased(const ImageView& src, double x0, double y0, double x1, double y1,
                        uint8_t* dst, int out_width, int out_height) {
  if (src.width <= 0 || src.height <= 0 || out_width <= 0 || out_height <= 0 ||
      (src.channels != 1 && src.channels != 3)) {
    throw std::invalid_argument(
        "resize_antialiased: need a non-empty 1- or 3-channel source and output, got " +
        std::to_string(src.width) + "x" + std::to_string(src.height) + "x" +
        std::to_string(src.channels) + " -> " + std::to_string(out_width) + "x" +
        std::to_string(out_height));
  }
  const float box[4] = {static_cast<float>(x0), static_cast<float>(y0), static_cast<float>(x1),
                        static_cast<float>(y1)};
  if (!(box[0] >= 0 && box[1] >= 0 && box[2] <= src.width && box[3] <= src.height &&
        box[2] > box[0] && box[3] > box[1])) {
    throw std::invalid_argument(
        "resize_antialiased: box (" + std::to_string(x0) + ", " + std::to_string(y0) + ")-(" +
        std::to_string(x1) + ", " + std::to_string(y1) + ") is not a non-empty box inside the " +
        std::to_string(src.width) + "x" + std::to_string(src.height) + " source");
  }
  if (src.channels == 1) {
    resize_impl<1>(src, box, dst, out_width, out_height);
  } else {
    resize_impl<3>(src, box, dst, out_width, out_height);
  }
}

}  // namespace obsaug
