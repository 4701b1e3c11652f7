#include "bindings/grad_refusal.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>

#include <vector>

namespace obsaug::bindings {

void refuse_grad(const at::Tensor& tensor, const std::string& caller, const std::string& arg) {
  TORCH_CHECK_VALUE(!(at::GradMode::is_enabled() && tensor.defined() && tensor.requires_grad()),
                    caller, ": ", arg,
                    " requires grad, but obsaug's augmentations are not differentiable (the "
                    "result would drop out of the autograd graph); pass ",
                    arg, ".detach() or call it under torch.no_grad()");
}

void note_written(const at::Tensor& tensor) {
  if (tensor.defined() && !tensor.is_inference()) tensor.unsafeGetTensorImpl()->bump_version();
}

void refuse_grad_then_call(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& arguments = op.schema().arguments();
  const auto inputs = torch::jit::last(*stack, arguments.size());
  const std::string caller = "torch.ops.obsaug." + op.schema().name().substr(8);  // "obsaug::"
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (inputs[i].isTensor()) refuse_grad(inputs[i].toTensor(), caller, arguments[i].name());
  }
  const at::AutoDispatchBelowAutograd below_autograd;
  op.callBoxed(stack);
}

void call_then_note_writes(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& arguments = op.schema().arguments();
  const auto inputs = torch::jit::last(*stack, arguments.size());
  std::vector<at::Tensor> written;  // the Tensor(a!) arguments
  for (size_t i = 0; i < arguments.size(); ++i) {
    const c10::AliasInfo* alias = arguments[i].alias_info();
    if (inputs[i].isTensor() && alias != nullptr && alias->isWrite())
      written.push_back(inputs[i].toTensor());
  }
  {
    const at::AutoDispatchBelowADInplaceOrView below;
    op.callBoxed(stack);
  }
  for (const at::Tensor& t : written) note_written(t);
}

}  // namespace obsaug::bindings
