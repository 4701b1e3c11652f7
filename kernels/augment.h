// obsaug's C++ op API on at::Tensor (DESIGN.md sections 2, 3 and 7).
//
// Tensors: obs is [B, S*C, H, W], uint8 or float32 (0..255), CPU or CUDA,
// any strides; pool is [P, C, Hp, Wp] uint8 on obs's device. C (it matters
// to the ops that mix channels and to cutout's colour per channel) is
// augment's frame_channels when > 0 (the Engine passes its config's), else
// the pool's when one is given, else 3 when S*C is a multiple of 3 and 1 when
// not. Every draw is a
// pure function of (seed, step, sample index, op index, frame), so the same
// call gives the same result on CPU and CUDA. On CUDA, work is enqueued on
// the current stream with no host synchronisation.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>

#include "kernels/input_checks.h"
#include "kernels/pipeline_spec.h"

namespace obsaug::ops {

struct OutputOptions {
  std::optional<at::ScalarType> dtype;  // uint8 or float32; default: obs's dtype
  double scale = 1.0;                   // float32 output: out = v * scale + bias
  double bias = 0.0;
  // Where the result goes (out=): undefined = a fresh tensor. A caller's
  // tensor must have the result's dtype (TypeError otherwise), shape and
  // device, be contiguous and share no memory with the inputs (ValueError;
  // augment_ is the in-place form); all checked before anything is written.
  // The call returns this tensor.
  at::Tensor out{};
};

// The step a call draws with: a number, or taken from a counter only once
// every check of the call has passed, so that a call rejected for its
// arguments takes no step (the Engine's augment without an explicit step).
// The ops take it before they read the pool, so taking it may also refresh
// the pool (the Engine's).
class Step {
 public:
  Step(uint64_t value) : value_(value) {}  // NOLINT(google-explicit-constructor): a fixed step
  static Step taken_by(std::function<uint64_t()> take) {
    Step s(0);
    s.take_ = std::move(take);
    return s;
  }
  uint64_t take() const { return take_ ? take_() : value_; }

 private:
  uint64_t value_;
  std::function<uint64_t()> take_;
};

// The fused pipeline, out of place. One read of the input, one write of the output.
at::Tensor augment(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
                   const Pipeline& pipeline, uint64_t seed, const Step& step,
                   const OutputOptions& output = {}, int64_t frame_channels = 0);

// In place: the pipeline must keep the frame size (no shrinking crop).
void augment_(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
              const Pipeline& pipeline, uint64_t seed, const Step& step,
              int64_t frame_channels = 0);

// Gathers stacks from a frame storage and augments them in one pass:
// sample b's stacked frame s is storage[indices[b, s]]. storage is
// [N, C, H, W] uint8 or float32, indices int64 [B, S] on storage's device;
// the result equals augment(storage[indices].reshape(B, S*C, H, W), ...,
// frame_channels = C): C is the storage's.
// With check_indices (the default) every index is checked to lie in [0, N),
// which synchronises once on CUDA; callers that made the indices themselves
// may skip it. With sample_ids (int64 [B], each in [0, 2^32), on storage's
// device; checked, which synchronises once on CUDA), row b draws its
// parameters as sample sample_ids[b] instead of b, so rows gathered on
// another rank equal the requester's own rows (obsaug.distributed). With
// out_rows (int64 [B] on the CPU, distinct, each in [0, out.size(0)); needs
// output.out on the CPU, of any number of rows), row b is written to
// out[out_rows[b]]; the other rows of out are left as they are.
at::Tensor gather_augment(const at::Tensor& storage, const at::Tensor& indices,
                          const std::optional<at::Tensor>& pool, const Pipeline& pipeline,
                          uint64_t seed, const Step& step, const OutputOptions& output = {},
                          bool check_indices = true,
                          const std::optional<at::Tensor>& sample_ids = std::nullopt,
                          const std::optional<at::Tensor>& out_rows = std::nullopt);

// gather_augment's checks of `indices` against `storage` (dtype, shape,
// device, every value in [0, N)), for callers that validate before they
// commit to a call.
void check_gather_indices(const at::Tensor& storage, const at::Tensor& indices);

// Single ops; `op_index` is k in the Philox counter.
// `out`, when defined, receives the result as OutputOptions::out says.
at::Tensor shift(const at::Tensor& obs, uint64_t seed, uint64_t step, int64_t pad = 4,
                 const std::string& padding = "replicate", int64_t op_index = 0,
                 const at::Tensor& out = {});
at::Tensor crop(const at::Tensor& obs, uint64_t seed, uint64_t step, int64_t height, int64_t width,
                bool center = false, int64_t op_index = 0, const at::Tensor& out = {});
at::Tensor overlay(const at::Tensor& obs, const at::Tensor& pool, uint64_t seed, uint64_t step,
                   double alpha = 0.5, std::optional<double> alpha_max = std::nullopt,
                   bool per_frame = false, int64_t op_index = 0, const at::Tensor& out = {},
                   bool distinct = false);

// Output shape of `pipeline` on `obs`, for callers that preallocate.
std::vector<int64_t> output_shape(const at::Tensor& obs, const Pipeline& pipeline);

// Every check that augment, augment_ and gather_augment make before they read
// an element, in their order, with their errors: everything but the values
// of gather_augment's indices and sample_ids. They read sizes, so the sizes
// must be concrete, and never data, so they run on FakeTensors: the fake
// kernels (python/obsaug/ops.py) call them, and a torch.compile trace
// refuses what the eager call refuses. The first and last return the
// result's shape. (frame_channels is augment's; seed and step play no part
// in a check.)
std::vector<int64_t> check_augment_call(const at::Tensor& obs,
                                        const std::optional<at::Tensor>& pool,
                                        const Pipeline& pipeline, const OutputOptions& output,
                                        Devices devices = Devices::kCpuOrCuda,
                                        int64_t frame_channels = 0);
void check_augment_inplace_call(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
                                const Pipeline& pipeline, Devices devices = Devices::kCpuOrCuda,
                                int64_t frame_channels = 0);
std::vector<int64_t> check_gather_call(const at::Tensor& storage, const at::Tensor& indices,
                                       const std::optional<at::Tensor>& pool,
                                       const Pipeline& pipeline, const OutputOptions& output,
                                       const std::optional<at::Tensor>& sample_ids = std::nullopt,
                                       Devices devices = Devices::kCpuOrCuda);

}  // namespace obsaug::ops
