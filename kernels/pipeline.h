// The per-pixel math of obsaug, written once for the CPU loops and the CUDA
// kernels (DESIGN.md section 3).
//
// A pipeline is an ordered list of ops. Geometric ops (shift, crop) are
// translations with clamping or zero fill, so they act on rows and columns
// separately: `trace_axis` walks one output coordinate back through the ops
// and records where it lands at each op. Overlay blends a pool image in at the
// coordinates its stage sees. The value of an output pixel is
//   v = input[source] (or 0 from the latest zero-padding op that blanks it),
//   then every overlay after that point, in pipeline order.
// Both backends evaluate exactly this; they differ only in loop structure.
#pragma once

#include <cstdint>

#include "kernels/float_rn.h"
#include "kernels/hd.h"
#include "kernels/philox.h"

namespace obsaug {

constexpr int kMaxOps = 8;
constexpr uint32_t kWeightOne = 256;  // blend weights are w / 256, w in 0..256

enum class OpKind : int32_t { kShift = 0, kCrop = 1, kOverlay = 2 };

// One op with everything resolved on the host: frame sizes at its input and
// output, alpha turned into integer weights. Trivially copyable: passed by
// value into kernels inside PipelineDesc.
struct OpDesc {
  OpKind kind;
  uint32_t index;        // k in the Philox counter (DESIGN.md section 3)
  int32_t in_h, in_w;    // frame size this op reads
  int32_t out_h, out_w;  // frame size this op writes
  int32_t pad;           // shift: maximum offset p
  bool zeros;            // shift: zero fill (else replicate the border)
  bool center;           // crop: centre offsets instead of random
  bool per_frame;        // overlay: one draw per stacked frame
  uint32_t weight_lo;    // overlay: w range, 0..256
  uint32_t weight_hi;
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
};

// The parameters one op drew for one sample (and frame, for per-frame ops).
// Geometric ops (shift, crop) fill offset_x/offset_y: an output coordinate
// plus the offset is the coordinate at the op's input (shift: dx, dy in
// [-pad, pad]; crop: ox, oy in [0, in - out]). overlay fills image/weight.
// Fields an op does not use are 0.
struct OpDraw {
  int32_t offset_x;  // shift, crop: column offset
  int32_t offset_y;  // shift, crop: row offset
  int32_t image;     // overlay: pool image index, 0..P-1
  int32_t weight;    // overlay: blend weight w, 0..256
};

OBSAUG_HD OpDraw draw_op(const PipelineDesc& p, const OpDesc& op, uint32_t sample, uint32_t frame) {
  switch (op.kind) {
    case OpKind::kShift: {
      const Philox4 r = draw_block(p.seed, p.step, sample, op.index, 0);
      const uint32_t n = 2u * static_cast<uint32_t>(op.pad) + 1u;
      return OpDraw{static_cast<int32_t>(below(r.v[0], n)) - op.pad,
                    static_cast<int32_t>(below(r.v[1], n)) - op.pad, 0, 0};
    }
    case OpKind::kCrop: {
      const uint32_t span_w = static_cast<uint32_t>(op.in_w - op.out_w);
      const uint32_t span_h = static_cast<uint32_t>(op.in_h - op.out_h);
      if (op.center) {
        return OpDraw{static_cast<int32_t>(span_w / 2), static_cast<int32_t>(span_h / 2), 0, 0};
      }
      const Philox4 r = draw_block(p.seed, p.step, sample, op.index, 0);
      return OpDraw{static_cast<int32_t>(below(r.v[0], span_w + 1)),
                    static_cast<int32_t>(below(r.v[1], span_h + 1)), 0, 0};
    }
    case OpKind::kOverlay:
    default: {
      const Philox4 r = draw_block(p.seed, p.step, sample, op.index, op.per_frame ? frame : 0);
      const uint32_t weight = op.weight_lo + below(r.v[1], op.weight_hi - op.weight_lo + 1u);
      return OpDraw{0, 0, static_cast<int32_t>(below(r.v[0], static_cast<uint32_t>(p.pool_size))),
                    static_cast<int32_t>(weight)};
    }
  }
}

// Draws of every op for one sample and frame.
OBSAUG_HD void draw_pipeline(const PipelineDesc& p, uint32_t sample, uint32_t frame,
                             OpDraw* draws) {
  for (int k = 0; k < p.n_ops; ++k) draws[k] = draw_op(p, p.ops[k], sample, frame);
}

// Where one output row (axis 0) or column (axis 1) comes from.
struct AxisTrace {
  int32_t source;          // coordinate in the pipeline's input frame
  int32_t zero_op;         // latest op whose zero padding blanks it, or -1
  int32_t at_op[kMaxOps];  // coordinate at the output of op k (0 before zero_op)
};

OBSAUG_HD int32_t clamp_coord(int32_t c, int32_t len) {
  return c < 0 ? 0 : (c >= len ? len - 1 : c);
}

// Walks output coordinate `coord` back through the geometric ops. Geometric
// draws do not depend on the frame, so any frame's draws may be passed.
OBSAUG_HD AxisTrace trace_axis(const PipelineDesc& p, const OpDraw* draws, int axis,
                               int32_t coord) {
  AxisTrace t;
  t.zero_op = -1;
  for (int k = p.n_ops - 1; k >= 0; --k) {
    const OpDesc& op = p.ops[k];
    if (t.zero_op >= 0) {
      t.at_op[k] = 0;
      continue;
    }
    t.at_op[k] = coord;
    const int32_t offset = axis == 0 ? draws[k].offset_y : draws[k].offset_x;
    const int32_t len_in = axis == 0 ? op.in_h : op.in_w;
    if (op.kind == OpKind::kShift) {
      coord += offset;
      if (op.zeros && (coord < 0 || coord >= len_in)) {
        t.zero_op = k;
        coord = 0;
      } else {
        coord = clamp_coord(coord, len_in);
      }
    } else if (op.kind == OpKind::kCrop) {
      coord += offset;
    }
  }
  t.source = coord;
  return t;
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
template <typename T>
OBSAUG_HD T eval_pixel(const PipelineDesc& p, const OpDraw* draws, const AxisTrace& row,
                       const AxisTrace& col, const T* in_plane, const uint8_t* pool,
                       int32_t channel) {
  const int32_t zero_op = zero_op_of(row, col);
  T v = zero_op < 0 ? in_plane[static_cast<int64_t>(row.source) * p.in_w + col.source] : T(0);
  for (int k = zero_op + 1; k < p.n_ops; ++k) {
    const OpDesc& op = p.ops[k];
    if (op.kind != OpKind::kOverlay) continue;
    const uint8_t d = pool[pool_offset(p, op, draws[k].image, channel, row.at_op[k], col.at_op[k])];
    v = blend(v, d, static_cast<uint32_t>(draws[k].weight));
  }
  return v;
}

}  // namespace obsaug
