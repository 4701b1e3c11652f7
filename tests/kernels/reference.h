// The per-pixel reference of the kernel tests: every output pixel evaluated on
// its own from kernels/pipeline.h (draws of (sample, frame), row and column
// traces, eval_pixel, output conversion), as the CUDA kernel's fallback path
// does, independent of the CPU row loops. Valid for pipelines of shift, crop
// and overlay (the per-plane path, kernels/pipeline.h); a quarter turn and
// the rest of the second family are evaluated per frame (kernels/frame_eval.h).
#pragma once

#include <ATen/ops/empty.h>

#include <optional>

#include "kernels/augment.h"
#include "kernels/pipeline.h"
#include "kernels/pipeline_spec.h"

namespace obsaug::testing {

inline FrameGeometry geometry_of(const at::Tensor& obs, const at::Tensor* pool) {
  FrameGeometry g;
  g.height = obs.size(2);
  g.width = obs.size(3);
  if (pool) {
    g.frame_channels = pool->size(1);
    g.pool_size = pool->size(0);
    g.pool_h = pool->size(2);
    g.pool_w = pool->size(3);
  }
  return g;
}

// Every output pixel evaluated on its own, as the CUDA kernel's fallback path
// does: draws of (sample, frame), the row and column traces, eval_pixel, and
// the output conversion.
template <typename In, typename Out>
void reference_loop(const PipelineDesc& p, const In* in, const uint8_t* pool, Out* out,
                    int64_t batch, int64_t channels, float scale, float bias) {
  const int64_t in_plane = static_cast<int64_t>(p.in_h) * p.in_w;
  const int64_t out_plane = static_cast<int64_t>(p.out_h) * p.out_w;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t ch = 0; ch < channels; ++ch) {
      OpDraw draws[kMaxOps];
      draw_pipeline(p, static_cast<uint32_t>(b), static_cast<uint32_t>(ch / p.frame_channels),
                    draws);
      const int32_t channel_in_frame = static_cast<int32_t>(ch % p.frame_channels);
      const int64_t plane = b * channels + ch;
      for (int32_t y = 0; y < p.out_h; ++y) {
        for (int32_t x = 0; x < p.out_w; ++x) {
          const AxisTrace row = trace_axis(p, draws, 0, y);
          const AxisTrace col = trace_axis(p, draws, 1, x);
          const In v =
              eval_pixel(p, draws, row, col, in + plane * in_plane, pool, channel_in_frame);
          out[plane * out_plane + static_cast<int64_t>(y) * p.out_w + x] =
              to_output(v, scale, bias, static_cast<Out*>(nullptr));
        }
      }
    }
  }
}

inline at::Tensor reference(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
                            const Pipeline& pipeline, uint64_t seed, uint64_t step,
                            const ops::OutputOptions& output = {}) {
  std::optional<at::Tensor> pool_c;
  if (has_overlay(pipeline)) pool_c = pool->contiguous();
  const PipelineDesc p =
      resolve_pipeline(pipeline, geometry_of(obs, pool_c ? &*pool_c : nullptr), seed, step);
  const at::Tensor in = obs.contiguous();
  const at::ScalarType dtype = output.dtype.value_or(obs.scalar_type());
  at::Tensor out = at::empty({obs.size(0), obs.size(1), p.out_h, p.out_w}, dtype);
  const uint8_t* pool_ptr = pool_c ? pool_c->data_ptr<uint8_t>() : nullptr;
  const float scale = static_cast<float>(output.scale);
  const float bias = static_cast<float>(output.bias);
  const int64_t b = obs.size(0), c = obs.size(1);
  if (obs.scalar_type() == at::kByte && dtype == at::kByte) {
    reference_loop(p, in.data_ptr<uint8_t>(), pool_ptr, out.data_ptr<uint8_t>(), b, c, scale, bias);
  } else if (obs.scalar_type() == at::kByte) {
    reference_loop(p, in.data_ptr<uint8_t>(), pool_ptr, out.data_ptr<float>(), b, c, scale, bias);
  } else {
    reference_loop(p, in.data_ptr<float>(), pool_ptr, out.data_ptr<float>(), b, c, scale, bias);
  }
  return out;
}

}  // namespace obsaug::testing
