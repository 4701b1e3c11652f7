// Tensor-level part of the ops: argument checks, layout, output allocation,
// and the hand-off to the CPU loops or the CUDA launchers.
#include "kernels/augment.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/util/Exception.h>

#include <algorithm>

#include "kernels/augment_cpu.h"
#include "kernels/input_checks.h"
#include "kernels/output_tensor.h"
#include "kernels/tensor_text.h"

#ifdef OBSAUG_WITH_CUDA
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "kernels/augment_cuda.h"
#endif

namespace obsaug::ops {
namespace {

// Frame geometry of a batch with `channels` = S*C channels of height x width
// and, when given, the pool's C; its sizes too when the pipeline draws from
// it (its dtype, rank and device were checked before: kernels/input_checks.h).
FrameGeometry geometry_of(int64_t channels, int64_t height, int64_t width, const at::Tensor* pool,
                          bool draws_from_pool) {
  FrameGeometry g;
  g.height = height;
  g.width = width;
  g.channels = channels;
  if (pool == nullptr) return g;
  const int64_t c = pool->size(1);
  TORCH_CHECK_VALUE(c >= 1 && channels % c == 0, "obs channels (", channels,
                    ") must be a multiple of the pool's channels C = ", c,
                    " (obs is [B, S*C, H, W] with S stacked frames of C channels)");
  g.frame_channels = c;
  g.channels_source = "the pool's channels";
  if (!draws_from_pool) return g;
  TORCH_CHECK_VALUE(pool->size(0) >= 1, "pool is empty (P = 0); it needs P >= 1 images, got ",
                    describe(*pool));
  g.pool_size = pool->size(0);
  g.pool_h = pool->size(2);
  g.pool_w = pool->size(3);
  return g;
}

template <typename In, typename Out>
void run(const PipelineDesc& desc, const at::Tensor& in, const at::Tensor& out,
         const at::Tensor* pool, const OutputOptions& output, const at::Tensor* frame_index,
         const at::Tensor* sample_id, const at::Tensor* out_row) {
  AugmentBuffers<In, Out> buffers{in.data_ptr<In>(),
                                  out.data_ptr<Out>(),
                                  pool ? pool->data_ptr<uint8_t>() : nullptr,
                                  out_row ? out_row->size(0) : out.size(0),
                                  out.size(1),
                                  static_cast<float>(output.scale),
                                  static_cast<float>(output.bias),
                                  frame_index ? frame_index->data_ptr<int64_t>() : nullptr};
  if (sample_id != nullptr) buffers.sample_id = sample_id->data_ptr<int64_t>();
  if (out_row != nullptr) buffers.out_row = out_row->data_ptr<int64_t>();
  if (in.device().is_cpu()) {
    augment_cpu(desc, buffers);
    return;
  }
#ifdef OBSAUG_WITH_CUDA
  const c10::cuda::CUDAGuard guard(in.device());
  const int device = in.device().index();
  int sm_count = 0;  // an attribute query: no synchronisation, microseconds
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device).stream();
  // Staging for the per-frame path, from PyTorch's allocator (stream-ordered,
  // so it is safe to drop when this call returns, and graph-capturable).
  const bool in_place = in.data_ptr() == out.data_ptr();
  const int64_t units = buffers.batch * (buffers.channels / desc.frame_channels);
  const int64_t scratch_bytes =
      cuda_scratch_bytes(desc, units, in_place, static_cast<int64_t>(sizeof(In)), sm_count);
  at::Tensor scratch;
  if (scratch_bytes > 0) {
    scratch = at::empty({scratch_bytes}, in.options().dtype(at::kByte));
    buffers.scratch = scratch.data_ptr();
  }
  C10_CUDA_CHECK(static_cast<cudaError_t>(augment_cuda(desc, buffers, stream, sm_count)));
#else
  TORCH_CHECK(false, "obs is on ", in.device(),
              " but this obsaug build has no CUDA kernels (rebuild with nvcc on the PATH)");
#endif
}

// Writes the pipeline's result for contiguous `in` into contiguous `out`
// (which may be `in` itself when the pipeline keeps the frame size). With
// `frame_index` ([B, S] int64), `in` is a frame storage to gather from.
void dispatch(const PipelineDesc& desc, const at::Tensor& in, const at::Tensor& out,
              const at::Tensor* pool, const OutputOptions& output,
              const at::Tensor* frame_index = nullptr, const at::Tensor* sample_id = nullptr,
              const at::Tensor* out_row = nullptr) {
  if (out.numel() == 0) return;
  if (in.scalar_type() == at::kByte && out.scalar_type() == at::kByte) {
    run<uint8_t, uint8_t>(desc, in, out, pool, output, frame_index, sample_id, out_row);
  } else if (in.scalar_type() == at::kByte) {
    run<uint8_t, float>(desc, in, out, pool, output, frame_index, sample_id, out_row);
  } else {
    run<float, float>(desc, in, out, pool, output, frame_index, sample_id, out_row);
  }
}

// obs and pool as check_augment_inputs has checked them: the pipeline
// resolved for obs's frames (its step still 0, set once every check has
// passed: Step).
PipelineDesc resolved(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
                      const Pipeline& pipeline, uint64_t seed, int64_t frame_channels) {
  // C, what the ops that mix channels and cutout's per-channel colour see
  // (resolve_pipeline says when C does not suit an op): the caller's, else
  // the pool's (given, even to a pipeline that does not overlay), else RGB
  // (C = 3) when S*C is a multiple of 3 and single channels (Atari) when not.
  const bool pool_given = pool.has_value() && pool->defined();
  FrameGeometry g = geometry_of(obs.size(1), obs.size(2), obs.size(3),
                                pool_given ? &*pool : nullptr, has_overlay(pipeline));
  if (frame_channels > 0) {
    TORCH_CHECK_VALUE(obs.size(1) % frame_channels == 0, "obs channels (", obs.size(1),
                      ") must be a multiple of the frame channels C = ", frame_channels,
                      " (obs is [B, S*C, H, W] with S stacked frames of C channels)");
    TORCH_CHECK_VALUE(!pool_given || g.frame_channels == frame_channels,
                      "the pool has C = ", g.frame_channels,
                      " channels per image but frame_channels is ", frame_channels);
    g.frame_channels = frame_channels;
    g.channels_source = kFrameChannelsSource;
  } else if (!pool_given && obs.size(1) % 3 == 0) {
    g.frame_channels = 3;
  }
  return resolve_pipeline(pipeline, g, seed, /*step=*/0);
}

// The pool a pipeline that overlays draws from, contiguous; else none.
std::optional<at::Tensor> drawn_pool(const std::optional<at::Tensor>& pool,
                                     const Pipeline& pipeline) {
  if (!has_overlay(pipeline)) return std::nullopt;
  return pool->contiguous();
}

void check_index_layout(const at::Tensor& storage, const at::Tensor& indices) {
  TORCH_CHECK_VALUE(indices.defined(), "indices must be an int64 tensor [B, S], got None");
  TORCH_CHECK_TYPE(indices.scalar_type() == at::kLong,
                   "indices must be int64 [B, S] (S stacked frames per sample), got ",
                   describe(indices));
  TORCH_CHECK_VALUE(indices.dim() == 2,
                    "indices must be int64 [B, S] (S stacked frames per sample), got ",
                    describe(indices));
  TORCH_CHECK_VALUE(indices.device() == storage.device(), "indices must be on storage's device ",
                    storage.device(), ", got ", indices.device());
  TORCH_CHECK_VALUE(indices.size(1) >= 1 || indices.size(0) == 0,
                    "indices must have at least one frame per sample (S >= 1), got ",
                    describe(indices));
}

// The layout of gather_augment's sample_ids: int64 [B] on storage's device.
void check_sample_ids_layout(const at::Tensor& storage, const at::Tensor& sample_ids,
                             int64_t batch) {
  TORCH_CHECK_TYPE(sample_ids.scalar_type() == at::kLong,
                   "sample_ids must be int64 [B] (one counter word per sample), got ",
                   describe(sample_ids));
  TORCH_CHECK_VALUE(sample_ids.dim() == 1 && sample_ids.size(0) == batch,
                    "sample_ids must be int64 [B] with B = ", batch,
                    " (one per row of indices), got ", describe(sample_ids));
  TORCH_CHECK_VALUE(sample_ids.device() == storage.device(),
                    "sample_ids must be on storage's device ", storage.device(), ", got ",
                    sample_ids.device());
}

// sample_ids, laid out as check_sample_ids_layout checked, with each value
// < 2^32 (the counter's b word); returned contiguous.
at::Tensor checked_sample_ids(const at::Tensor& sample_ids) {
  const at::Tensor ids = sample_ids.contiguous();
  const int64_t batch = ids.numel();
  if (batch == 0) return ids;
  int64_t lo = 0;
  int64_t hi = 0;
  if (ids.device().is_cpu()) {
    const int64_t* v = ids.data_ptr<int64_t>();
    lo = *std::min_element(v, v + batch);
    hi = *std::max_element(v, v + batch);
  } else {  // one synchronisation, as for indices
    lo = ids.min().item<int64_t>();
    hi = ids.max().item<int64_t>();
  }
  TORCH_CHECK_VALUE(lo >= 0 && hi < (int64_t{1} << 32),
                    "sample_ids must lie in [0, 2^32) (the Philox counter's sample word), got "
                    "values in [",
                    lo, ", ", hi, "]");
  return ids;
}

// out_rows of gather_augment: int64 [B] on the CPU, each a row of `out`
// (defined, on the CPU, as checked_gather's check of out); returned contiguous.
at::Tensor checked_out_rows(const at::Tensor& out_rows, const at::Tensor& out, int64_t batch) {
  TORCH_CHECK_TYPE(out_rows.scalar_type() == at::kLong && out_rows.device().is_cpu(),
                   "out_rows must be int64 [B] on the CPU, got ", describe(out_rows));
  TORCH_CHECK_VALUE(out_rows.dim() == 1 && out_rows.size(0) == batch,
                    "out_rows must be int64 [B] with B = ", batch,
                    " (one per row of indices), got ", describe(out_rows));
  const at::Tensor rows = out_rows.contiguous();
  const int64_t* v = rows.data_ptr<int64_t>();
  const int64_t limit = out.size(0);
  for (int64_t b = 0; b < batch; ++b) {
    TORCH_CHECK_INDEX(v[b] >= 0 && v[b] < limit, "out_rows[", b, "] = ", v[b],
                      " is not a row of out [0, ", limit, ")");
  }
  return rows;
}

// What a call has checked before it reads an element: its pipeline resolved
// (step still 0), the result's dtype and shape.
struct CheckedCall {
  PipelineDesc desc;
  at::ScalarType dtype = at::kByte;
  std::vector<int64_t> shape;
};

// augment's checks, in order: inputs, the pipeline against obs's frames, out.
CheckedCall checked_augment(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
                            const Pipeline& pipeline, uint64_t seed, const OutputOptions& output,
                            int64_t frame_channels, Devices devices) {
  check_augment_inputs(obs, pool, pipeline, output, devices, frame_channels);
  CheckedCall call{
      resolved(obs, pool, pipeline, seed, frame_channels), output_dtype(obs, output), {}};
  call.shape = {obs.size(0), obs.size(1), call.desc.out_h, call.desc.out_w};
  if (output.out.defined()) {
    check_out(output.out, call.shape, obs.options().dtype(call.dtype),
              {{"obs", &obs}, {"pool", pool ? &*pool : nullptr}}, "(inplace=True, augment_)");
  }
  return call;
}

// augment_'s checks: augment's inputs and pipeline, then what writing obs
// in place needs.
PipelineDesc checked_augment_inplace(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
                                     const Pipeline& pipeline, uint64_t seed,
                                     int64_t frame_channels, Devices devices) {
  check_augment_inputs(obs, pool, pipeline, {}, devices, frame_channels);
  PipelineDesc desc = resolved(obs, pool, pipeline, seed, frame_channels);
  // An expand()ed obs can stand for far more memory than it holds, and
  // writing it in place has no single right answer.
  TORCH_CHECK_VALUE(at::has_internal_overlap(obs) != at::MemOverlap::Yes,
                    "in-place augment needs obs whose elements do not share memory, got ",
                    describe(obs), " with strides ", obs.strides(),
                    " (e.g. an expand()ed tensor); pass obs.clone() or use the out-of-place form");
  TORCH_CHECK_VALUE(desc.out_h == obs.size(2) && desc.out_w == obs.size(3),
                    "in-place augment needs a pipeline that keeps the frame size ", obs.size(2),
                    "x", obs.size(3), ", but it produces ", desc.out_h, "x", desc.out_w,
                    "; use the out-of-place form for crops");
  return desc;
}

// gather_augment's checks of everything but the values of indices,
// sample_ids and out_rows (`scattered`: out_rows given).
CheckedCall checked_gather(const at::Tensor& storage, const at::Tensor& indices,
                           const std::optional<at::Tensor>& pool, const Pipeline& pipeline,
                           uint64_t seed, const OutputOptions& output,
                           const std::optional<at::Tensor>& sample_ids, bool scattered,
                           Devices devices) {
  check_gather_inputs(storage, pool, pipeline, output, devices);
  check_index_layout(storage, indices);
  if (sample_ids.has_value() && sample_ids->defined()) {
    check_sample_ids_layout(storage, *sample_ids, indices.size(0));
  }
  const int64_t channels = storage.size(1);
  TORCH_CHECK_VALUE(channels >= 1, "storage frames need at least one channel, got ",
                    describe(storage));
  const bool draws = has_overlay(pipeline);
  if (draws) {
    TORCH_CHECK_VALUE(pool->size(1) == channels, "pool has ", pool->size(1),
                      " channels but storage frames have ", channels, "; they must match");
  }
  // S*C as augment sees it after the gather (resolve_pipeline bounds S)
  FrameGeometry g = geometry_of(indices.size(1) * channels, storage.size(2), storage.size(3),
                                draws ? &*pool : nullptr, /*draws_from_pool=*/true);
  g.frame_channels = channels;
  g.channels_source = "the storage's channels";
  CheckedCall call{
      resolve_pipeline(pipeline, g, seed, /*step=*/0), output_dtype(storage, output), {}};
  if (scattered) {
    TORCH_CHECK_VALUE(output.out.defined() && output.out.dim() >= 1 && output.out.device().is_cpu(),
                      "out_rows needs out, a CPU tensor whose rows it names");
  }
  call.shape = {scattered ? output.out.size(0) : indices.size(0), indices.size(1) * channels,
                call.desc.out_h, call.desc.out_w};
  if (output.out.defined()) {
    check_out(output.out, call.shape, storage.options().dtype(call.dtype),
              {{"storage", &storage}, {"indices", &indices}, {"pool", pool ? &*pool : nullptr}},
              nullptr);
  }
  return call;
}

}  // namespace

