// The per-pixel math of obsaug, written once for the CPU loops and the CUDA
// kernels (DESIGN.md section 3).
//
// A pipeline is an ordered list of ops. Geometric ops (shift, crop, flip,
// rotate, translate) move whole rows and columns: `trace_axis` walks one
// output coordinate back through the ops and records where it lands at each
// op (a quarter turn moves a row coordinate onto the column axis and back,
// which AxisTrace::swapped records). Value ops (overlay, cutout, grayscale,
// color_jitter) change a pixel at the coordinates their stage sees. The value
// of an output pixel is
//   v = input[source] (or 0 from the latest zero-padding op that blanks it),
//   then every value op after that point, in pipeline order.
// On CUDA, pipelines of shift, crop and overlay only are evaluated per
// channel plane (eval_pixel below) and a pipeline with any op of the second
// family per stacked frame (kernels/frame_eval.h), which also handles the
// barriers (random_conv, color_jitter's contrast). The CPU runs every
// pipeline without a barrier on its row runs (kernels/augment_cpu.cpp).
#pragma once

#include <cstdint>

#include "kernels/float_rn.h"
#include "kernels/hd.h"
#include "kernels/philox.h"

namespace obsaug {

constexpr int kMaxOps = 8;
// Stacked frames per sample: s < 0x8000 in the counter's word 3 (DESIGN.md
// section 3a; blocks with the top bit set are supplementary).
constexpr int64_t kMaxFrames = 0x8000;
constexpr uint32_t kWeightOne = 256;  // blend weights are w / 256, w in 0..256

constexpr uint32_t kGateOne = 1u << 24;  // gate thresholds are in 0..2^24

enum class OpKind : int32_t {
  kShift = 0,
  kCrop = 1,
  kOverlay = 2,
  // The second family (DESIGN.md section 3a).
  kFlip = 3,
  kRotate = 4,
  kTranslate = 5,
  kCutout = 6,
  kGrayscale = 7,
  kColorJitter = 8,
  kRandomConv = 9,
};

// Ops of the second family run on the per-frame path (kernels/frame_eval.h)
// and are declared as torch ops from the op schema (bindings/torch_ops.cpp).
OBSAUG_HD constexpr bool in_second_family(OpKind kind) {
  return static_cast<int32_t>(kind) >= static_cast<int32_t>(OpKind::kFlip);
}

// color_jitter's components, in the order they apply.
enum JitterPart : int { kBrightness = 0, kContrast = 1, kSaturation = 2, kHue = 3 };

// One op with everything resolved on the host: frame sizes at its input and
// output, alpha turned into integer weights. Trivially copyable: passed by
// value into kernels inside PipelineDesc.
struct OpDesc {
  OpKind kind;
  uint32_t index;        // k in the Philox counter (DESIGN.md section 3)
  int32_t in_h, in_w;    // frame size this op reads
  int32_t out_h, out_w;  // frame size this op writes
  int32_t pad;           // shift: maximum offset p
  bool zeros;            // shift, random_conv: zero fill (else replicate the border)
  bool center;           // crop: centre offsets instead of random
  bool per_frame;        // overlay: one draw per stacked frame
  bool distinct;         // overlay: images of a call drawn without replacement (block_image)
  uint32_t weight_lo;    // overlay: w range, 0..256
  uint32_t weight_hi;
  uint32_t gate;    // gated ops: applies iff (r >> 8) < gate, gate in 0..2^24
  bool vertical;    // flip: mirror rows (else columns)
  int32_t cut_min;  // cutout: rectangle sides, both inclusive
  int32_t cut_max;
  bool fill_color;     // cutout: a drawn colour (else 0)
  bool jitter_on[4];   // color_jitter: component x > 0 (JitterPart order)
  float jitter_lo[4];  // color_jitter: factor = lo + unit(r) * span (float32)
  float jitter_span[4];
  float conv_std;       // random_conv: weight = conv_std * normal
  bool sigmoid;         // random_conv: 255 * sigmoid(acc) (else 255 * acc)
  bool mixes_channels;  // OpNeeds::mixes_channels of its schema (then C == 3)
};

struct PipelineDesc {
  OpDesc ops[kMaxOps];
  int32_t n_ops;
  int32_t in_h, in_w;      // observation frame size
  int32_t out_h, out_w;    // frame size after the last op
  int32_t frame_channels;  // C: channels per stacked frame (pool channels)
  int32_t pool_size;       // P: images in the pool (0 without overlay)
  uint64_t seed;
  uint64_t step;
  // Per-frame evaluation (kernels/frame_eval.h): segment i runs ops
  // [segment_first[i], segment_first[i + 1]); every segment after the first
  // starts at a barrier op. n_segments == 0: the per-plane path applies.
  int32_t n_segments;
  int32_t segment_first[kMaxOps + 1];
};

// The parameters one op drew for one sample (and frame, for per-frame ops).
// Shift and crop fill offset_x/offset_y: an output coordinate plus the offset
// is the coordinate at the op's input (shift: dx, dy in [-pad, pad]; crop:
// ox, oy in [0, in - out]); translate's offset is where the frame lands on
// its canvas (x1, y1), cutout's the rectangle's corner (x0, y0). overlay
// fills image/weight. Fields an op does not use are 0.
struct OpDraw {
  int32_t offset_x;  // shift, crop, translate, cutout: column offset
  int32_t offset_y;  // shift, crop, translate, cutout: row offset
  int32_t image;     // overlay: pool image index, 0..P-1
  int32_t weight;    // overlay: blend weight w, 0..256
  int32_t gate;      // flip, rotate, cutout, grayscale, color_jitter: 1 when the op applies
  int32_t quarter;   // rotate: quarter turns, 1..3
  int32_t size_x;    // cutout: rectangle width sw
  int32_t size_y;    // cutout: rectangle height sh
  int32_t color[3];  // cutout: fill colour of channels 0..2
  float factor[4];   // color_jitter: brightness, contrast, saturation, hue (JitterPart order)
};

// Supplementary block j of an op (DESIGN.md section 3a): frame word 0x8000 + j.
OBSAUG_HD Philox4 draw_supplementary(const PipelineDesc& p, const OpDesc& op, uint32_t sample,
                                     uint32_t j) {
  return draw_block(p.seed, p.step, sample, op.index, 0x8000u + j);
}

// overlay with distinct: the image of `sample` (and `frame`) drawn without
// replacement. The samples of a call fall in blocks of P (the pool size):
// block j = sample / P maps its samples onto the P images by a keyed
// permutation, so the samples of one block see every image once and a call of
// B <= P samples sees B different images. The permutation of block j (and
// frame s) is a 4-round Feistel network on 2k bits (the smallest k with
// 4^k >= P, at least 1) keyed by supplementary block 0x8000 + s of counter
// sample j, walked until it lands below P (cycle walking: fewer than 4 rounds
// of it on average, since 4^k < 4P). A pure function of (seed, step, sample,
// frame), as every draw.
OBSAUG_HD uint32_t feistel_round(uint32_t half, uint32_t key, uint32_t mask) {
  uint32_t x = (half ^ key) * 0x9E3779B1u;  // a 32-bit integer mix (murmur3's finaliser)
  x ^= x >> 16;
  x *= 0x85EBCA6Bu;
  x ^= x >> 13;
  x *= 0xC2B2AE35u;
  x ^= x >> 16;
  return x & mask;
}

OBSAUG_HD uint32_t block_image(const PipelineDesc& p, const OpDesc& op, uint32_t sample,
                               uint32_t frame) {
  const uint32_t pool = static_cast<uint32_t>(p.pool_size);
  uint32_t bits = 1;
  while (bits < 16 && (1u << (2 * bits)) < pool) ++bits;
  const uint32_t mask = (1u << bits) - 1u;
  const Philox4 keys = draw_block(p.seed, p.step, sample / pool, op.index, 0x8000u + frame);
  uint32_t x = sample % pool;
  do {
    uint32_t left = x >> bits, right = x & mask;
    for (int round = 0; round < 4; ++round) {
      const uint32_t next = left ^ feistel_round(right, keys.v[round], mask);
      left = right;
      right = next;
    }
    x = (left << bits) | right;
  } while (x >= pool);
  return x;
}

OBSAUG_HD int32_t gate_open(uint32_t r, uint32_t threshold) { return (r >> 8) < threshold ? 1 : 0; }

OBSAUG_HD float drawn_factor(float lo, float span, uint32_t r) {
  return add_rn(lo, mul_rn(unit(r), span));
}

OBSAUG_HD OpDraw draw_op(const PipelineDesc& p, const OpDesc& op, uint32_t sample, uint32_t frame) {
  OpDraw d{};
  switch (op.kind) {
    case OpKind::kShift: {
      const Philox4 r = draw_block(p.seed, p.step, sample, op.index, 0);
      const uint32_t n = 2u * static_cast<uint32_t>(op.pad) + 1u;
      d.offset_x = static_cast<int32_t>(below(r.v[0], n)) - op.pad;
      d.offset_y = static_cast<int32_t>(below(r.v[1], n)) - op.pad;
      return d;
    }
    case OpKind::kCrop: {
      const uint32_t span_w = static_cast<uint32_t>(op.in_w - op.out_w);
      const uint32_t span_h = static_cast<uint32_t>(op.in_h - op.out_h);
      if (op.center) {
        d.offset_x = static_cast<int32_t>(span_w / 2);
        d.offset_y = static_cast<int32_t>(span_h / 2);
        return d;
      }
      const Philox4 r = draw_block(p.seed, p.step, sample, op.index, 0);
      d.offset_x = static_cast<int32_t>(below(r.v[0], span_w + 1));
      d.offset_y = static_cast<int32_t>(below(r.v[1], span_h + 1));
      return d;
    }
    case OpKind::kOverlay: {
      const uint32_t draw_frame = op.per_frame ? frame : 0;
      const Philox4 r = draw_block(p.seed, p.step, sample, op.index, draw_frame);
      const uint32_t pool = static_cast<uint32_t>(p.pool_size);
      d.image = static_cast<int32_t>(op.distinct ? block_image(p, op, sample, draw_frame)
                                                 : below(r.v[0], pool));
      d.weight =
          static_cast<int32_t>(op.weight_lo + below(r.v[1], op.weight_hi - op.weight_lo + 1u));
      return d;
    }
    case OpKind::kFlip:
    case OpKind::kGrayscale: {
      const Philox4 r = draw_block(p.seed, p.step, sample, op.index, 0);
      d.gate = gate_open(r.v[0], op.gate);
      return d;
    }
    case OpKind::kRotate: {
      const Philox4 r = draw_block(p.seed, p.step, sample, op.index, 0);
      d.gate = gate_open(r.v[0], op.gate);
      d.quarter = 1 + static_cast<int32_t>(below(r.v[1], 3));
      return d;
    }
    case OpKind::kTranslate: {
      const Philox4 r = draw_block(p.seed, p.step, sample, op.index, 0);
      d.offset_x =
          static_cast<int32_t>(below(r.v[0], static_cast<uint32_t>(op.out_w - op.in_w + 1)));
      d.offset_y =
          static_cast<int32_t>(below(r.v[1], static_cast<uint32_t>(op.out_h - op.in_h + 1)));
      return d;
    }
    case OpKind::kCutout: {
      const Philox4 r = draw_block(p.seed, p.step, sample, op.index, 0);
      const Philox4 s = draw_supplementary(p, op, sample, 0);
      const uint32_t sizes = static_cast<uint32_t>(op.cut_max - op.cut_min + 1);
      const int32_t sw = op.cut_min + static_cast<int32_t>(below(r.v[0], sizes));
      const int32_t sh = op.cut_min + static_cast<int32_t>(below(r.v[1], sizes));
      d.size_x = sw < op.in_w ? sw : op.in_w;
      d.size_y = sh < op.in_h ? sh : op.in_h;
      d.offset_x =
          static_cast<int32_t>(below(r.v[2], static_cast<uint32_t>(op.in_w - d.size_x + 1)));
      d.offset_y =
          static_cast<int32_t>(below(r.v[3], static_cast<uint32_t>(op.in_h - d.size_y + 1)));
      d.gate = gate_open(s.v[3], op.gate);
      for (int c = 0; c < 3; ++c) d.color[c] = static_cast<int32_t>(below(s.v[c], 256));
      return d;
    }
    case OpKind::kColorJitter: {
      const Philox4 r = draw_block(p.seed, p.step, sample, op.index, 0);
      const Philox4 s = draw_supplementary(p, op, sample, 0);
      for (int part = 0; part < 4; ++part)
        d.factor[part] = drawn_factor(op.jitter_lo[part], op.jitter_span[part], r.v[part]);
      d.gate = gate_open(s.v[0], op.gate);
      return d;
    }
    case OpKind::kRandomConv:  // its 81 weights: draw_conv_weights (kernels/frame_eval.h)
    default:
      return d;
  }
}

// Draws of every op for one sample and frame.
OBSAUG_HD void draw_pipeline(const PipelineDesc& p, uint32_t sample, uint32_t frame,
                             OpDraw* draws) {
  for (int k = 0; k < p.n_ops; ++k) draws[k] = draw_op(p, p.ops[k], sample, frame);
}

// Where one output row (axis 0) or column (axis 1) comes from. A quarter turn
// (rotate with q = 1 or 3) moves the coordinate to the other axis: `swapped`
// says, per op, whether at_op[k] is a coordinate of the other axis than the
// one the trace started on; `source_swapped` the same for `source`.
// 40 bytes (the per-plane CUDA kernel keeps out_h + out_w of them in shared memory).
struct AxisTrace {
  int32_t source;   // coordinate in the traced range's input frame
  int16_t zero_op;  // latest op whose zero padding blanks it, or -1
  uint8_t swapped;  // bit k: at_op[k] lies on the other axis
  bool source_swapped;
  int32_t at_op[kMaxOps];  // coordinate at the output of op k (0 before zero_op)
};
static_assert(sizeof(AxisTrace) == 40, "AxisTrace is laid out for shared memory");
static_assert(kMaxOps <= 8, "AxisTrace::swapped has one bit per op");

OBSAUG_HD int32_t clamp_coord(int32_t c, int32_t len) {
  return c < 0 ? 0 : (c >= len ? len - 1 : c);
}

// One geometric step back through op `op` (draw `d`): the coordinate at its
// input of `coord`, which lies on axis `a` at its output. Zero padding that
// blanks it sets *zeroed and returns 0. Value ops keep coordinates.
OBSAUG_HD int32_t trace_step(const OpDesc& op, const OpDraw& d, int a, int32_t coord,
                             bool* zeroed) {
  const int32_t offset = a == 0 ? d.offset_y : d.offset_x;
  const int32_t len_in = a == 0 ? op.in_h : op.in_w;
  switch (op.kind) {
    case OpKind::kShift:
      coord += offset;
      if (op.zeros && (coord < 0 || coord >= len_in)) {
        *zeroed = true;
        return 0;
      }
      return clamp_coord(coord, len_in);
    case OpKind::kCrop:
      return coord + offset;
    case OpKind::kTranslate:  // the frame sits at (offset_x, offset_y) on a zero canvas
      coord -= offset;
      if (coord < 0 || coord >= len_in) {
        *zeroed = true;
        return 0;
      }
      return coord;
    case OpKind::kFlip:
      return d.gate && (op.vertical ? a == 0 : a == 1) ? len_in - 1 - coord : coord;
    case OpKind::kRotate: {
      // torch.rot90(x, q, dims=(-2, -1)) on a square n x n frame:
      // q=1 out[y][x] = in[x][n-1-y]; q=2 in[n-1-y][n-1-x]; q=3 in[n-1-x][y].
      const bool mirrored = d.quarter == 2 || (d.quarter == 1 ? a == 0 : a == 1);
      return d.gate && mirrored ? len_in - 1 - coord : coord;
    }
    default:
      return coord;
  }
}

// The axis a coordinate on axis `a` at op's output lies on at its input: a
// quarter turn swaps them.
OBSAUG_HD int axis_before(const OpDesc& op, const OpDraw& d, int a) {
  return op.kind == OpKind::kRotate && d.gate && d.quarter != 2 ? 1 - a : a;
}

// Walks coordinate `coord` on `axis` at the output of op end - 1 back through
// the geometric ops first..end-1, to the input of op `first`. Geometric draws
// do not depend on the frame, so any frame's draws may be passed.
OBSAUG_HD AxisTrace trace_range(const PipelineDesc& p, const OpDraw* draws, int axis, int32_t coord,
                                int first, int end) {
  AxisTrace t;
  t.zero_op = -1;
  t.swapped = 0;
  int a = axis;  // the axis `coord` lies on at this stage
  for (int k = end - 1; k >= first; --k) {
    if (t.zero_op >= 0) {
      t.at_op[k] = 0;
      continue;
    }
    t.at_op[k] = coord;
    if (a != axis) t.swapped = static_cast<uint8_t>(t.swapped | (1u << k));
    bool zeroed = false;
    coord = trace_step(p.ops[k], draws[k], a, coord, &zeroed);
    if (zeroed) t.zero_op = static_cast<int16_t>(k);
    a = axis_before(p.ops[k], draws[k], a);
  }
  t.source = coord;
  t.source_swapped = a != axis;
  return t;
}

// The whole pipeline (the per-plane path: shift, crop and overlay only, so
// nothing is swapped).
OBSAUG_HD AxisTrace trace_axis(const PipelineDesc& p, const OpDraw* draws, int axis,
                               int32_t coord) {
  return trace_range(p, draws, axis, coord, 0, p.n_ops);
}

OBSAUG_HD int32_t zero_op_of(const AxisTrace& row, const AxisTrace& col) {
  return row.zero_op > col.zero_op ? row.zero_op : col.zero_op;
}

// Overlay blend with weight w / 256 (DESIGN.md section 3).
// uint8: (x * (256 - w) + d * w + 128) >> 8; every term fits 16 bits.
OBSAUG_HD uint8_t blend(uint8_t x, uint8_t d, uint32_t w) {
  const uint16_t keep = static_cast<uint16_t>(kWeightOne - w);
  const uint16_t take = static_cast<uint16_t>(w);
  const uint16_t mixed = static_cast<uint16_t>(static_cast<uint16_t>(x * keep) +
                                               static_cast<uint16_t>(d * take) + 128u);
  return static_cast<uint8_t>(mixed >> 8);
}
// float32 (0..255): (1 - w/256) * x + (w/256) * d.
OBSAUG_HD float blend(float x, uint8_t d, uint32_t w) {
  const float take = static_cast<float>(w) * (1.0f / 256.0f);
  const float keep = 1.0f - take;  // exact: w / 256 has at most 9 bits
  return add_rn(mul_rn(keep, x), mul_rn(take, static_cast<float>(d)));
}

// Output conversion: same dtype, or float32 with out = v * scale + bias.
OBSAUG_HD float to_output(float v, float scale, float bias, float*) {
  return add_rn(mul_rn(v, scale), bias);
}
OBSAUG_HD float to_output(uint8_t v, float scale, float bias, float*) {
  return add_rn(mul_rn(static_cast<float>(v), scale), bias);
}
OBSAUG_HD uint8_t to_output(uint8_t v, float, float, uint8_t*) { return v; }

// Index of pool pixel (image, channel, y, x) in a contiguous [P, C, H, W] pool.
OBSAUG_HD int64_t pool_offset(const PipelineDesc& p, const OpDesc& op, int32_t image,
                              int32_t channel, int32_t y, int32_t x) {
  return ((static_cast<int64_t>(image) * p.frame_channels + channel) * op.out_h + y) * op.out_w + x;
}

// One output pixel of one channel plane, evaluated from scratch. `in_plane`
// is the contiguous in_h x in_w input plane, `draws` this sample's (and
// frame's) draws, `channel` the channel within its frame (0..C-1).
// `staged_pool`, when not null, holds the pool plane that op `staged_op`
// (an overlay) reads for this plane, copied out of `pool` (the CUDA kernel
// stages it in shared memory): that op reads it there.
template <typename T>
OBSAUG_HD T eval_pixel(const PipelineDesc& p, const OpDraw* draws, const AxisTrace& row,
                       const AxisTrace& col, const T* in_plane, const uint8_t* pool,
                       int32_t channel, const uint8_t* staged_pool = nullptr, int staged_op = -1) {
  const int32_t zero_op = zero_op_of(row, col);
  T v = zero_op < 0 ? in_plane[static_cast<int64_t>(row.source) * p.in_w + col.source] : T(0);
  for (int k = zero_op + 1; k < p.n_ops; ++k) {
    const OpDesc& op = p.ops[k];
    if (op.kind != OpKind::kOverlay) continue;
    const uint8_t d =
        k == staged_op
            ? staged_pool[pool_offset(p, op, 0, 0, row.at_op[k], col.at_op[k])]
            : pool[pool_offset(p, op, draws[k].image, channel, row.at_op[k], col.at_op[k])];
    v = blend(v, d, static_cast<uint32_t>(draws[k].weight));
  }
  return v;
}

}  // namespace obsaug
