#include "kernels/input_checks.h"

#include <c10/util/Exception.h>

#include <cmath>
#include <cstdint>

#include "kernels/augment.h"
#include "kernels/augment_cpu.h"
#include "kernels/tensor_text.h"

namespace obsaug::ops {
namespace {

bool on_one_of(const c10::Device& device, Devices devices) {
  return device.is_cpu() || device.is_cuda() || (devices == Devices::kOrMeta && device.is_meta());
}

// The CPU loops refuse a setting of OBSAUG_CPU_LOOPS they do not know, rather
// than guess what it meant.
void check_cpu_loops_setting(const c10::Device& device) {
  if (!device.is_cpu()) return;
  const std::string problem = cpu_loops_setting_problem();
  TORCH_CHECK_VALUE(problem.empty(), problem);
}

}  // namespace

void check_obs(const at::Tensor& obs, Devices devices) {
  TORCH_CHECK_VALUE(obs.defined(), "obs must be a tensor [B, S*C, H, W], got None");
  TORCH_CHECK_TYPE(obs.scalar_type() == at::kByte || obs.scalar_type() == at::kFloat,
                   "obs must be uint8 or float32 (0..255) with 4 dims [B, S*C, H, W], got ",
                   describe(obs));
  TORCH_CHECK_VALUE(obs.dim() == 4,
                    "obs must be uint8 or float32 (0..255) with 4 dims [B, S*C, H, W], got ",
                    describe(obs));
  TORCH_CHECK_VALUE(on_one_of(obs.device(), devices), "obs must be on cpu or cuda, got ",
                    obs.device());
  check_cpu_loops_setting(obs.device());
}

void check_storage(const at::Tensor& storage, Devices devices) {
  TORCH_CHECK_VALUE(storage.defined(), "storage must be a tensor [N, C, H, W], got None");
  TORCH_CHECK_TYPE(storage.scalar_type() == at::kByte || storage.scalar_type() == at::kFloat,
                   "storage must be uint8 or float32 frames [N, C, H, W], got ", describe(storage));
  TORCH_CHECK_VALUE(storage.dim() == 4,
                    "storage must be uint8 or float32 frames [N, C, H, W], got ",
                    describe(storage));
  TORCH_CHECK_VALUE(on_one_of(storage.device(), devices), "storage must be on cpu or cuda, got ",
                    storage.device());
  check_cpu_loops_setting(storage.device());
}

void check_pool(const at::Tensor& pool, const c10::Device& device) {
  TORCH_CHECK_TYPE(pool.scalar_type() == at::kByte, "pool must be uint8 [P, C, H, W], got ",
                   describe(pool));
  TORCH_CHECK_VALUE(pool.dim() == 4, "pool must be uint8 [P, C, H, W], got ", describe(pool));
  TORCH_CHECK_VALUE(pool.device() == device, "pool must be on obs's device ", device, ", got ",
                    pool.device());
}

void check_required_pool(const std::optional<at::Tensor>& pool, const c10::Device& device) {
  TORCH_CHECK_VALUE(pool.has_value() && pool->defined(),
                    "the pipeline overlays distractors but pool is None; pass a uint8 "
                    "[P, C, H, W] pool");
  check_pool(*pool, device);
}

at::ScalarType output_dtype(const at::Tensor& input, const OutputOptions& output) {
  const at::ScalarType dtype = output.dtype.value_or(input.scalar_type());
  TORCH_CHECK_TYPE(dtype == at::kByte || dtype == at::kFloat,
                   "out_dtype must be uint8 or float32, got ", dtype);
  const std::string affine = output_affine_problem(output.scale, output.bias);
  TORCH_CHECK_VALUE(affine.empty(), affine);
  if (dtype == at::kByte) {
    TORCH_CHECK_TYPE(input.scalar_type() == at::kByte,
                     "out_dtype uint8 needs uint8 obs (float32 obs gives float32 output), got ",
                     input.scalar_type());
    TORCH_CHECK_VALUE(output.scale == 1.0 && output.bias == 0.0,
                      "scale and bias apply to float32 output only; pass out_dtype=float32 "
                      "(got uint8 with scale=",
                      output.scale, " bias=", output.bias, ")");
  }
  return dtype;
}

void check_frame_channels(const Pipeline& pipeline, int64_t frame_channels) {
  TORCH_CHECK_VALUE(frame_channels >= 0 && frame_channels <= INT32_MAX,
                    "frame_channels must be C in [1, 2^31), the channels of one stacked frame "
                    "(3 for RGB, 1 for grayscale, 4 for RGBD), or 0 to infer it, got ",
                    frame_channels);
  if (frame_channels == 0) return;
  FrameGeometry g;
  g.frame_channels = frame_channels;
  g.channels_source = kFrameChannelsSource;
  check_channel_mixing(pipeline, g);
}

void check_augment_inputs(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
                          const Pipeline& pipeline, const OutputOptions& output, Devices devices,
                          int64_t frame_channels) {
  check_obs(obs, devices);
  if (has_overlay(pipeline)) {
    check_required_pool(pool, obs.device());
  } else if (pool.has_value() && pool->defined()) {
    check_pool(*pool, obs.device());  // it still gives C (kernels/augment.h)
  }
  output_dtype(obs, output);
  check_frame_channels(pipeline, frame_channels);
}

void check_gather_inputs(const at::Tensor& storage, const std::optional<at::Tensor>& pool,
                         const Pipeline& pipeline, const OutputOptions& output, Devices devices) {
  check_storage(storage, devices);
  if (has_overlay(pipeline)) check_required_pool(pool, storage.device());
  output_dtype(storage, output);
}

}  // namespace obsaug::ops