void check_gather_indices(const at::Tensor& storage, const at::Tensor& indices) {
  check_index_layout(storage, indices);
  if (indices.numel() == 0) return;
  int64_t lo = 0;
  int64_t hi = 0;
  if (indices.device().is_cpu()) {
    const at::Tensor index = indices.contiguous();
    const int64_t* v = index.data_ptr<int64_t>();
    lo = *std::min_element(v, v + index.numel());
    hi = *std::max_element(v, v + index.numel());
  } else {  // one synchronisation: the kernel must never read outside storage
    lo = indices.min().item<int64_t>();
    hi = indices.max().item<int64_t>();
  }
  const int64_t frames = storage.size(0);
  TORCH_CHECK_INDEX(lo >= 0 && hi < frames, "indices must lie in [0, N) = [0, ", frames,
                    ") for storage ", describe(storage), ", got values in [", lo, ", ", hi, "]");
}

std::vector<int64_t> output_shape(const at::Tensor& obs, const Pipeline& pipeline) {
  check_obs(obs);
  const FrameSize out = frame_sizes(pipeline, {obs.size(2), obs.size(3)}).back();
  return {obs.size(0), obs.size(1), out.height, out.width};
}

std::vector<int64_t> check_augment_call(const at::Tensor& obs,
                                        const std::optional<at::Tensor>& pool,
                                        const Pipeline& pipeline, const OutputOptions& output,
                                        Devices devices, int64_t frame_channels) {
  return checked_augment(obs, pool, pipeline, /*seed=*/0, output, frame_channels, devices).shape;
}

