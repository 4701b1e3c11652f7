// Row loops of the CPU's per-frame path (kernels/augment_cpu_frames.cpp) for
// the barrier ops at the start of a segment: random_conv and color_jitter
// over a whole staged frame, and color_jitter's mean pass.
//
// Contract: the same bits as eval_frame_pixel (kernels/frame_eval.h). Every
// loop runs across x in structure-of-arrays form and calls, per lane, the
// scalar functions of frame_eval.h (conv_input, conv_tap, conv_output,
// jitter_brightness, ..., hue_shift, from_float) in the order the per-pixel
// code calls them; with -ffp-contract=off and no fast-math, lanes compute what
// the scalar code computes, so the compiler may vectorize them freely.
// CPU only: not compiled into the CUDA kernel.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cpu_clones.h"
#include "kernels/frame_eval.h"

namespace obsaug {

// Pixels per chunk of the mean pass.
constexpr int64_t kMeanChunk = 256;

// sum of gray_fixed over the RGB frame `f` (contrast's mean, before
// mean_of_sum). Per chunk, when every q fits int32 (always for 0..255
// values), the lanes convert through int32, which gives q's value exactly;
// otherwise the chunk converts as gray_fixed does.
template <typename T>
OBSAUG_CLONES int64_t gray_fixed_sum(const FrameView<T>& f) {
  const int64_t n = static_cast<int64_t>(f.h) * f.w;
  const T* __restrict r = f.base;
  const T* __restrict g = f.base + f.channel_stride;
  const T* __restrict b = f.base + 2 * f.channel_stride;
  uint64_t sum = 0;  // wraps modulo 2^64 (gray_fixed's contract)
  float q[kMeanChunk];
  for (int64_t start = 0; start < n; start += kMeanChunk) {
    const int64_t len = std::min(kMeanChunk, n - start);
    int fits = 1;
    for (int64_t j = 0; j < len; ++j) {
      q[j] = gray_fixed_float(static_cast<float>(r[start + j]), static_cast<float>(g[start + j]),
                              static_cast<float>(b[start + j]));
      fits &= (q[j] >= -2147483648.0f) & (q[j] < 2147483648.0f);
    }
    if (fits) {
      for (int64_t j = 0; j < len; ++j) sum += static_cast<uint64_t>(static_cast<int32_t>(q[j]));
    } else {
      for (int64_t j = 0; j < len; ++j) sum += static_cast<uint64_t>(saturated_int64(q[j]));
    }
  }
  return static_cast<int64_t>(sum);
}

// random_conv's input: the 3 channels of `src` scaled by conv_input into
// planes of (h + 2) x (w + 2) with a one-pixel border (replicated, or
// conv_input(0) with op.zeros), so that the taps need no bounds checks.
template <typename T>
OBSAUG_CLONES void conv_pad_frame(const FrameView<T>& src, bool zeros, float* padded) {
  const int64_t pw = static_cast<int64_t>(src.w) + 2;
  const int64_t pplane = (static_cast<int64_t>(src.h) + 2) * pw;
  const float zero = conv_input(0.0f);
  for (int i = 0; i < 3; ++i) {
    float* plane = padded + i * pplane;
    for (int32_t y = 0; y < src.h; ++y) {
      const T* __restrict in = src.base + i * src.channel_stride + static_cast<int64_t>(y) * src.w;
      float* __restrict row = plane + (static_cast<int64_t>(y) + 1) * pw;
      for (int32_t x = 0; x < src.w; ++x) row[x + 1] = conv_input(static_cast<float>(in[x]));
      row[0] = zeros ? zero : row[1];
      row[src.w + 1] = zeros ? zero : row[src.w];
    }
    float* top = plane;
    float* bottom = plane + (static_cast<int64_t>(src.h) + 1) * pw;
    for (int64_t x = 0; x < pw; ++x) {
      top[x] = zeros ? zero : plane[pw + x];
      bottom[x] = zeros ? zero : plane[static_cast<int64_t>(src.h) * pw + x];
    }
  }
}

// random_conv over the padded planes of an h x w frame: output channel o of
// row y into dst[o * dst_plane + y * w + x]. `acc` holds 2 * w floats.
template <typename T>
OBSAUG_CLONES void conv_frame_rows(const float* padded, int32_t h, int32_t w, const float* weights,
                                   bool sigmoid, float* __restrict acc, T* dst, int64_t dst_plane) {
  const int64_t pw = static_cast<int64_t>(w) + 2;
  const int64_t pplane = (static_cast<int64_t>(h) + 2) * pw;
  float* __restrict exp_lanes = acc + w;
  for (int32_t y = 0; y < h; ++y) {
    const float* taps[27];  // j = (i*3 + ky)*3 + kx: conv_pixel's order
    for (int j = 0; j < 27; ++j)
      taps[j] = padded + (j / 9) * pplane + (static_cast<int64_t>(y) + (j / 3) % 3) * pw + j % 3;
    for (int o = 0; o < 3; ++o) {
      const float* weight = weights + o * 27;
      for (int32_t x = 0; x < w; ++x) {
        float a = 0.0f;
#pragma GCC unroll 27
        for (int j = 0; j < 27; ++j) a = conv_tap(a, weight[j], taps[j][x]);
        acc[x] = a;
      }
      T* __restrict out = dst + o * dst_plane + static_cast<int64_t>(y) * w;
      if (sigmoid) {  // conv_output, with exp_f32 split into its lanes and its special cases
        int specials = 0;
        for (int32_t x = 0; x < w; ++x) {
          specials += exp_f32_is_special(-acc[x]) ? 1 : 0;
          exp_lanes[x] = exp_f32_main(-acc[x]);
        }
        if (specials > 0)
          for (int32_t x = 0; x < w; ++x)
            if (exp_f32_is_special(-acc[x])) exp_lanes[x] = exp_f32(-acc[x]);
        for (int32_t x = 0; x < w; ++x)
          out[x] = from_float(conv_sigmoid_of_exp(exp_lanes[x]), static_cast<const T*>(nullptr));
      } else {
        for (int32_t x = 0; x < w; ++x)
          out[x] = from_float(conv_output(false, acc[x]), static_cast<const T*>(nullptr));
      }
    }
  }
}

// Applies one component of color_jitter (fn(j, v) on a 3-float pixel) to w
// pixels held as three rows.
template <typename Fn>
__attribute__((always_inline)) inline void jitter_lanes(float* __restrict r, float* __restrict g,
                                                        float* __restrict b, int32_t w,
                                                        const JitterFactors& j, Fn fn) {
  for (int32_t x = 0; x < w; ++x) {
    float v[3] = {r[x], g[x], b[x]};
    fn(j, v);
    r[x] = v[0];
    g[x] = v[1];
    b[x] = v[2];
  }
}

// color_jitter (gate open) on the RGB frame `src` into dst (channel c of row
// y at dst[c * dst_plane + y * src.w + x]; dst may be src's own memory, as
// each row is read before it is written). `rgb` holds 3 * src.w floats.
template <typename T>
OBSAUG_CLONES void jitter_frame_rows(const FrameView<T>& src, const OpDesc& op,
                                     const JitterFactors& j, float* rgb, T* dst,
                                     int64_t dst_plane) {
  const int32_t w = src.w;
  float* r = rgb;
  float* g = rgb + w;
  float* b = rgb + 2 * static_cast<int64_t>(w);
  const bool on[4] = {op.jitter_on[kBrightness], op.jitter_on[kContrast], op.jitter_on[kSaturation],
                      op.jitter_on[kHue]};
  for (int32_t y = 0; y < src.h; ++y) {
    const int64_t row = static_cast<int64_t>(y) * w;
    float* lanes[3] = {r, g, b};
    for (int c = 0; c < 3; ++c) {
      const T* __restrict in = src.base + c * src.channel_stride + row;
      float* __restrict v = lanes[c];
      for (int32_t x = 0; x < w; ++x) v[x] = static_cast<float>(in[x]);
    }
    if (on[kBrightness])
      jitter_lanes(r, g, b, w, j,
                   [](const JitterFactors& f, float* v) { jitter_brightness(f, v); });
    if (on[kContrast])
      jitter_lanes(r, g, b, w, j, [](const JitterFactors& f, float* v) { jitter_contrast(f, v); });
    if (on[kSaturation])
      jitter_lanes(r, g, b, w, j,
                   [](const JitterFactors& f, float* v) { jitter_saturation(f, v); });
    if (on[kHue])
      jitter_lanes(r, g, b, w, j, [](const JitterFactors& f, float* v) { hue_shift(f.hue, v); });
    for (int c = 0; c < 3; ++c) {
      const float* __restrict v = lanes[c];
      T* __restrict out = dst + c * dst_plane + row;
      for (int32_t x = 0; x < w; ++x) out[x] = from_float(v[x], static_cast<const T*>(nullptr));
    }
  }
}

}  // namespace obsaug
