// The obsaug op schemas (torch.ops.obsaug.*). Backends register their kernels
// in register_cpu.cpp and register_cuda.cpp; the fake kernels that let
// torch.compile trace the ops live in python/obsaug/ops.py.
#include "bindings/torch_ops.h"

#include <c10/util/Exception.h>
#include <torch/library.h>

#include "kernels/augment.h"

namespace obsaug::bindings {

at::Tensor augment(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
                   const std::string& pipeline, int64_t seed, int64_t step,
                   std::optional<at::ScalarType> out_dtype, double scale, double bias) {
  return ops::augment(obs, pool, parse_pipeline(pipeline), static_cast<uint64_t>(seed),
                      static_cast<uint64_t>(step), ops::OutputOptions{out_dtype, scale, bias});
}

void augment_(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
              const std::string& pipeline, int64_t seed, int64_t step) {
  ops::augment_(obs, pool, parse_pipeline(pipeline), static_cast<uint64_t>(seed),
                static_cast<uint64_t>(step));
}

at::Tensor gather_augment(const at::Tensor& storage, const at::Tensor& indices,
                          const std::optional<at::Tensor>& pool, const std::string& pipeline,
                          int64_t seed, int64_t step, std::optional<at::ScalarType> out_dtype,
                          double scale, double bias) {
  return ops::gather_augment(storage, indices, pool, parse_pipeline(pipeline),
                             static_cast<uint64_t>(seed), static_cast<uint64_t>(step),
                             ops::OutputOptions{out_dtype, scale, bias});
}

at::Tensor shift(const at::Tensor& obs, int64_t seed, int64_t step, int64_t pad,
                 const std::string& padding, int64_t op_index) {
  return ops::shift(obs, static_cast<uint64_t>(seed), static_cast<uint64_t>(step), pad, padding,
                    op_index);
}

at::Tensor crop(const at::Tensor& obs, int64_t seed, int64_t step, at::IntArrayRef size,
                bool center, int64_t op_index) {
  TORCH_CHECK_VALUE(size.size() == 1 || size.size() == 2, "crop: size must be N or (H, W), got ",
                    size);
  return ops::crop(obs, static_cast<uint64_t>(seed), static_cast<uint64_t>(step), size.front(),
                   size.back(), center, op_index);
}

at::Tensor overlay(const at::Tensor& obs, const at::Tensor& pool, int64_t seed, int64_t step,
                   double alpha, std::optional<double> alpha_max, bool per_frame,
                   int64_t op_index) {
  return ops::overlay(obs, pool, static_cast<uint64_t>(seed), static_cast<uint64_t>(step), alpha,
                      alpha_max, per_frame, op_index);
}

void overlay_(const at::Tensor& obs, const at::Tensor& pool, int64_t seed, int64_t step,
              double alpha, std::optional<double> alpha_max, bool per_frame, int64_t op_index) {
  ops::augment_(obs, pool, {OpSpec::overlay(alpha, alpha_max, per_frame).at_index(op_index)},
                static_cast<uint64_t>(seed), static_cast<uint64_t>(step));
}

}  // namespace obsaug::bindings

TORCH_LIBRARY(obsaug, m) {
  m.def(
      "augment(Tensor obs, Tensor? pool, str pipeline, int seed, int step, "
      "ScalarType? out_dtype=None, float scale=1.0, float bias=0.0) -> Tensor");
  m.def(
      "gather_augment(Tensor storage, Tensor indices, Tensor? pool, str pipeline, int seed, "
      "int step, ScalarType? out_dtype=None, float scale=1.0, float bias=0.0) -> Tensor");
  m.def("augment_(Tensor(a!) obs, Tensor? pool, str pipeline, int seed, int step) -> ()");
  m.def(
      "shift(Tensor obs, int seed, int step, int pad=4, str padding=\"replicate\", "
      "int op_index=0) -> Tensor");
  m.def(
      "crop(Tensor obs, int seed, int step, int[] size, bool center=False, int op_index=0) "
      "-> Tensor");
  m.def(
      "overlay(Tensor obs, Tensor pool, int seed, int step, float alpha=0.5, "
      "float? alpha_max=None, bool per_frame=False, int op_index=0) -> Tensor");
  m.def(
      "overlay_(Tensor(a!) obs, Tensor pool, int seed, int step, float alpha=0.5, "
      "float? alpha_max=None, bool per_frame=False, int op_index=0) -> ()");
}