void check_augment_inplace_call(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
                                const Pipeline& pipeline, Devices devices, int64_t frame_channels) {
  checked_augment_inplace(obs, pool, pipeline, /*seed=*/0, frame_channels, devices);
}

std::vector<int64_t> check_gather_call(const at::Tensor& storage, const at::Tensor& indices,
                                       const std::optional<at::Tensor>& pool,
                                       const Pipeline& pipeline, const OutputOptions& output,
                                       const std::optional<at::Tensor>& sample_ids,
                                       Devices devices) {
  return checked_gather(storage, indices, pool, pipeline, /*seed=*/0, output, sample_ids,
                        /*scattered=*/false, devices)
      .shape;
}

at::Tensor augment(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
                   const Pipeline& pipeline, uint64_t seed, const Step& step,
                   const OutputOptions& output, int64_t frame_channels) {
  CheckedCall call =
      checked_augment(obs, pool, pipeline, seed, output, frame_channels, Devices::kCpuOrCuda);
  const at::Tensor out =
      output.out.defined() ? output.out : fresh_output(call.shape, obs.options().dtype(call.dtype));
  call.desc.step = step.take();  // before the pool is read: taking it may refresh the pool
  const std::optional<at::Tensor> drawn = drawn_pool(pool, pipeline);
  dispatch(call.desc, obs.contiguous(), out, drawn ? &*drawn : nullptr, output);
  return out;
}

