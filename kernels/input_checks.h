// The checks of the ops' inputs that read only dtypes, ranks, devices and
// scalar arguments (never sizes or data), so they run on FakeTensors too:
// augment and gather_augment (kernels/augment.h) run them first, and the
// fake kernels (python/obsaug/ops.py, through obsaug._C) run the same
// functions, so a torch.compile trace fails where and as the eager call does.
// TypeError for a dtype, ValueError for a rank, device or value (README "Errors").
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <optional>

#include "kernels/pipeline_spec.h"

namespace obsaug::ops {

struct OutputOptions;

// Where the inputs may live: cpu or cuda, or also meta for the fake kernels
// (torch.library runs the fake kernel as the ops' Meta kernel).
enum class Devices { kCpuOrCuda, kOrMeta };

// obs: uint8 or float32, 4 dims [B, S*C, H, W], on one of `devices`; on the
// CPU, OBSAUG_CPU_LOOPS set to a value the CPU loops know (kernels/augment_cpu.h).
void check_obs(const at::Tensor& obs, Devices devices = Devices::kCpuOrCuda);
// storage of gather_augment: uint8 or float32 frames [N, C, H, W], on one of
// `devices`; on the CPU, the same setting checked.
void check_storage(const at::Tensor& storage, Devices devices = Devices::kCpuOrCuda);
// pool: uint8 [P, C, H, W] on `device` (obs's).
void check_pool(const at::Tensor& pool, const c10::Device& device);
// The pool of a pipeline that overlays distractors: present (not None) and checked.
void check_required_pool(const std::optional<at::Tensor>& pool, const c10::Device& device);
// The result's dtype (out_dtype, else the input's): uint8 or float32; uint8
// only from uint8 input and without scale or bias; scale and bias finite.
at::ScalarType output_dtype(const at::Tensor& input, const OutputOptions& output);

// What the messages call an explicit C (augment's frame_channels).
inline constexpr const char* kFrameChannelsSource = "frame_channels";

// augment's frame_channels: C in [1, 2^31), or 0 to infer it; with an explicit
// C, every op that mixes channels must see C = 3 (check_channel_mixing).
// Reads no size, so it also runs on symbolic ones.
void check_frame_channels(const Pipeline& pipeline, int64_t frame_channels);

// Everything above that applies to augment(obs, pool, pipeline, ...) and to
// gather_augment(storage, indices, pool, pipeline, ...), in their order.
void check_augment_inputs(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
                          const Pipeline& pipeline, const OutputOptions& output,
                          Devices devices = Devices::kCpuOrCuda, int64_t frame_channels = 0);
void check_gather_inputs(const at::Tensor& storage, const std::optional<at::Tensor>& pool,
                         const Pipeline& pipeline, const OutputOptions& output,
                         Devices devices = Devices::kCpuOrCuda);

}  // namespace obsaug::ops
