// CPU backend: the fused pipeline over raw contiguous buffers.
#pragma once

#include <cstdint>

#include "kernels/pipeline.h"

namespace obsaug {

// Views of one augment call's buffers, all contiguous. `out` may equal `in`
// (in place; then out_h == in_h and out_w == in_w and In == Out). Sample b of
// the batch draws its parameters with counter word b (DESIGN.md section 3).
template <typename In, typename Out>
struct AugmentBuffers {
  const In* in;         // [batch, channels, in_h, in_w]
  Out* out;             // [batch, channels, out_h, out_w]
  const uint8_t* pool;  // [P, C, pool_h, pool_w] or null without overlay
  int64_t batch;
  int64_t channels;  // S * C
  float scale;       // float output: out = v * scale + bias
  float bias;
};

// v[i] = blend(v[i], d[i], weight) for i < n, with the CPU's widest exact
// implementation (AVX2 when available). Exposed so tests can check it
// exhaustively against blend() in pipeline.h.
void blend_bytes(uint8_t* v, const uint8_t* d, int64_t n, uint32_t weight);

// Runs `p` on every plane, multi-threaded with at::parallel_for.
template <typename In, typename Out>
void augment_cpu(const PipelineDesc& p, const AugmentBuffers<In, Out>& buffers);

}  // namespace obsaug
