// Tensor-level part of the ops: argument checks, layout, output allocation,
// and the hand-off to the CPU loops or the CUDA launchers.
#include "kernels/augment.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <sstream>

#include "kernels/augment_cpu.h"

#ifdef OBSAUG_WITH_CUDA
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "kernels/augment_cuda.h"
#endif

namespace obsaug::ops {
namespace {

std::string describe(const at::Tensor& t) {
  std::ostringstream out;
  out << t.scalar_type() << " " << t.sizes() << " on " << t.device();
  return out.str();
}

void check_obs(const at::Tensor& obs) {
  TORCH_CHECK_VALUE(obs.defined(), "obs must be a tensor [B, S*C, H, W], got None");
  TORCH_CHECK_TYPE(
      (obs.scalar_type() == at::kByte || obs.scalar_type() == at::kFloat) && obs.dim() == 4,
      "obs must be uint8 or float32 (0..255) with 4 dims [B, S*C, H, W], got ", describe(obs));
  TORCH_CHECK_VALUE(obs.device().is_cpu() || obs.device().is_cuda(),
                    "obs must be on cpu or cuda, got ", obs.device());
}

FrameGeometry geometry_of(const at::Tensor& obs, const at::Tensor* pool) {
  FrameGeometry g;
  g.height = obs.size(2);
  g.width = obs.size(3);
  if (pool == nullptr) return g;
  TORCH_CHECK_TYPE(pool->scalar_type() == at::kByte && pool->dim() == 4,
                   "pool must be uint8 [P, C, H, W], got ", describe(*pool));
  TORCH_CHECK_VALUE(pool->device() == obs.device(), "pool must be on obs's device ", obs.device(),
                    ", got ", pool->device());
  const int64_t c = pool->size(1);
  TORCH_CHECK_VALUE(c >= 1 && obs.size(1) % c == 0, "obs channels (", obs.size(1),
                    ") must be a multiple of the pool's channels C = ", c,
                    " (obs is [B, S*C, H, W] with S stacked frames of C channels)");
  TORCH_CHECK_VALUE(pool->size(0) >= 1, "pool is empty (P = 0); it needs P >= 1 images, got ",
                    describe(*pool));
  g.frame_channels = c;
  g.pool_size = pool->size(0);
  g.pool_h = pool->size(2);
  g.pool_w = pool->size(3);
  return g;
}

at::ScalarType output_dtype(const at::Tensor& obs, const OutputOptions& output) {
  const at::ScalarType dtype = output.dtype.value_or(obs.scalar_type());
  TORCH_CHECK_TYPE(dtype == at::kByte || dtype == at::kFloat,
                   "out_dtype must be uint8 or float32, got ", dtype);
  TORCH_CHECK_VALUE(std::isfinite(output.scale) && std::isfinite(output.bias),
                    "scale and bias must be finite, got scale=", output.scale,
                    " bias=", output.bias);
  if (dtype == at::kByte) {
    TORCH_CHECK_TYPE(obs.scalar_type() == at::kByte,
                     "out_dtype uint8 needs uint8 obs (float32 obs gives float32 output), got ",
                     obs.scalar_type());
    TORCH_CHECK_VALUE(output.scale == 1.0 && output.bias == 0.0,
                      "scale and bias apply to float32 output only; pass out_dtype=float32 "
                      "(got uint8 with scale=",
                      output.scale, " bias=", output.bias, ")");
  }
  return dtype;
}

template <typename In, typename Out>
void run(const PipelineDesc& desc, const at::Tensor& in, const at::Tensor& out,
         const at::Tensor* pool, const OutputOptions& output) {
  const AugmentBuffers<In, Out> buffers{in.data_ptr<In>(),
                                        out.data_ptr<Out>(),
                                        pool ? pool->data_ptr<uint8_t>() : nullptr,
                                        in.size(0),
                                        in.size(1),
                                        static_cast<float>(output.scale),
                                        static_cast<float>(output.bias)};
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
  C10_CUDA_CHECK(static_cast<cudaError_t>(augment_cuda(desc, buffers, stream, sm_count)));
#else
  TORCH_CHECK(false, "obs is on ", in.device(),
              " but this obsaug build has no CUDA kernels (rebuild with nvcc on the PATH)");
#endif
}

// Writes the pipeline's result for contiguous `in` into contiguous `out`
// (which may be `in` itself when the pipeline keeps the frame size).
void dispatch(const PipelineDesc& desc, const at::Tensor& in, const at::Tensor& out,
              const at::Tensor* pool, const OutputOptions& output) {
  if (in.numel() == 0) return;
  if (in.scalar_type() == at::kByte && out.scalar_type() == at::kByte) {
    run<uint8_t, uint8_t>(desc, in, out, pool, output);
  } else if (in.scalar_type() == at::kByte) {
    run<uint8_t, float>(desc, in, out, pool, output);
  } else {
    run<float, float>(desc, in, out, pool, output);
  }
}

struct Prepared {
  PipelineDesc desc;
  std::optional<at::Tensor> pool;  // contiguous, present when the pipeline overlays
};

Prepared prepare(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
                 const Pipeline& pipeline, uint64_t seed, uint64_t step) {
  check_obs(obs);
  Prepared prepared;
  if (has_overlay(pipeline)) {
    TORCH_CHECK_VALUE(pool.has_value() && pool->defined(),
                      "the pipeline overlays distractors but pool is None; pass a uint8 "
                      "[P, C, H, W] pool");
    prepared.pool = pool->contiguous();
  }
  const at::Tensor* pool_ptr = prepared.pool ? &*prepared.pool : nullptr;
  prepared.desc = resolve_pipeline(pipeline, geometry_of(obs, pool_ptr), seed, step);
  return prepared;
}

}  // namespace

std::vector<int64_t> output_shape(const at::Tensor& obs, const Pipeline& pipeline) {
  check_obs(obs);
  int64_t h = obs.size(2);
  int64_t w = obs.size(3);
  for (const OpSpec& op : pipeline) {
    if (op.kind == OpKind::kCrop) {
      h = op.crop_h;
      w = op.crop_w;
    }
  }
  return {obs.size(0), obs.size(1), h, w};
}

at::Tensor augment(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
                   const Pipeline& pipeline, uint64_t seed, uint64_t step,
                   const OutputOptions& output) {
  const Prepared prepared = prepare(obs, pool, pipeline, seed, step);
  const at::ScalarType dtype = output_dtype(obs, output);
  const at::Tensor in = obs.contiguous();
  at::Tensor out = at::empty({obs.size(0), obs.size(1), prepared.desc.out_h, prepared.desc.out_w},
                             obs.options().dtype(dtype));
  dispatch(prepared.desc, in, out, prepared.pool ? &*prepared.pool : nullptr, output);
  return out;
}

void augment_(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
              const Pipeline& pipeline, uint64_t seed, uint64_t step) {
  const Prepared prepared = prepare(obs, pool, pipeline, seed, step);
  TORCH_CHECK_VALUE(prepared.desc.out_h == obs.size(2) && prepared.desc.out_w == obs.size(3),
                    "in-place augment needs a pipeline that keeps the frame size ", obs.size(2),
                    "x", obs.size(3), ", but it produces ", prepared.desc.out_h, "x",
                    prepared.desc.out_w, "; use the out-of-place form for crops");
  const at::Tensor* pool_ptr = prepared.pool ? &*prepared.pool : nullptr;
  bool staged_in_place = obs.is_contiguous() && obs.device().is_cpu();
#ifdef OBSAUG_WITH_CUDA
  if (obs.is_contiguous() && obs.device().is_cuda()) {
    staged_in_place = cuda_can_stage(prepared.desc, obs.size(2) * obs.size(3) * obs.element_size());
  }
#endif
  if (staged_in_place) {
    dispatch(prepared.desc, obs, obs, pool_ptr, {});
    return;
  }
  // Non-contiguous obs, or CUDA planes too large to stage: compute from a copy.
  const at::Tensor source = obs.is_contiguous() ? obs.clone() : obs.contiguous();
  if (obs.is_contiguous()) {
    dispatch(prepared.desc, source, obs, pool_ptr, {});
  } else {
    at::Tensor result = at::empty_like(source);
    dispatch(prepared.desc, source, result, pool_ptr, {});
    obs.copy_(result);
  }
}

at::Tensor shift(const at::Tensor& obs, uint64_t seed, uint64_t step, int64_t pad,
                 const std::string& padding, int64_t op_index) {
  return augment(obs, std::nullopt, {OpSpec::shift(pad, padding).at_index(op_index)}, seed, step);
}

at::Tensor crop(const at::Tensor& obs, uint64_t seed, uint64_t step, int64_t height, int64_t width,
                bool center, int64_t op_index) {
  return augment(obs, std::nullopt, {OpSpec::crop(height, width, center).at_index(op_index)}, seed,
                 step);
}

at::Tensor overlay(const at::Tensor& obs, const at::Tensor& pool, uint64_t seed, uint64_t step,
                   double alpha, std::optional<double> alpha_max, bool per_frame,
                   int64_t op_index) {
  return augment(obs, pool, {OpSpec::overlay(alpha, alpha_max, per_frame).at_index(op_index)}, seed,
                 step);
}

}  // namespace obsaug::ops
