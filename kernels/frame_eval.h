// Per-frame evaluation of a pipeline that has any op of the second family
// (DESIGN.md section 3a), written once for the CPU loops (kernels/
// augment_cpu_frames.cpp) and the CUDA kernel (kernels/augment_cuda_kernel.cuh).
//
// Work unit: one stacked frame (sample b, frame s) of C channels. The
// pipeline is cut into segments at its barriers (random_conv, and
// color_jitter with contrast > 0): segment i runs ops
// [segment_first[i], segment_first[i + 1]). Every segment is evaluated pixel
// by pixel like the per-plane path (trace the output coordinates back to the
// segment's source, read it, apply the value ops in order); the output of
// every segment but the last is staged (a whole frame of C channels in the
// pipeline's dtype), and the next segment's barrier op reads the staged
// frame: random_conv its 3x3 neighbourhood, color_jitter the frame's mean.
// Only the resulting bits are contractual; how a backend stages is its own.
#pragma once

#include <cstdint>

#include "kernels/float_math.h"
#include "kernels/pipeline.h"

namespace obsaug {

constexpr int kConvWeights = 81;  // [out 3][in 3][ky 3][kx 3]
constexpr int kMaxMixedChannels = 3;
constexpr float kTwoPiF = 6.28318530717958647692f;  // float32(2 pi)

OBSAUG_HD bool is_barrier(const OpDesc& op) {
  return op.kind == OpKind::kRandomConv ||
         (op.kind == OpKind::kColorJitter && op.jitter_on[kContrast]);
}

// Whether `p` needs the per-frame path (any op of the second family).
OBSAUG_HD bool needs_frame_path(const PipelineDesc& p) {
  for (int k = 0; k < p.n_ops; ++k)
    if (in_second_family(p.ops[k].kind)) return true;
  return false;
}

// Fills n_segments and segment_first (0 segments for the per-plane path).
inline void plan_segments(PipelineDesc* p) {
  p->n_segments = 0;
  if (!needs_frame_path(*p)) return;
  p->segment_first[0] = 0;
  p->n_segments = 1;
  for (int k = 1; k < p->n_ops; ++k)
    if (is_barrier(p->ops[k])) p->segment_first[p->n_segments++] = k;
  p->segment_first[p->n_segments] = p->n_ops;
}

// Ops, input and output size of segment i.
struct Segment {
  int first, end;
  int32_t in_h, in_w, out_h, out_w;
  bool mixes;  // some op reads other channels: evaluate the 3 channels together
};

OBSAUG_HD Segment segment_of(const PipelineDesc& p, int i) {
  Segment s;
  s.first = p.segment_first[i];
  s.end = p.segment_first[i + 1];
  s.in_h = p.ops[s.first].in_h;
  s.in_w = p.ops[s.first].in_w;
  s.out_h = p.ops[s.end - 1].out_h;
  s.out_w = p.ops[s.end - 1].out_w;
  s.mixes = false;
  for (int k = s.first; k < s.end; ++k) s.mixes = s.mixes || p.ops[k].mixes_channels;
  return s;
}

// Branch-free building blocks, so that the CPU's row loops
// (kernels/frame_rows_cpu.h) vectorize what the CUDA kernel computes pixel by
// pixel. A choice is a bitwise blend: no compiler sees a branch to thread a
// constant through (which would leave a trapping operation in a branch and
// stop the vectorizer under -ftrapping-math).

// a if take_a, else b.
OBSAUG_HD float blend_bits(bool take_a, float a, float b) {
  using float_math_detail::bits_of;
  const uint32_t mask = 0u - static_cast<uint32_t>(take_a);
  return float_math_detail::float_of((mask & bits_of(a)) | (~mask & bits_of(b)));
}

// floorf(x) for every x (up to the sign of a zero result): a conversion to
// int32 where |x| < 2^23, one down where that rounded up; x itself beyond.
OBSAUG_HD float floor_f32(float x) {
  const bool fractional = fabsf(x) < 8388608.0f;  // false for NaN
  const float t = static_cast<float>(static_cast<int32_t>(blend_bits(fractional, x, 0.0f)));
  return blend_bits(fractional, blend_bits(t > x, sub_rn(t, 1.0f), t), x);
}

// fmaxf and fminf with the host libm's values: the first argument on a tie
// (of zeros), the other argument when one is NaN.
OBSAUG_HD float max_f32(float a, float b) { return blend_bits(a >= b || b != b, a, b); }
OBSAUG_HD float min_f32(float a, float b) { return blend_bits(a <= b || b != b, a, b); }

OBSAUG_HD float clamp255(float v) { return min_f32(max_f32(v, 0.0f), 255.0f); }
OBSAUG_HD float clamp01(float v) { return min_f32(max_f32(v, 0.0f), 1.0f); }

// Rounding to the pipeline's dtype at the end of an op computed in float:
// uint8 `floorf(fminf(fmaxf(v, 0), 255) + 0.5f)` (NaN gives 0); float keeps v.
OBSAUG_HD uint8_t from_float(float v, const uint8_t*) {
  // c + 0.5 lies in [0.5, 255.5]: truncation is floorf there (and has no branch)
  return static_cast<uint8_t>(static_cast<int32_t>(add_rn(clamp255(v), 0.5f)));
}
OBSAUG_HD float from_float(float v, const float*) { return v; }

// Luma with float32 constants, left to right.
OBSAUG_HD float gray_float(float r, float g, float b) {
  return add_rn(add_rn(mul_rn(0.299f, r), mul_rn(0.587f, g)), mul_rn(0.114f, b));
}

// grayscale's value: uint8 in 16-bit fixed point, float32 by gray_float.
OBSAUG_HD uint8_t grayscale_value(uint8_t r, uint8_t g, uint8_t b) {
  return static_cast<uint8_t>((19595u * r + 38470u * g + 7471u * b + 32768u) >> 16);
}
OBSAUG_HD float grayscale_value(float r, float g, float b) { return gray_float(r, g, b); }

// Hue rotation by h turns of an RGB pixel in 0..255 (torchvision's
// rgb -> hsv -> rgb, as DESIGN.md section 3a writes it). Branch-free (every
// candidate computed, then selected in the order of the definition) so that
// a CPU row loop over it vectorizes; the quotients are the definition's.
// For finite v whose max - min does not overflow, t is in [0, 1) and i in 0..6.
OBSAUG_HD void hue_shift(float h, float* v) {
  const float r = div_rn(v[0], 255.0f);
  const float g = div_rn(v[1], 255.0f);
  const float b = div_rn(v[2], 255.0f);
  const float mx = max_f32(max_f32(r, g), b);
  const float mn = min_f32(min_f32(r, g), b);
  const float d = sub_rn(mx, mn);
  const float sat = blend_bits(d == 0.0f, 0.0f, div_rn(d, mx));
  const float from_r = div_rn(sub_rn(mx, r), d);  // (mx-R)/d, (mx-G)/d, (mx-B)/d
  const float from_g = div_rn(sub_rn(mx, g), d);
  const float from_b = div_rn(sub_rn(mx, b), d);
  const float h6_r = sub_rn(from_b, from_g);
  const float h6_g = sub_rn(add_rn(2.0f, from_r), from_b);
  const float h6_b = sub_rn(add_rn(4.0f, from_g), from_r);
  const float h6 =
      blend_bits(d == 0.0f, 0.0f, blend_bits(mx == r, h6_r, blend_bits(mx == g, h6_g, h6_b)));
  float t = add_rn(add_rn(div_rn(h6, 6.0f), 1.0f), h);
  t = sub_rn(t, floor_f32(t));
  const float t6 = mul_rn(t, 6.0f);
  const float i_float = floor_f32(t6);
  const float f = sub_rn(t6, i_float);
  const int i = static_cast<int>(i_float) % 6;
  const float value = mx;
  const float p = clamp01(mul_rn(value, sub_rn(1.0f, sat)));
  const float q = clamp01(mul_rn(value, sub_rn(1.0f, mul_rn(sat, f))));
  const float u = clamp01(mul_rn(value, sub_rn(1.0f, mul_rn(sat, sub_rn(1.0f, f)))));
  // (R, G, B) for i = 0..5 as indices into {V, p, q, u}:
  // (V,u,p), (q,V,p), (p,V,u), (p,q,V), (u,p,V), (V,p,q).
  const float choice[4] = {value, p, q, u};
  constexpr unsigned char kPick[6][3] = {{0, 3, 1}, {2, 0, 1}, {1, 0, 3},
                                         {1, 2, 0}, {3, 1, 0}, {0, 1, 2}};
  for (int c = 0; c < 3; ++c) {  // picked as bits: compilers turn a chain of selects into a switch
    float picked = 0.0f;
    for (int k = 0; k < 6; ++k) picked = blend_bits(i == k, choice[kPick[k][c]], picked);
    v[c] = mul_rn(picked, 255.0f);
  }
}

// color_jitter's components on one RGB pixel in float, in the order they
// apply (jitter_rgb); `JitterFactors` holds what they multiply by.
struct JitterFactors {
  float brightness, mean, contrast, saturation, hue;
};

OBSAUG_HD JitterFactors jitter_factors(const OpDesc& op, const OpDraw& d, float mean0) {
  JitterFactors j;
  j.brightness = op.jitter_on[kBrightness] ? d.factor[kBrightness] : 1.0f;
  j.mean = fminf(mul_rn(j.brightness, mean0), 255.0f);
  j.contrast = d.factor[kContrast];
  j.saturation = d.factor[kSaturation];
  j.hue = d.factor[kHue];
  return j;
}
OBSAUG_HD void jitter_brightness(const JitterFactors& j, float* v) {
  for (int c = 0; c < 3; ++c) v[c] = clamp255(mul_rn(v[c], j.brightness));
}
OBSAUG_HD void jitter_contrast(const JitterFactors& j, float* v) {
  for (int c = 0; c < 3; ++c)
    v[c] = clamp255(add_rn(mul_rn(sub_rn(v[c], j.mean), j.contrast), j.mean));
}
OBSAUG_HD void jitter_saturation(const JitterFactors& j, float* v) {
  const float g = gray_float(v[0], v[1], v[2]);
  for (int c = 0; c < 3; ++c) v[c] = clamp255(add_rn(g, mul_rn(sub_rn(v[c], g), j.saturation)));
}

// color_jitter on one RGB pixel in float (gate already open). `mean0` is the
// frame's mean gray before the op (used when contrast is on).
OBSAUG_HD void jitter_rgb(const OpDesc& op, const OpDraw& d, float mean0, float* v) {
  const JitterFactors j = jitter_factors(op, d, mean0);
  if (op.jitter_on[kBrightness]) jitter_brightness(j, v);
  if (op.jitter_on[kContrast]) jitter_contrast(j, v);
  if (op.jitter_on[kSaturation]) jitter_saturation(j, v);
  if (op.jitter_on[kHue]) hue_shift(j.hue, v);
}

// contrast's mean: each pixel contributes q = int64(rintf(gray * 65536)) and
// m0 = float(double(sum q) / (65536 H W)); an integer sum, so any summation
// order gives the same m0. Defined for every float frame, the same on host
// and device: q saturates (|gray| above about 1.4e14; NaN gives 0), as
// CUDA's float-to-int64 conversion does, and the sum wraps modulo 2^64
// (summed as uint64_t: wrapping is then defined and order-free too).
// q as a float (an integer value; the CPU's row sum converts it in lanes).
OBSAUG_HD float gray_fixed_float(float r, float g, float b) {
  return rintf(mul_rn(gray_float(r, g, b), 65536.0f));
}
// int64(q), saturating; NaN -> 0.
OBSAUG_HD int64_t saturated_int64(float q) {
  if (!(q == q)) return 0;
  if (q >= 9223372036854775808.0f) return INT64_MAX;  // 2^63
  if (q < -9223372036854775808.0f) return INT64_MIN;
  return static_cast<int64_t>(q);
}
OBSAUG_HD int64_t gray_fixed(float r, float g, float b) {
  return saturated_int64(gray_fixed_float(r, g, b));
}
OBSAUG_HD float mean_of_sum(int64_t sum, int32_t h, int32_t w) {
  return static_cast<float>(static_cast<double>(sum) /
                            (65536.0 * static_cast<double>(h) * static_cast<double>(w)));
}

// random_conv's 81 weights for one sample: Box-Muller normals from
// supplementary blocks q = 0..20, scaled by conv_std. Block q gives weights
// 4q..4q+3 and depends on nothing else, so the blocks may be drawn in any
// order or in parallel (the CUDA kernel gives each its own thread).
constexpr uint32_t kConvWeightBlocks = (kConvWeights + 3) / 4;

OBSAUG_HD void draw_conv_weight_block(const PipelineDesc& p, const OpDesc& op, uint32_t sample,
                                      uint32_t q, float* weights) {
  const Philox4 r = draw_supplementary(p, op, sample, q);
  for (int pair = 0; pair < 2; ++pair) {
    const uint32_t r_radius = r.v[2 * pair];
    const uint32_t r_angle = r.v[2 * pair + 1];
    const float u1 = mul_rn(static_cast<float>((r_radius >> 8) + 1u), 1.0f / 16777216.0f);
    const float radius = sqrt_rn(mul_rn(-2.0f, log_f32(u1)));
    const float theta = mul_rn(kTwoPiF, unit(r_angle));
    const uint32_t j = 4 * q + 2 * static_cast<uint32_t>(pair);
    if (j < kConvWeights) weights[j] = mul_rn(op.conv_std, mul_rn(radius, cos_f32(theta)));
    if (j + 1 < kConvWeights) weights[j + 1] = mul_rn(op.conv_std, mul_rn(radius, sin_f32(theta)));
  }
}

OBSAUG_HD void draw_conv_weights(const PipelineDesc& p, const OpDesc& op, uint32_t sample,
                                 float* weights) {
  for (uint32_t q = 0; q < kConvWeightBlocks; ++q)
    draw_conv_weight_block(p, op, sample, q, weights);
}

// C channel planes of one frame: channel c's pixel (y, x) is
// base[c * channel_stride + y * w + x].
template <typename T>
struct FrameView {
  const T* base;
  int64_t channel_stride;
  int32_t h, w;
};

template <typename T>
OBSAUG_HD T pixel_at(const FrameView<T>& f, int32_t c, int32_t y, int32_t x) {
  return f.base[c * f.channel_stride + static_cast<int64_t>(y) * f.w + x];
}

// gray_fixed of pixel j (y * w + x) of an RGB frame.
template <typename T>
OBSAUG_HD int64_t gray_fixed_at(const FrameView<T>& f, int64_t j) {
  return gray_fixed(static_cast<float>(f.base[j]), static_cast<float>(f.base[f.channel_stride + j]),
                    static_cast<float>(f.base[2 * f.channel_stride + j]));
}

// random_conv's arithmetic (DESIGN.md section 3a), shared with the CPU's row
// loops: an input value scaled to 0..1, one tap of the accumulation (taps in
// the order j = (i*3 + ky)*3 + kx), and the activation.
OBSAUG_HD float conv_input(float value) { return div_rn(value, 255.0f); }
OBSAUG_HD float conv_tap(float acc, float weight, float in) {
  return add_rn(acc, mul_rn(weight, in));
}
OBSAUG_HD float conv_sigmoid_of_exp(float exp_of_minus_acc) {
  return mul_rn(255.0f, div_rn(1.0f, add_rn(1.0f, exp_of_minus_acc)));
}
OBSAUG_HD float conv_output(bool sigmoid, float acc) {
  return sigmoid ? conv_sigmoid_of_exp(exp_f32(-acc)) : mul_rn(255.0f, acc);
}

// random_conv at (y, x) of `src` (the state just before the op), 3 channels out.
template <typename T>
OBSAUG_HD void conv_pixel(const OpDesc& op, const float* weights, const FrameView<T>& src,
                          int32_t y, int32_t x, T* v) {
  float in[27];  // [i][ky][kx], divided by 255
  for (int i = 0; i < 3; ++i) {
    for (int ky = 0; ky < 3; ++ky) {
      for (int kx = 0; kx < 3; ++kx) {
        int32_t sy = y + ky - 1;
        int32_t sx = x + kx - 1;
        float value = 0.0f;
        const bool inside = sy >= 0 && sy < src.h && sx >= 0 && sx < src.w;
        if (inside || !op.zeros) {
          sy = clamp_coord(sy, src.h);
          sx = clamp_coord(sx, src.w);
          value = static_cast<float>(pixel_at(src, i, sy, sx));
        }
        in[(i * 3 + ky) * 3 + kx] = conv_input(value);
      }
    }
  }
  for (int o = 0; o < 3; ++o) {
    float acc = 0.0f;
    for (int j = 0; j < 27; ++j) acc = conv_tap(acc, weights[o * 27 + j], in[j]);
    v[o] = from_float(conv_output(op.sigmoid, acc), static_cast<const T*>(nullptr));
  }
}

// The row and column of stage k for the pixel traced by (row, col).
OBSAUG_HD void stage_coords(const AxisTrace& row, const AxisTrace& col, int k, int32_t* y,
                            int32_t* x) {
  const bool swapped = (row.swapped >> k) & 1u;
  *y = swapped ? col.at_op[k] : row.at_op[k];
  *x = swapped ? row.at_op[k] : col.at_op[k];
}

// One output pixel of segment `s`: channels c0..c0+nc-1 of the frame (nc is 3
// when the segment mixes channels, else 1). `src` is the segment's source
// (the pipeline's input frame, or the staged state before its first op),
// `row`/`col` the traces of the pixel over the segment's ops, `conv_weights`
// the weights of a random_conv at s.first, `mean0` the mean for a
// color_jitter with contrast at s.first.
template <typename T>
OBSAUG_HD void eval_frame_pixel(const PipelineDesc& p, const OpDraw* draws, const Segment& s,
                                const AxisTrace& row, const AxisTrace& col, const FrameView<T>& src,
                                const float* conv_weights, float mean0, const uint8_t* pool,
                                int32_t c0, int32_t nc, T* v) {
  const int32_t zero_op = zero_op_of(row, col);
  int start = s.first;
  if (zero_op >= 0) {
    for (int c = 0; c < nc; ++c) v[c] = T(0);
    start = zero_op + 1;
  } else {
    const int32_t sy = row.source_swapped ? col.source : row.source;
    const int32_t sx = row.source_swapped ? row.source : col.source;
    const OpDesc& first = p.ops[s.first];
    if (first.kind == OpKind::kRandomConv) {
      conv_pixel(first, conv_weights, src, sy, sx, v);
      start = s.first + 1;
    } else {
      for (int c = 0; c < nc; ++c) v[c] = pixel_at(src, c0 + c, sy, sx);
    }
  }
  for (int k = start; k < s.end; ++k) {
    const OpDesc& op = p.ops[k];
    const OpDraw& d = draws[k];
    switch (op.kind) {
      case OpKind::kOverlay: {
        int32_t y, x;
        stage_coords(row, col, k, &y, &x);
        for (int c = 0; c < nc; ++c)
          v[c] = blend(v[c], pool[pool_offset(p, op, d.image, c0 + c, y, x)],
                       static_cast<uint32_t>(d.weight));
        break;
      }
      case OpKind::kCutout: {
        int32_t y, x;
        stage_coords(row, col, k, &y, &x);
        const bool inside = x >= d.offset_x && x < d.offset_x + d.size_x && y >= d.offset_y &&
                            y < d.offset_y + d.size_y;
        if (d.gate && inside) {
          for (int c = 0; c < nc; ++c) v[c] = op.fill_color ? T(d.color[(c0 + c) % 3]) : T(0);
        }
        break;
      }
      case OpKind::kGrayscale:
        if (d.gate) v[0] = v[1] = v[2] = grayscale_value(v[0], v[1], v[2]);
        break;
      case OpKind::kColorJitter:
        if (d.gate) {
          float f[3] = {static_cast<float>(v[0]), static_cast<float>(v[1]),
                        static_cast<float>(v[2])};
          jitter_rgb(op, d, mean0, f);
          for (int c = 0; c < 3; ++c) v[c] = from_float(f[c], static_cast<const T*>(nullptr));
        }
        break;
      default:  // geometric: already in the traces
        break;
    }
  }
}

}  // namespace obsaug
