// Adapters from the torch.library schemas (bindings/torch_ops.cpp) to the C++
// op API (kernels/augment.h). Seeds and steps travel as SymInt (int64) in the
// schema, so torch.compile can keep a changing step dynamic, and are
// reinterpreted as the uint64 of DESIGN.md section 3. frame_channels is C,
// or 0 to infer it (kernels/augment.h).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>

#include <optional>
#include <string>

#include "kernels/op_schema.h"

namespace c10 {
class OperatorHandle;
}

namespace obsaug::bindings {

at::Tensor augment(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
                   const std::string& pipeline, int64_t seed, int64_t step,
                   std::optional<at::ScalarType> out_dtype, double scale, double bias,
                   int64_t frame_channels);
void augment_(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
              const std::string& pipeline, int64_t seed, int64_t step, int64_t frame_channels);
at::Tensor gather_augment(const at::Tensor& storage, const at::Tensor& indices,
                          const std::optional<at::Tensor>& pool, const std::string& pipeline,
                          int64_t seed, int64_t step, std::optional<at::ScalarType> out_dtype,
                          double scale, double bias, const std::optional<at::Tensor>& sample_ids);
// The out= forms (<op>_out, `Tensor(a!) out` keyword-only, returning
// nothing): the result written into `out` (kernels/augment.h, OutputOptions::out).
void augment_out(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
                 const std::string& pipeline, int64_t seed, int64_t step,
                 std::optional<at::ScalarType> out_dtype, double scale, double bias,
                 int64_t frame_channels, const at::Tensor& out);
void gather_augment_out(const at::Tensor& storage, const at::Tensor& indices,
                        const std::optional<at::Tensor>& pool, const std::string& pipeline,
                        int64_t seed, int64_t step, std::optional<at::ScalarType> out_dtype,
                        double scale, double bias, const std::optional<at::Tensor>& sample_ids,
                        const at::Tensor& out);
void shift_out(const at::Tensor& obs, int64_t seed, int64_t step, int64_t pad,
               const std::string& padding, int64_t op_index, const at::Tensor& out);
void crop_out(const at::Tensor& obs, int64_t seed, int64_t step, at::IntArrayRef size, bool center,
              int64_t op_index, const at::Tensor& out);
void overlay_out(const at::Tensor& obs, const at::Tensor& pool, int64_t seed, int64_t step,
                 double alpha, std::optional<double> alpha_max, bool per_frame, int64_t op_index,
                 bool distinct, const at::Tensor& out);
at::Tensor shift(const at::Tensor& obs, int64_t seed, int64_t step, int64_t pad,
                 const std::string& padding, int64_t op_index);
// obsaug.nn.RandomShift's call: shift(obs, seed, step=*step, pad, "replicate"),
// then *step += 1 (step: a CPU int64 scalar tensor; left as it was when the
// shift throws).
at::Tensor counted_shift(const at::Tensor& obs, const at::Tensor& step, int64_t seed, int64_t pad);
at::Tensor crop(const at::Tensor& obs, int64_t seed, int64_t step, at::IntArrayRef size,
                bool center, int64_t op_index);
at::Tensor overlay(const at::Tensor& obs, const at::Tensor& pool, int64_t seed, int64_t step,
                   double alpha, std::optional<double> alpha_max, bool per_frame, int64_t op_index,
                   bool distinct);
void overlay_(const at::Tensor& obs, const at::Tensor& pool, int64_t seed, int64_t step,
              double alpha, std::optional<double> alpha_max, bool per_frame, int64_t op_index,
              bool distinct);

// The single ops of the second family are declared from the op schema:
// torch.ops.obsaug.<name>(Tensor obs, SymInt seed, SymInt step, <the op's keys with
// their defaults>, int op_index=0) -> Tensor, and its out= form <name>_out
// (the same arguments, then `*, Tensor(a!) out`, returning nothing), all run
// by one boxed kernel.
bool declared_from_schema(const OpSchema& op);
std::string single_op_declaration(const OpSchema& op, bool out_form);
void run_single_op(const c10::OperatorHandle& handle, torch::jit::Stack* stack);

}  // namespace obsaug::bindings
