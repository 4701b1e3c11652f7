// Adapters from the torch.library schemas (bindings/torch_ops.cpp) to the C++
// op API (kernels/augment.h). Seeds and steps travel as int64 in the schema
// and are reinterpreted as the uint64 of DESIGN.md section 3.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>

namespace obsaug::bindings {

at::Tensor augment(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
                   const std::string& pipeline, int64_t seed, int64_t step,
                   std::optional<at::ScalarType> out_dtype, double scale, double bias);
void augment_(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
              const std::string& pipeline, int64_t seed, int64_t step);
at::Tensor gather_augment(const at::Tensor& storage, const at::Tensor& indices,
                          const std::optional<at::Tensor>& pool, const std::string& pipeline,
                          int64_t seed, int64_t step, std::optional<at::ScalarType> out_dtype,
                          double scale, double bias);
at::Tensor shift(const at::Tensor& obs, int64_t seed, int64_t step, int64_t pad,
                 const std::string& padding, int64_t op_index);
at::Tensor crop(const at::Tensor& obs, int64_t seed, int64_t step, at::IntArrayRef size,
                bool center, int64_t op_index);
at::Tensor overlay(const at::Tensor& obs, const at::Tensor& pool, int64_t seed, int64_t step,
                   double alpha, std::optional<double> alpha_max, bool per_frame, int64_t op_index);
void overlay_(const at::Tensor& obs, const at::Tensor& pool, int64_t seed, int64_t step,
              double alpha, std::optional<double> alpha_max, bool per_frame, int64_t op_index);

}  // namespace obsaug::bindings