void augment_(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
              const Pipeline& pipeline, uint64_t seed, const Step& step, int64_t frame_channels) {
  PipelineDesc desc =
      checked_augment_inplace(obs, pool, pipeline, seed, frame_channels, Devices::kCpuOrCuda);
  desc.step = step.take();  // before the pool is read: taking it may refresh the pool
  std::optional<at::Tensor> drawn = drawn_pool(pool, pipeline);
  // A pool that shares memory with a contiguous obs (written directly) would
  // be read while obs is written: blend from a copy so the result equals the
  // out-of-place one. (Non-contiguous obs is computed from a copy anyway.)
  if (drawn && obs.is_contiguous() && obs.numel() > 0 &&
      at::get_overlap_status(obs, *drawn) != at::MemOverlapStatus::No) {
    drawn = drawn->clone();
  }
  const at::Tensor* pool_ptr = drawn ? &*drawn : nullptr;
  bool staged_in_place = obs.is_contiguous() && obs.device().is_cpu();
#ifdef OBSAUG_WITH_CUDA
  if (obs.is_contiguous() && obs.device().is_cuda()) {
    staged_in_place = cuda_can_stage(desc, obs.size(2) * obs.size(3) * obs.element_size());
  }
#endif
  if (staged_in_place) {
    dispatch(desc, obs, obs, pool_ptr, {});
    return;
  }
  // Non-contiguous obs, or CUDA planes too large to stage: compute from a copy.
  const at::Tensor source = obs.is_contiguous() ? obs.clone() : obs.contiguous();
  if (obs.is_contiguous()) {
    dispatch(desc, source, obs, pool_ptr, {});
  } else {
    at::Tensor result = at::empty_like(source);
    dispatch(desc, source, result, pool_ptr, {});
    obs.copy_(result);
  }
}

