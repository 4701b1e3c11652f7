// CPU backend: the fused pipeline over raw contiguous buffers.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/pipeline.h"

namespace obsaug {

// Views of one augment call's buffers, all contiguous. `out` may equal `in`
// (in place; then out_h == in_h and out_w == in_w and In == Out). Sample b of
// the batch draws its parameters with counter word b (DESIGN.md section 3).
//
// Gathering (frame_index given): `in` is a frame storage [N, C, in_h, in_w]
// and stacked frame s of sample b is storage frame frame_index[b * S + s],
// S = channels / C; the output is the same as augmenting the stacked batch
// gathered first (never in place).
template <typename In, typename Out>
struct AugmentBuffers {
  const In* in;         // [batch, channels, in_h, in_w], or the storage when gathering
  Out* out;             // [batch, channels, out_h, out_w]
  const uint8_t* pool;  // [P, C, pool_h, pool_w] or null without overlay
  int64_t batch;
  int64_t channels;  // S * C
  float scale;       // float output: out = v * scale + bias
  float bias;
  const int64_t* frame_index = nullptr;  // [batch, S] storage frames, or null
  void* scratch = nullptr;  // CUDA per-frame path: cuda_scratch_bytes() of device memory
  // [batch] counter words, each < 2^32, or null: output row b then draws as
  // sample sample_id[b] (another rank's draws, obsaug.distributed).
  const int64_t* sample_id = nullptr;
  // [batch] output rows, or null: sample b is then written to row out_row[b]
  // of `out` (CPU only; the requester's draw positions, obsaug.distributed).
  const int64_t* out_row = nullptr;
};

// The counter word b (DESIGN.md section 3) of output row `row`.
template <typename In, typename Out>
OBSAUG_HD uint32_t counter_sample(const AugmentBuffers<In, Out>& buf, int64_t row) {
  return static_cast<uint32_t>(buf.sample_id == nullptr ? row : buf.sample_id[row]);
}

// The first output plane of channel `channel` of sample `sample`.
template <typename In, typename Out>
OBSAUG_HD int64_t output_plane(const AugmentBuffers<In, Out>& buf, int64_t sample,
                               int64_t channel) {
  return (buf.out_row == nullptr ? sample : buf.out_row[sample]) * buf.channels + channel;
}

// The input plane `plane` (= sample * channels + channel) reads, contiguous
// in_h x in_w.
template <typename In, typename Out>
OBSAUG_HD const In* input_plane(const PipelineDesc& p, const AugmentBuffers<In, Out>& buf,
                                int64_t plane) {
  const int64_t plane_size = static_cast<int64_t>(p.in_h) * p.in_w;
  if (buf.frame_index == nullptr) return buf.in + plane * plane_size;
  const int64_t sample = plane / buf.channels;
  const int64_t channel = plane % buf.channels;
  const int64_t stack = buf.channels / p.frame_channels;
  const int64_t frame = buf.frame_index[sample * stack + channel / p.frame_channels];
  return buf.in + (frame * p.frame_channels + channel % p.frame_channels) * plane_size;
}

// One call's work in stacked frames, for the per-frame path (CPU and CUDA).
struct FrameBatch {
  int64_t frame_channels;  // C
  int64_t stack;           // S
  int64_t units;           // B * S stacked frames
  int64_t in_plane;        // pixels of an input plane
  int64_t out_plane;       // pixels of an output plane
  bool in_place;
  bool direct;  // same dtype without an affine: store the value itself
};

template <typename In, typename Out>
OBSAUG_HD FrameBatch frame_batch(const PipelineDesc& p, const AugmentBuffers<In, Out>& buf) {
  FrameBatch f;
  f.frame_channels = p.frame_channels;
  f.stack = buf.channels / f.frame_channels;
  f.units = buf.batch * f.stack;
  f.in_plane = static_cast<int64_t>(p.in_h) * p.in_w;
  f.out_plane = static_cast<int64_t>(p.out_h) * p.out_w;
  f.in_place = static_cast<const void*>(buf.in) == static_cast<const void*>(buf.out);
  f.direct = std::is_same<In, Out>::value && buf.scale == 1.0f && buf.bias == 0.0f;
  return f;
}

// The traces of coordinates 0..n-1 on one axis as arrays, what the CPU's
// per-sample geometry reads: source[i] and zero_op[i] as in AxisTrace, and
// at_op[k][i] for the ops of the pipeline (0 for ops below zero_op[i]).
struct AxisTraces {
  std::vector<int32_t> source;
  std::vector<int32_t> zero_op;
  std::vector<int32_t> at_op[kMaxOps];
  uint8_t swapped_ops = 0;      // bit k: at_op[k] lies on the other axis (for every i)
  bool source_swapped = false;  // source lies on the other axis (where not zeroed)
};

// The traces of a whole axis at once, op by op.
void trace_axis_all(const PipelineDesc& p, const OpDraw* draws, int axis, int32_t n,
                    AxisTraces* traces);

// traces[i] = trace_axis(p, draws, axis, i) for every i < n, from the arrays
// above (the tests compare it with trace_axis field by field).
void trace_axis_all(const PipelineDesc& p, const OpDraw* draws, int axis, int32_t n,
                    AxisTrace* traces);

// The CPU ops' hand-written loops come in sets that write the same bits:
// baseline (any x86-64), AVX2 (row gathers, the blend, grayscale, rotate's
// transposes, the streamed float32 conversion) and AVX-512 (the blend, on
// the F and BW parts; the rest stays AVX2). The widest set the CPU has runs,
// capped by the environment variable OBSAUG_CPU_LOOPS, read once when the
// library loads: baseline, avx2 or avx512 (unset or empty: no cap), so that
// tests can run the ops with a narrower set than the host's (and a user can
// keep 512-bit multiplies off a CPU whose clock they lower). The compiler's
// AVX2 clones (kernels/cpu_clones.h) follow the CPU alone.
enum class CpuLoops { kBaseline, kAvx2, kAvx512 };
CpuLoops cpu_loops();                        // the set that runs
CpuLoops widest_cpu_loops();                 // the widest set this CPU has, whatever the setting
const char* cpu_loops_name(CpuLoops loops);  // "baseline", "avx2", "avx512"

// "" when OBSAUG_CPU_LOOPS is unset, empty or one of the names above; else what
// is wrong with it and what would be right (the CPU ops refuse to run:
// kernels/input_checks.h).
std::string cpu_loops_setting_problem();

// v[i] = blend(v[i], d[i], weight) for i < n with the set `loops` (the CPU
// must have it, whatever the setting: c10::Error otherwise), as the ops run
// it. Exposed so tests can check each set exhaustively against blend() in
// pipeline.h.
void blend_bytes(uint8_t* v, const uint8_t* d, int64_t n, uint32_t weight, CpuLoops loops);

// r[i] = g[i] = b[i] = grayscale_value(r[i], g[i], b[i]) for i < n, as the
// ops run it (AVX2 with the AVX2 or AVX-512 set); exposed for the same
// exhaustive check.
void gray_bytes(uint8_t* r, uint8_t* g, uint8_t* b, int64_t n);

// Runs `p` on every plane, multi-threaded with at::parallel_for: pipelines
// with a barrier (random_conv, color_jitter with contrast) through
// augment_cpu_frames.
template <typename In, typename Out>
void augment_cpu(const PipelineDesc& p, const AugmentBuffers<In, Out>& buffers);

// The per-frame path (kernels/frame_eval.h), for pipelines with a barrier.
template <typename In, typename Out>
void augment_cpu_frames(const PipelineDesc& p, const AugmentBuffers<In, Out>& buffers);

// The most pixels a plane has at any stage of `p` (the staging size).
int64_t largest_stage_plane(const PipelineDesc& p);

}  // namespace obsaug
