// CPU backend of the per-frame path (kernels/frame_eval.h): pipelines with any
// op of the second family. Work unit: one stacked frame; each thread keeps
// its own staging frames (a few tens of KiB for 84x84 RGB: cache-sized), so
// the whole batch is read once and written once.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/augment_cpu.h"
#include "kernels/frame_eval.h"
#include "kernels/frame_rows_cpu.h"
#include "kernels/plane_copy.h"

namespace obsaug {

int64_t largest_stage_plane(const PipelineDesc& p) {
  int64_t largest = static_cast<int64_t>(p.in_h) * p.in_w;
  for (int k = 0; k < p.n_ops; ++k)
    largest = std::max<int64_t>(largest, static_cast<int64_t>(p.ops[k].out_h) * p.ops[k].out_w);
  return largest;
}

namespace {

// Ops the CPU runs over a whole frame by rows when they start a segment
// (kernels/frame_rows_cpu.h): the barriers, and color_jitter without contrast.
bool runs_by_rows(const OpDesc& op) {
  return op.kind == OpKind::kRandomConv || op.kind == OpKind::kColorJitter;
}

// Ops that only move pixels (their effect is all in the traces).
bool only_moves(const PipelineDesc& p, const Segment& s) {
  for (int k = s.first; k < s.end; ++k) {
    const OpKind kind = p.ops[k].kind;
    if (kind != OpKind::kShift && kind != OpKind::kCrop && kind != OpKind::kFlip &&
        kind != OpKind::kRotate && kind != OpKind::kTranslate)
      return false;
  }
  return true;
}

// A segment of moves only, by rows: what eval_frame_pixel gives for it (the
// source pixel at the traced coordinates, or 0 where a zero padding blanks
// it), every channel of the frame into dst (channel c at dst + c * dst_plane).
template <typename T>
void gather_moves(const std::vector<AxisTrace>& rows, const std::vector<AxisTrace>& cols,
                  const FrameView<T>& src, int64_t channels, std::vector<int64_t>* col_index,
                  T* dst, int64_t dst_plane) {
  const int32_t out_w = static_cast<int32_t>(cols.size());
  // [x]: the column's offset in an unswapped row; [out_w + x]: in a swapped one; -1: blank
  col_index->resize(2 * static_cast<size_t>(out_w));
  int64_t* plain = col_index->data();
  int64_t* swapped = plain + out_w;
  for (int32_t x = 0; x < out_w; ++x) {
    const bool blank = cols[x].zero_op >= 0;
    plain[x] = blank ? -1 : cols[x].source;
    swapped[x] = blank ? -1 : static_cast<int64_t>(cols[x].source) * src.w;
  }
  for (int64_t c = 0; c < channels; ++c) {
    const T* in = src.base + c * src.channel_stride;
    for (size_t y = 0; y < rows.size(); ++y) {
      T* __restrict out = dst + c * dst_plane + static_cast<int64_t>(y) * out_w;
      const AxisTrace& row = rows[y];
      if (row.zero_op >= 0) {
        std::fill(out, out + out_w, T(0));
        continue;
      }
      const T* line =
          in + (row.source_swapped ? row.source : static_cast<int64_t>(row.source) * src.w);
      const int64_t* index = row.source_swapped ? swapped : plain;
      for (int32_t x = 0; x < out_w; ++x) out[x] = index[x] < 0 ? T(0) : line[index[x]];
    }
  }
}

// Per-thread scratch sized for every stage of `p`.
template <typename In>
struct FrameScratch {
  std::vector<In> stages[3];  // two alternate segment outputs; the third: a row op's own output
  std::vector<float> padded;  // random_conv's bordered input planes
  std::vector<float> lanes;   // one row of 3 channels in float
  FrameScratch(const PipelineDesc& p, int64_t frame_channels) {
    const int64_t stage_plane = largest_stage_plane(p);
    for (auto& stage : stages) stage.resize(static_cast<size_t>(frame_channels * stage_plane));
    int64_t padded_plane = 0, widest = 1;
    for (int k = 0; k < p.n_ops; ++k) {
      const OpDesc& op = p.ops[k];
      padded_plane = std::max<int64_t>(padded_plane, (int64_t{op.in_h} + 2) * (op.in_w + 2));
      widest = std::max<int64_t>(widest, std::max(op.in_w, op.out_w));
    }
    padded.resize(static_cast<size_t>(kMaxMixedChannels * padded_plane));
    lanes.resize(static_cast<size_t>(kMaxMixedChannels * widest));
  }
};

// Op `first` of a segment (random_conv or color_jitter), over the whole frame
// `src`, into dst (channel c at dst + c * dst_plane, rows of src.w).
template <typename In>
void run_by_rows(const PipelineDesc& p, const OpDesc& op, const OpDraw& draw,
                 const float* conv_weights, const FrameView<In>& src, FrameScratch<In>* scratch,
                 In* dst, int64_t dst_plane) {
  if (op.kind == OpKind::kRandomConv) {
    conv_pad_frame(src, op.zeros, scratch->padded.data());
    conv_frame_rows(scratch->padded.data(), src.h, src.w, conv_weights, op.sigmoid,
                    scratch->lanes.data(), dst, dst_plane);
    return;
  }
  if (!draw.gate) {  // identity
    const int64_t plane = static_cast<int64_t>(src.h) * src.w;
    for (int c = 0; c < kMaxMixedChannels; ++c)
      if (dst + c * dst_plane != src.base + c * src.channel_stride)
        std::memmove(dst + c * dst_plane, src.base + c * src.channel_stride, sizeof(In) * plane);
    return;
  }
  const float mean0 =
      op.jitter_on[kContrast] ? mean_of_sum(gray_fixed_sum(src), src.h, src.w) : 0.0f;
  jitter_frame_rows(src, op, jitter_factors(op, draw, mean0), scratch->lanes.data(), dst,
                    dst_plane);
}

// The frame's channel planes from `v` to the output (out = v * scale + bias
// or the value itself), `n` pixels each.
template <typename In, typename Out>
void store_frame(const In* v, int64_t channels, int64_t n, const AugmentBuffers<In, Out>& buf,
                 Out* out, int64_t out_plane) {
  for (int64_t c = 0; c < channels; ++c) {
    const In* __restrict from = v + c * n;
    Out* __restrict to = out + c * out_plane;
    for (int64_t j = 0; j < n; ++j)
      to[j] = to_output(from[j], buf.scale, buf.bias, static_cast<Out*>(nullptr));
  }
}

}  // namespace

template <typename In, typename Out>
void augment_cpu_frames(const PipelineDesc& p, const AugmentBuffers<In, Out>& buf) {
  const FrameBatch work = frame_batch(p, buf);
  const bool whole_by_rows =  // one segment, one op run by rows: in place is safe
      p.n_segments == 1 && p.n_ops == 1 && runs_by_rows(p.ops[0]);

  at::parallel_for(0, work.units, 1, [&](int64_t begin, int64_t end) {
    FrameScratch<In> scratch(p, work.frame_channels);
    auto& stages = scratch.stages;
    std::vector<AxisTrace> rows, cols;
    std::vector<int64_t> col_index;
    OpDraw draws[kMaxOps];
    std::vector<float> weights(static_cast<size_t>(kMaxOps) * kConvWeights);
    int64_t weights_sample = -1;
    for (int64_t unit = begin; unit < end; ++unit) {
      const uint32_t sample = static_cast<uint32_t>(unit / work.stack);
      const uint32_t frame = static_cast<uint32_t>(unit % work.stack);
      const int64_t first_plane = static_cast<int64_t>(sample) * buf.channels +
                                  static_cast<int64_t>(frame) * work.frame_channels;
      Out* const frame_out =
          buf.out + output_plane(buf, sample, static_cast<int64_t>(frame) * work.frame_channels) *
                        work.out_plane;
      draw_pipeline(p, counter_sample(buf, sample), frame, draws);
      if (weights_sample != sample) {  // the same weights for every frame of a sample
        for (int k = 0; k < p.n_ops; ++k)
          if (p.ops[k].kind == OpKind::kRandomConv)
            draw_conv_weights(p, p.ops[k], counter_sample(buf, sample),
                              weights.data() + k * kConvWeights);
        weights_sample = sample;
      }
      FrameView<In> src{input_plane(p, buf, first_plane), work.in_plane, p.in_h, p.in_w};
      if (work.in_place && p.n_segments == 1 && !whole_by_rows) {
        // the only segment writes what it reads
        copy_plane_bytes(stages[1].data(), src.base,
                         sizeof(In) * work.frame_channels * work.in_plane);
        src.base = stages[1].data();
      }
      for (int i = 0; i < p.n_segments; ++i) {
        Segment s = segment_of(p, i);
        const bool last = i + 1 == p.n_segments;
        In* stage = stages[i % 2].data();
        const int64_t plane = static_cast<int64_t>(s.out_h) * s.out_w;
        const OpDesc& first = p.ops[s.first];
        if (runs_by_rows(first)) {
          const bool tail = s.first + 1 < s.end;  // ops after it in the segment
          const bool into_out = !tail && last && work.direct;
          const int64_t op_plane = static_cast<int64_t>(first.out_h) * first.out_w;
          In* dst = tail ? stages[2].data() : stage;
          if (into_out) {
            if constexpr (std::is_same<In, Out>::value) dst = frame_out;
          }
          run_by_rows(p, first, draws[s.first], weights.data() + s.first * kConvWeights, src,
                      &scratch, dst, into_out ? work.out_plane : op_plane);
          src = FrameView<In>{dst, op_plane, first.out_h, first.out_w};
          if (!tail) {
            if (last && !into_out)
              store_frame(dst, work.frame_channels, op_plane, buf, frame_out, work.out_plane);
            continue;
          }
          // The rest of the segment reads the op's output like a segment of its own.
          s.first += 1;
          s.in_h = first.out_h;
          s.in_w = first.out_w;
          s.mixes = false;
          for (int k = s.first; k < s.end; ++k) s.mixes = s.mixes || p.ops[k].mixes_channels;
        }
        rows.resize(s.out_h);
        cols.resize(s.out_w);
        for (int32_t y = 0; y < s.out_h; ++y) rows[y] = trace_range(p, draws, 0, y, s.first, s.end);
        for (int32_t x = 0; x < s.out_w; ++x) cols[x] = trace_range(p, draws, 1, x, s.first, s.end);
        if (only_moves(p, s)) {
          const bool into_out = last && work.direct;
          In* dst = stage;
          if (into_out) {
            if constexpr (std::is_same<In, Out>::value) dst = frame_out;
          }
          gather_moves(rows, cols, src, work.frame_channels, &col_index, dst,
                       into_out ? work.out_plane : plane);
          if (last && !into_out)
            store_frame(dst, work.frame_channels, plane, buf, frame_out, work.out_plane);
          src = FrameView<In>{stage, plane, s.out_h, s.out_w};
          continue;
        }
        const int32_t group = s.mixes ? kMaxMixedChannels : 1;
        for (int32_t c0 = 0; c0 < work.frame_channels; c0 += group) {
          for (int32_t y = 0; y < s.out_h; ++y) {
            for (int32_t x = 0; x < s.out_w; ++x) {
              In v[kMaxMixedChannels];
              eval_frame_pixel(p, draws, s, rows[y], cols[x], src, nullptr, 0.0f, buf.pool, c0,
                               group, v);
              const int64_t at = static_cast<int64_t>(y) * s.out_w + x;
              for (int c = 0; c < group; ++c) {
                if (!last) {
                  stage[(c0 + c) * plane + at] = v[c];
                } else {
                  Out* out = frame_out + (c0 + c) * work.out_plane + at;
                  *out = work.direct
                             ? static_cast<Out>(v[c])
                             : to_output(v[c], buf.scale, buf.bias, static_cast<Out*>(nullptr));
                }
              }
            }
          }
        }
        src = FrameView<In>{stage, plane, s.out_h, s.out_w};
      }
    }
  });
}

template void augment_cpu_frames<uint8_t, uint8_t>(const PipelineDesc&,
                                                   const AugmentBuffers<uint8_t, uint8_t>&);
template void augment_cpu_frames<uint8_t, float>(const PipelineDesc&,
                                                 const AugmentBuffers<uint8_t, float>&);
template void augment_cpu_frames<float, float>(const PipelineDesc&,
                                               const AugmentBuffers<float, float>&);

}  // namespace obsaug