at::Tensor gather_augment(const at::Tensor& storage, const at::Tensor& indices,
                          const std::optional<at::Tensor>& pool, const Pipeline& pipeline,
                          uint64_t seed, const Step& step, const OutputOptions& output,
                          bool check_indices, const std::optional<at::Tensor>& sample_ids,
                          const std::optional<at::Tensor>& out_rows) {
  const bool scattered = out_rows.has_value() && out_rows->defined();
  CheckedCall call = checked_gather(storage, indices, pool, pipeline, seed, output, sample_ids,
                                    scattered, Devices::kCpuOrCuda);
  if (!indices.is_contiguous()) {  // an expand()ed one stands for more than it holds
    const uint64_t copy = result_bytes(indices.sizes(), indices.options());
    const uint64_t result =
        output.out.defined() ? 0 : result_bytes(call.shape, storage.options().dtype(call.dtype));
    check_call_memory("a contiguous copy of indices " + describe(indices) + " and the result",
                      copy > UINT64_MAX - result ? UINT64_MAX : copy + result, storage.device());
  }
  if (check_indices) check_gather_indices(storage, indices);
  std::optional<at::Tensor> ids;
  if (sample_ids.has_value() && sample_ids->defined()) ids = checked_sample_ids(*sample_ids);
  at::Tensor rows;
  if (scattered) rows = checked_out_rows(*out_rows, output.out, indices.size(0));
  const at::Tensor out = output.out.defined()
                             ? output.out
                             : fresh_output(call.shape, storage.options().dtype(call.dtype));
  call.desc.step = step.take();  // before the pool is read: taking it may refresh the pool
  const std::optional<at::Tensor> drawn = drawn_pool(pool, pipeline);
  if (out.numel() == 0 || indices.size(0) == 0) return out;
  const at::Tensor index = indices.contiguous();
  dispatch(call.desc, storage.contiguous(), out, drawn ? &*drawn : nullptr, output, &index,
           ids ? &*ids : nullptr, scattered ? &rows : nullptr);
  return out;
}

at::Tensor shift(const at::Tensor& obs, uint64_t seed, uint64_t step, int64_t pad,
                 const std::string& padding, int64_t op_index, const at::Tensor& out) {
  return augment(obs, std::nullopt, {OpSpec::shift(pad, padding).at_index(op_index)}, seed, step,
                 {std::nullopt, 1.0, 0.0, out});
}

at::Tensor crop(const at::Tensor& obs, uint64_t seed, uint64_t step, int64_t height, int64_t width,
                bool center, int64_t op_index, const at::Tensor& out) {
  return augment(obs, std::nullopt, {OpSpec::crop(height, width, center).at_index(op_index)}, seed,
                 step, {std::nullopt, 1.0, 0.0, out});
}

at::Tensor overlay(const at::Tensor& obs, const at::Tensor& pool, uint64_t seed, uint64_t step,
                   double alpha, std::optional<double> alpha_max, bool per_frame, int64_t op_index,
                   const at::Tensor& out, bool distinct) {
  return augment(obs, pool,
                 {OpSpec::overlay(alpha, alpha_max, per_frame, distinct).at_index(op_index)}, seed,
                 step, {std::nullopt, 1.0, 0.0, out});
}

}  // namespace obsaug::ops
