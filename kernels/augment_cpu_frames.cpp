// CPU backend of the per-frame path (kernels/frame_eval.h): pipelines with any
// op of the second family. Work unit: one stacked frame; each thread keeps
// its own staging frames (a few tens of KiB for 84x84 RGB: cache-sized), so
// the whole batch is read once and written once.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/augment_cpu.h"
#include "kernels/frame_eval.h"

namespace obsaug {

int64_t largest_stage_plane(const PipelineDesc& p) {
  int64_t largest = static_cast<int64_t>(p.in_h) * p.in_w;
  for (int k = 0; k < p.n_ops; ++k)
    largest = std::max<int64_t>(largest, static_cast<int64_t>(p.ops[k].out_h) * p.ops[k].out_w);
  return largest;
}

template <typename In, typename Out>
void augment_cpu_frames(const PipelineDesc& p, const AugmentBuffers<In, Out>& buf) {
  const FrameBatch work = frame_batch(p, buf);
  const int64_t stage_plane = largest_stage_plane(p);

  at::parallel_for(0, work.units, 1, [&](int64_t begin, int64_t end) {
    std::vector<In> stages[2];
    for (auto& stage : stages) stage.resize(static_cast<size_t>(work.frame_channels * stage_plane));
    std::vector<AxisTrace> rows, cols;
    OpDraw draws[kMaxOps];
    std::vector<float> weights(static_cast<size_t>(kMaxOps) * kConvWeights);
    int64_t weights_sample = -1;
    for (int64_t unit = begin; unit < end; ++unit) {
      const uint32_t sample = static_cast<uint32_t>(unit / work.stack);
      const uint32_t frame = static_cast<uint32_t>(unit % work.stack);
      const int64_t first_plane = static_cast<int64_t>(sample) * buf.channels +
                                  static_cast<int64_t>(frame) * work.frame_channels;
      draw_pipeline(p, counter_sample(buf, sample), frame, draws);
      if (weights_sample != sample) {  // the same weights for every frame of a sample
        for (int k = 0; k < p.n_ops; ++k)
          if (p.ops[k].kind == OpKind::kRandomConv)
            draw_conv_weights(p, p.ops[k], counter_sample(buf, sample),
                              weights.data() + k * kConvWeights);
        weights_sample = sample;
      }
      FrameView<In> src{input_plane(p, buf, first_plane), work.in_plane, p.in_h, p.in_w};
      if (work.in_place && p.n_segments == 1) {  // the only segment writes what it reads
        std::memcpy(stages[1].data(), src.base, sizeof(In) * work.frame_channels * work.in_plane);
        src.base = stages[1].data();
      }
      for (int i = 0; i < p.n_segments; ++i) {
        const Segment s = segment_of(p, i);
        const OpDesc& first = p.ops[s.first];
        float mean0 = 0.0f;
        if (first.kind == OpKind::kColorJitter && first.jitter_on[kContrast] &&
            draws[s.first].gate) {
          int64_t sum = 0;
          for (int64_t j = 0; j < static_cast<int64_t>(src.h) * src.w; ++j)
            sum += gray_fixed_at(src, j);
          mean0 = mean_of_sum(sum, src.h, src.w);
        }
        rows.resize(s.out_h);
        cols.resize(s.out_w);
        for (int32_t y = 0; y < s.out_h; ++y) rows[y] = trace_range(p, draws, 0, y, s.first, s.end);
        for (int32_t x = 0; x < s.out_w; ++x) cols[x] = trace_range(p, draws, 1, x, s.first, s.end);
        const bool last = i + 1 == p.n_segments;
        In* stage = stages[i % 2].data();
        const int64_t plane = static_cast<int64_t>(s.out_h) * s.out_w;
        const int32_t group = s.mixes ? kMaxMixedChannels : 1;
        const float* conv = weights.data() + s.first * kConvWeights;
        for (int32_t c0 = 0; c0 < work.frame_channels; c0 += group) {
          for (int32_t y = 0; y < s.out_h; ++y) {
            for (int32_t x = 0; x < s.out_w; ++x) {
              In v[kMaxMixedChannels];
              eval_frame_pixel(p, draws, s, rows[y], cols[x], src, conv, mean0, buf.pool, c0, group,
                               v);
              const int64_t at = static_cast<int64_t>(y) * s.out_w + x;
              for (int c = 0; c < group; ++c) {
                if (!last) {
                  stage[(c0 + c) * plane + at] = v[c];
                } else {
                  Out* out = buf.out + (first_plane + c0 + c) * work.out_plane + at;
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
